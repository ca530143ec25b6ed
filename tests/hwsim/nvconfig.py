"""Firmware configuration (NVCONFIG) of the simulated ConnectX cards: which parameters each model has, their types,
defaults and value syntax, as `mlxconfig`/`mstconfig` show and accept them.  Pure, stdlib only.

Sources (tests/fixtures/realworld/INDEX.md rows `mlxconfig/*` and `tool-output/mstconfig-*`, docs/firmware.md):

* types, field widths and enum values: mstflint's parameter database `mlxconfig/mlxconfig_dbs/mlxconfig_host.db`
  (Mellanox/mstflint @ b9d9e844a14a): SRIOV_EN BOOL, NUM_OF_VFS 16 bits, LINK_TYPE ENUM IB=1 ETH=2, ATS_ENABLED BOOL,
  ADVANCED_PCI_SETTINGS BOOL, MAX_ACC_OUT_READ 16 bits (1 KB units, 0 = device default) listed only while
  ADVANCED_PCI_SETTINGS is set, ROCE_CC_PRIO_MASK 8 bits, CNP_DSCP 6 bits, CNP_802P_PRIO 3 bits (per port: ``_P<n>``),
  ROCE_CONTROL ENUM DEVICE_DEFAULT=0 ROCE_DISABLE=1 ROCE_ENABLE=2, PROG_PARSE_GRAPH only with the flex parser
  capability;
* a dependency is evaluated on the Next Boot values (`mlxcfg_generic_commander.cpp` ``checkDependency()`` queries
  ``QueryNext``), so MAX_ACC_OUT_READ appears once ADVANCED_PCI_SETTINGS=True is staged, before any reset;
* defaults seen in real outputs: ROCE_CC_PRIO_MASK 255, CNP_DSCP 48, CNP_802P_PRIO 6 (ConnectX-4 Lx/ConnectX-5 dumps),
  ATS_ENABLED False(0), LINK_TYPE_P1 IB(1), PROG_PARSE_GRAPH False(0), DPA_AUTHENTICATION True(1) (ConnectX-7,
  sriov-network-device-plugin#601), ROCE_CC_LEGACY_DCQCN False(0), ROCE_ADAPTIVE_ROUTING_EN False(0),
  ROCE_CONTROL ROCE_ENABLE(2), no LINK_TYPE (Ethernet only) and no PROG_PARSE_GRAPH (NVIDIA/5t5g#3: "-E- Unknown
  Parameter: PROG_PARSE_GRAPH") on ConnectX-6 Dx.

Each model lists a subset of the parameters the real firmware has (a real query lists 150-300); a name outside its
subset is refused as the real tool refuses a parameter the device does not have.  [inference] ConnectX-6 (VPI) gets
the ConnectX-7 subset without DPA_AUTHENTICATION; ATS_ENABLED on ConnectX-6 Dx and ConnectX-6 is not from a captured
output (NVIDIA's nic-configuration-operator sets ATS_ENABLED=0 on any card it manages for GPUDirect).

Values are kept as Python values: bool for BOOL, int for unsigned, the enum's name for ENUM (``"IB"``), which is what
`Card.link_layer()` and `Card.totalvfs` read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BOOL_VALUES = (("False", 0), ("True", 1))
LINK_TYPES = (("IB", 1), ("ETH", 2))
ROCE_CONTROL = (("DEVICE_DEFAULT", 0), ("ROCE_DISABLE", 1), ("ROCE_ENABLE", 2))


@dataclass(frozen=True)
class Param:
    """One firmware parameter of a model."""

    name: str
    kind: str  # "bool", "uint" or "enum"
    default: Any
    bits: int = 0
    values: tuple[tuple[str, int], ...] = ()
    #: a BOOL parameter whose Next Boot value must be True for this one to exist (MAX_ACC_OUT_READ)
    depends: str | None = None
    #: the device's own limit below the field width (NUM_OF_VFS: the VFs per PF the firmware offers)
    maximum: int | None = None

    def choices(self) -> tuple[tuple[str, int], ...]:
        return BOOL_VALUES if self.kind == "bool" else self.values

    def parse(self, raw: Any) -> Any:
        """The value `raw` (name or number, as mlxconfig takes it on its command line) means; ValueError with the
        message mlxconfig prints (mlxcfg_param.cpp: parseValueAux)."""
        text = str(raw).strip()
        if self.kind == "uint":
            number = _number(text)
            if number is None:
                raise ValueError("Cannot parse the value")
            if number >= 1 << self.bits:
                raise ValueError(f"The value {text} is not valid,  as its size is {self.bits} bits")
            if self.maximum is not None and number > self.maximum:
                raise ValueError(f"The value {text} is above the maximum {self.maximum} of {self.name}")
            return number
        number = _number(text)
        for name, value in self.choices():
            if (number is not None and number == value) or (number is None and name.lower() == text.lower()):
                return (name == "True") if self.kind == "bool" else name
        raise ValueError(f"Unknown value {text}")

    def code(self, value: Any) -> int:
        """The number behind a value."""
        if self.kind == "uint":
            return int(value)
        if self.kind == "bool":
            return 1 if value else 0
        return dict(self.values)[value]

    def show(self, value: Any) -> str:
        """The value as the query prints it: ``True(1)``, ``ETH(2)``, ``255``."""
        if self.kind == "uint":
            return str(int(value))
        name = ("True" if value else "False") if self.kind == "bool" else value
        return f"{name}({self.code(value)})"


def _number(text: str) -> int | None:
    try:
        return int(text, 16) if text.lower().startswith("0x") else (int(text) if text.isdigit() else None)
    except ValueError:
        return None


def _bool(name: str, default: bool, depends: str | None = None) -> Param:
    return Param(name, "bool", default, depends=depends)


def _uint(name: str, bits: int, default: int, depends: str | None = None, maximum: int | None = None) -> Param:
    return Param(name, "uint", default, bits=bits, depends=depends, maximum=maximum)


def _enum(name: str, values: tuple[tuple[str, int], ...], default: str) -> Param:
    return Param(name, "enum", default, values=values)


#: per model: (global parameters before the port ones, per-port makers, global parameters after them)
_EXTRA_FRONT = {
    "connectx-7": (_bool("PROG_PARSE_GRAPH", False),),
    "connectx-6": (_bool("PROG_PARSE_GRAPH", False),),
    "connectx-6dx": (_bool("ROCE_ADAPTIVE_ROUTING_EN", False), _bool("ROCE_CC_LEGACY_DCQCN", False)),
}
_EXTRA_BACK = {
    "connectx-7": (_bool("DPA_AUTHENTICATION", True),),
}
#: the VFs per PF the simulated firmware offers (the simulator's earlier limit; real cards report theirs)
MAX_VFS = 127


def catalogue(model: str, ports: int, vpi: bool) -> dict[str, Param]:
    """``{name: Param}`` of a ConnectX model with `ports` ports, in the order the query lists them; {} for a model
    the simulator gives no NVCONFIG (not a ConnectX)."""
    if model not in _EXTRA_FRONT:
        return {}
    params = list(_EXTRA_FRONT[model])
    params += [_uint("NUM_OF_VFS", 16, 0, maximum=MAX_VFS), _bool("SRIOV_EN", False)]
    if vpi:
        params += [_enum(f"LINK_TYPE_P{port}", LINK_TYPES, "IB") for port in range(1, ports + 1)]
    for port in range(1, ports + 1):
        params += [_uint(f"ROCE_CC_PRIO_MASK_P{port}", 8, 255)]
    for port in range(1, ports + 1):
        params += [_uint(f"CNP_802P_PRIO_P{port}", 3, 6), _uint(f"CNP_DSCP_P{port}", 6, 48)]
    for port in range(1, ports + 1):
        params += [_bool(f"KEEP_ETH_LINK_UP_P{port}", True)]
    params += [_enum("ROCE_CONTROL", ROCE_CONTROL, "ROCE_ENABLE")]
    params += list(_EXTRA_BACK.get(model, ()))
    params += [_bool("ATS_ENABLED", False), _bool("ADVANCED_PCI_SETTINGS", False),
               _uint("MAX_ACC_OUT_READ", 16, 0, depends="ADVANCED_PCI_SETTINGS")]
    return dict((param.name, param) for param in params)


def defaults(params: dict[str, Param]) -> dict[str, Any]:
    """The Default column."""
    return dict((name, param.default) for name, param in params.items())


def listed(params: dict[str, Param], next_values: dict[str, Any]) -> list[str]:
    """The parameters the query lists: those whose dependency holds on the Next Boot values."""
    return [name for name, param in params.items() if param.depends is None or bool(next_values.get(param.depends))]
