"""Load and validate node archetype specs (YAML) into plain dataclasses.

The schema is documented in tests/hwsim/README.md. Validation is strict on purpose: a typo in a spec would
otherwise silently produce a different machine, and every test built on it would test the wrong thing.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import fmt, pciconf
from .models import HW_COUNTER_BITS, MODELS, Model

SPEC_DIR = Path(__file__).resolve().parent / "specs"


class SpecError(ValueError):
    """A spec does not follow the schema."""


@dataclass
class ModuleSpec:
    """One kernel module the node could load (its modinfo, in short)."""

    name: str
    size: int
    depends: list[str]
    params: dict[str, str]
    load_error: str = ""
    #: modules that use the MLNX/DOCA-OFED peer-memory API (nvidia_peermem): True when the catalogue entry has
    #: ``built_against_ofed``, the OFED build whose symbols the module was compiled against (None = built without them)
    needs_ofed_symbols: bool = False
    built_against_ofed: str | None = None
    #: False once the module file was removed from disk at runtime (Node.set_module)
    on_disk: bool = True


@dataclass
class FunctionSpec:
    """One PCI function of a NIC card = one port with its netdev and RDMA device."""

    netdev: str | None = None
    rdma: str | None = None
    node_guid: int | None = None
    mac: bytes | None = None
    mtu: int | None = None
    port_state: str = "ACTIVE"
    lid: int = 0
    sm_lid: int = 0
    rate: str | None = None
    #: physical port state override (phys_state_to_str() names: Polling, Disabled, LinkUp ...); None = follows port_state
    phys_state: str | None = None
    #: PMA PortCounters of the port (``counters/<name>``); counters not given read 0
    counters: dict[str, int] = field(default_factory=dict)
    #: mlx5 hw_counters of the port at power-on (``hw_counters/<name>``, the model's names); not given read 0
    hw_counters: dict[str, int] = field(default_factory=dict)


#: ``phys_state`` values as drivers/infiniband/core/sysfs.c phys_state_to_str() names them (index = the number)
PHYS_STATES = ("<unknown>", "Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery",
               "Phy Test")
#: the PortCounters error counters the kernel shows under ``ports/<n>/counters/`` (sysfs.c PORT_PMA_ATTR) and their
#: widths in bits: the PMA saturates each at its maximum, it does not wrap
PMA_COUNTERS = {"symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
                "port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16,
                "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
                "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16, "port_xmit_wait": 32}


@dataclass
class DeviceSpec:
    """A PCI device: bridge, GPU or NIC card (a NIC card has one device entry per function)."""

    kind: str
    bdf: str
    model: Model
    model_name: str
    children: list[DeviceSpec] = field(default_factory=list)
    functions: list[FunctionSpec] = field(default_factory=list)
    firmware: dict[str, Any] = field(default_factory=dict)
    firmware_next: dict[str, Any] = field(default_factory=dict)
    guid: int | None = None
    vf_offset: int | None = None
    vf_stride: int = 1
    #: PCIe link overrides: max_speed/max_width (Link Capabilities) and current_speed/current_width (what trained)
    link: dict[str, int] = field(default_factory=dict)
    #: ACS Control at power-on (bridges that are root or downstream ports); None = the hardware reset value 0
    acs: int | None = None
    #: NICs: the running firmware version (``fw_ver``); None = the model's
    fw_ver: str | None = None


@dataclass
class HostBridgeSpec:
    """A PCI host bridge (root complex) `pciDDDD:BB` with its NUMA node."""

    domain: int
    bus: int
    numa_node: int
    children: list[DeviceSpec]

    @property
    def name(self) -> str:
        """sysfs directory name, e.g. pci0000:17 or pci10000:00."""
        return f"pci{self.domain:04x}:{self.bus:02x}"


@dataclass
class Spec:
    """A whole node archetype."""

    name: str
    description: str
    source: str | None
    kernel_release: str
    cmdline: str
    cpu: dict[str, Any]
    numa: dict[int, list[int]]
    modules: dict[str, ModuleSpec]
    modules_loaded: list[str]
    ofed: str | None
    nvidia_driver: str | None
    sysctl: dict[str, dict[str, int]]
    devconf_inherit_init_net: int
    rdma_cgroup: dict[str, Any] | None
    delays: dict[str, float]
    host_bridges: list[HostBridgeSpec]
    path: Path | None = None
    #: the NVIDIA driver's kernel module flavour: the open GPU kernel modules (True) or the proprietary ones
    nvidia_open: bool = False
    #: how VF netdevs get their final name: ``predictable`` (udev renames the kernel's eth%d / ib%d name to the
    #: systemd SR-IOV name ``<PF device name>v<N>``, ``delays.udev_rename`` s after registration) or ``kernel``
    #: (no rule names VFs: they keep the kernel's lowest free eth%d / ib%d, which can differ after every re-probe)
    vf_netdev_naming: str = "predictable"

    def all_devices(self) -> list[tuple[HostBridgeSpec, list[DeviceSpec], DeviceSpec]]:
        """Every device with its host bridge and bridge ancestry, in bus order (the kernel's probe order)."""
        out: list[tuple[HostBridgeSpec, list[DeviceSpec], DeviceSpec]] = []

        def walk(host: HostBridgeSpec, ancestry: list[DeviceSpec], devices: list[DeviceSpec]) -> None:
            for dev in devices:
                out.append((host, ancestry, dev))
                walk(host, ancestry + [dev], dev.children)

        for host in self.host_bridges:
            walk(host, [], host.children)
        out.sort(key=lambda item: fmt.bdf_rid(item[2].bdf))
        return out

    @property
    def cpus(self) -> list[int]:
        """All CPUs of the node."""
        return sorted(cpu for cpus in self.numa.values() for cpu in cpus)


# modinfo-style defaults: name -> (size, depends, params). Specs may add or override entries.
DEFAULT_MODULES: dict[str, tuple[int, list[str], dict[str, str]]] = {
    "ib_core": (520192, [], {"netns_mode": "Y"}),
    "ib_uverbs": (200704, ["ib_core"], {}),
    "ib_umad": (45056, ["ib_core"], {}),
    "iw_cm": (61440, ["ib_core"], {}),
    "ib_cm": (139264, ["ib_core"], {}),
    "rdma_cm": (147456, ["ib_core", "iw_cm", "ib_cm"], {}),
    "rdma_ucm": (36864, ["ib_core", "ib_uverbs", "rdma_cm"], {}),
    "ib_ipoib": (176128, ["ib_core", "ib_cm"], {}),
    "mlxfw": (36864, [], {}),
    "psample": (20480, [], {}),
    "mlx5_core": (2469888, ["mlxfw", "psample"], {}),
    "mlx5_ib": (507904, ["ib_core", "ib_uverbs", "mlx5_core"], {}),
    "nvidia": (62586880, [], {}),
    "nvidia_modeset": (1335296, ["nvidia"], {}),
    "nvidia_uvm": (4956160, ["nvidia"], {}),
    "nvidia_peermem": (16384, ["ib_core", "nvidia"], {"peerdirect_support": "0", "persistent_api_support": "1"}),
    "i40e": (577536, [], {}),
    "iavf": (286720, [], {}),
    "br_netfilter": (32768, [], {}),
    "overlay": (188416, [], {}),
}

_TOP_KEYS = {"name", "description", "source", "cpu", "kernel", "numa", "modules", "ofed", "nvidia_driver",
             "nvidia_kernel_module", "sysctl", "cgroup", "delays", "pci", "vf_netdev_naming"}
#: `ofed_info -s` without the colon: MLNX_OFED_LINUX-<major.minor>-<a.b.c.d> or OFED-internal-<YY.MM>-<a.b.c[.d[.e]]>
OFED_RE = r"^(MLNX_OFED_LINUX|OFED-internal)-\d+\.\d+-\d+(\.\d+)*$"
_DELAY_KEYS = {"sriov_numvfs_write", "vf_probe", "bind", "udev_rename"}
VF_NETDEV_NAMING = ("predictable", "kernel")
_SYSCTL_KEYS = ("arp_ignore", "arp_announce", "rp_filter")


def archetypes() -> list[str]:
    """Names of the shipped archetypes (spec files under specs/)."""
    return sorted(path.stem for path in SPEC_DIR.glob("*.yaml"))


def load(name_or_path: str | Path) -> Spec:
    """Load an archetype by name, or a spec file by path."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = SPEC_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise SpecError(f"no such spec: {name_or_path} (archetypes: {', '.join(archetypes())})")
    with path.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    spec = parse(data, str(path))
    spec.path = path.resolve()
    return spec


def parse(data: Any, where: str = "spec") -> Spec:
    """Validate a loaded YAML document and turn it into a Spec."""
    _require(isinstance(data, dict), where, "must be a mapping")
    unknown = set(data) - _TOP_KEYS
    _require(not unknown, where, f"unknown keys {sorted(unknown)}")
    kernel = data.get("kernel") or {}
    numa = _parse_numa(data.get("numa"), where)
    modules, loaded = _parse_modules(data.get("modules") or {}, where)
    sysctl, inherit = _parse_sysctl(data.get("sysctl") or {}, where)
    delays = {key: 0.0 for key in _DELAY_KEYS}
    for key, value in (data.get("delays") or {}).items():
        _require(key in _DELAY_KEYS, f"{where}: delays", f"unknown delay {key!r}")
        delays[key] = float(value)
    hosts = [_parse_host(item, numa, f"{where}: pci[{idx}]") for idx, item in enumerate(data.get("pci") or [])]
    flavour = data.get("nvidia_kernel_module", "proprietary")
    _require(flavour in ("proprietary", "open"), f"{where}: nvidia_kernel_module", "must be proprietary or open")
    naming = data.get("vf_netdev_naming", "predictable")
    _require(naming in VF_NETDEV_NAMING, f"{where}: vf_netdev_naming", f"must be one of {', '.join(VF_NETDEV_NAMING)}")
    ofed = data.get("ofed")
    _require(ofed is None or bool(re.match(OFED_RE, str(ofed))), f"{where}: ofed",
             f"{ofed!r} is not an `ofed_info -s` version (MLNX_OFED_LINUX-5.4-3.1.0.0, OFED-internal-24.10-1.1.4.0.200)")
    spec = Spec(
        name=str(data.get("name") or Path(where).stem),
        description=str(data.get("description") or ""),
        source=data.get("source"),
        kernel_release=str(kernel.get("release", "6.1.0-28-amd64")),
        cmdline=str(kernel.get("cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet")),
        cpu=_parse_cpu(data.get("cpu") or _cpu_of_this_machine() or {}, f"{where}: cpu"),
        numa=numa,
        modules=modules,
        modules_loaded=loaded,
        ofed=ofed,
        nvidia_driver=data.get("nvidia_driver"),
        sysctl=sysctl,
        devconf_inherit_init_net=inherit,
        rdma_cgroup=(data.get("cgroup") or {}).get("rdma"),
        delays=delays,
        host_bridges=hosts,
        nvidia_open=flavour == "open",
        vf_netdev_naming=naming,
    )
    _check_unique(spec, where)
    return spec


def _require(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise SpecError(f"{where}: {message}")


def _parse_numa(items: Any, where: str) -> dict[int, list[int]]:
    _require(isinstance(items, list) and items, f"{where}: numa", "needs a list of {id, cpus}")
    numa: dict[int, list[int]] = {}
    for item in items:
        _require(isinstance(item, dict) and "id" in item, f"{where}: numa", f"bad entry {item!r}")
        numa[int(item["id"])] = fmt.parse_cpulist(str(item.get("cpus", "")))
    return numa


def _parse_modules(data: dict[str, Any], where: str) -> tuple[dict[str, ModuleSpec], list[str]]:
    catalogue = copy.deepcopy(DEFAULT_MODULES)
    for name, entry in (data.get("catalogue") or {}).items():
        entry = entry or {}
        size, depends, params = catalogue.get(name, (16384, [], {}))
        catalogue[name] = (int(entry.get("size", size)), list(entry.get("depends", depends)),
                           {k: str(v) for k, v in (entry.get("params") or params).items()})
    modules = {name: ModuleSpec(name, size, deps, params) for name, (size, deps, params) in catalogue.items()}
    for name, entry in (data.get("catalogue") or {}).items():
        if entry and entry.get("load_error"):
            modules[name].load_error = str(entry["load_error"])
        if entry and "built_against_ofed" in entry:
            built = entry["built_against_ofed"]
            _require(built is None or bool(re.match(OFED_RE, str(built))), f"{where}: modules.catalogue.{name}",
                     f"built_against_ofed {built!r} is not an `ofed_info -s` version or null")
            modules[name].needs_ofed_symbols = True
            modules[name].built_against_ofed = None if built is None else str(built)
    loaded = list(data.get("loaded") or [])
    for name in loaded:
        _require(name in modules, f"{where}: modules.loaded", f"{name!r} is not in the catalogue")
    return modules, loaded


def _parse_sysctl(data: dict[str, Any], where: str) -> tuple[dict[str, dict[str, int]], int]:
    base = {key: 0 for key in _SYSCTL_KEYS}
    out: dict[str, dict[str, int]] = {"all": dict(base), "default": dict(base)}
    for scope, values in (data.get("ipv4_conf") or {}).items():
        out.setdefault(scope, {})
        for key, value in (values or {}).items():
            _require(key in _SYSCTL_KEYS, f"{where}: sysctl.ipv4_conf.{scope}", f"unsupported key {key!r}")
            out[scope][key] = int(value)
    return out, int(data.get("devconf_inherit_init_net", 0))


_CPU_VENDORS = ("GenuineIntel", "AuthenticAMD", "HygonGenuine")


def _cpu_of_this_machine() -> dict[str, Any] | None:
    """With HWSIM_CPUINFO=/proc/cpuinfo (molecule's create step sets it), archetypes that do not name their CPU get
    the CPU of the machine the containers really run on: a container's kernel-facing /proc/cpuinfo is the host's,
    so the simulated node then agrees with tools that read the container's own /proc."""
    path = os.environ.get("HWSIM_CPUINFO")
    if not path:
        return None
    fields = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                break
            key, dummy, value = line.partition(":")
            fields[key.strip()] = value.strip()
    if fields.get("vendor_id") not in _CPU_VENDORS:
        return None
    return {"vendor_id": fields["vendor_id"], "family": int(fields.get("cpu family", 0)),
            "model": int(fields.get("model", 0)), "model_name": fields.get("model name", "")}


def _parse_cpu(data: dict, where: str) -> dict[str, Any]:
    """The CPU model /proc/cpuinfo shows (x86 only: vendor_id, cpu family, model, model name)."""
    cpu = {"vendor_id": "GenuineIntel", "family": 6, "model": 143,
           "model_name": "Intel(R) Xeon(R) Platinum 8480C"}
    _require(isinstance(data, dict), where, "needs a mapping of vendor_id, family, model, model_name")
    unknown = set(data) - set(cpu)
    _require(not unknown, where, f"unknown keys {sorted(unknown)}")
    cpu.update(data)
    _require(cpu["vendor_id"] in _CPU_VENDORS, where, f"vendor_id must be one of {_CPU_VENDORS}")
    return cpu


def _parse_host(item: Any, numa: dict[int, list[int]], where: str) -> HostBridgeSpec:
    _require(isinstance(item, dict) and isinstance(item.get("host_bridge"), str), where,
             "needs host_bridge: 'DDDD:BB' (quoted)")
    domain, bus = (int(part, 16) for part in item["host_bridge"].split(":"))
    node = int(item.get("numa_node", -1))
    _require(node == -1 or node in numa, where, f"numa_node {node} is not declared under numa")
    children = [_parse_device(child, f"{where}.children[{idx}]") for idx, child in enumerate(item.get("children") or [])]
    return HostBridgeSpec(domain, bus, node, children)


def _parse_device(item: Any, where: str) -> DeviceSpec:
    _require(isinstance(item, dict), where, "must be a mapping")
    kinds = [kind for kind in ("bridge", "gpu", "nic") if kind in item]
    _require(len(kinds) == 1, where, "needs exactly one of bridge/gpu/nic: '<bdf>'")
    kind = kinds[0]
    bdf = item[kind]
    _require(isinstance(bdf, str), where, f"{kind} address must be a quoted string (YAML reads 0000:18:00.0 as a number)")
    try:
        fmt.parse_bdf(bdf)
    except ValueError as exc:
        raise SpecError(f"{where}: {exc}") from exc
    default_model = {"bridge": "broadcom-pex89", "gpu": "h100-sxm5", "nic": "connectx-7"}[kind]
    model_name = str(item.get("model", default_model))
    _require(model_name in MODELS, where, f"unknown model {model_name!r}; known: {sorted(MODELS)}")
    dev = DeviceSpec(kind, bdf, MODELS[model_name], model_name)
    dev.link = _parse_link(item.get("link"), f"{where}.link")
    if "acs" in item:
        _require(kind == "bridge", where, "acs is only for bridges (root and downstream ports)")
        try:
            dev.acs = pciconf.acs_bits((item["acs"] or {}).get("control", 0) if isinstance(item["acs"], dict) else item["acs"])
        except ValueError as exc:
            raise SpecError(f"{where}.acs: {exc}") from exc
    dev.children = [_parse_device(child, f"{where}.children[{idx}]") for idx, child in enumerate(item.get("children") or [])]
    if kind == "nic":
        _parse_nic(dev, item, where)
    return dev


_LINK_KEYS = ("max_speed", "max_width", "current_speed", "current_width")


def _parse_link(data: Any, where: str) -> dict[str, int]:
    """`link: {max_speed, max_width, current_speed, current_width}`: speeds as 32 / "16.0 GT/s", widths x1..x32."""
    if data is None:
        return {}
    _require(isinstance(data, dict), where, f"must be a mapping of {', '.join(_LINK_KEYS)}")
    unknown = set(data) - set(_LINK_KEYS)
    _require(not unknown, where, f"unknown keys {sorted(unknown)}")
    out: dict[str, int] = {}
    for key, value in data.items():
        if key.endswith("speed"):
            try:
                out[key] = pciconf.speed_code(value)
            except ValueError as exc:
                raise SpecError(f"{where}: {exc}") from exc
        else:
            _require(isinstance(value, int) and value in pciconf.WIDTHS, where, f"{key} must be one of {pciconf.WIDTHS}")
            out[key] = value
    return out


def _parse_nic(dev: DeviceSpec, item: dict[str, Any], where: str) -> None:
    functions = item.get("functions") or [{}]
    _require(isinstance(functions, list), where, "functions must be a list")
    for entry in functions:
        entry = entry or {}
        mac = entry.get("mac")
        guid = entry.get("node_guid")
        dev.functions.append(FunctionSpec(
            netdev=entry.get("netdev"), rdma=entry.get("rdma"),
            node_guid=fmt.parse_guid(str(guid)) if guid else None,
            mac=bytes(int(octet, 16) for octet in str(mac).split(":")) if mac else None,
            mtu=entry.get("mtu"), port_state=str(entry.get("port_state", "ACTIVE")),
            lid=int(entry.get("lid", 0)), sm_lid=int(entry.get("sm_lid", 0)), rate=entry.get("rate"),
            phys_state=_parse_phys_state(entry.get("phys_state"), f"{where}.functions"),
            counters=_parse_counters(entry.get("counters"), f"{where}.functions"),
            hw_counters=_parse_hw_counters(entry.get("hw_counters"), dev.model, f"{where}.functions")))
    if item.get("fw_ver") is not None:
        _require(isinstance(item["fw_ver"], str) and item["fw_ver"].strip() != "", where, "fw_ver must be a version string")
        dev.fw_ver = item["fw_ver"]
    if item.get("guid"):
        dev.guid = fmt.parse_guid(str(item["guid"]))
    dev.firmware = dict(item.get("firmware") or {})
    dev.firmware_next = dict(item.get("firmware_next") or {})
    for key in list(dev.firmware) + list(dev.firmware_next):
        _require(key in ("SRIOV_EN", "NUM_OF_VFS") or key.startswith("LINK_TYPE_P"), where, f"unknown firmware key {key!r}")
    if "vf_offset" in item:
        dev.vf_offset = int(item["vf_offset"])
    dev.vf_stride = int(item.get("vf_stride", 1))
    func = fmt.parse_bdf(dev.bdf)[3]
    _require(func == 0 or len(dev.functions) == 1, where, "a multi-function card must start at function 0")
    _require(len(dev.functions) <= 8, where, "at most 8 functions")


def _parse_phys_state(value: Any, where: str) -> str | None:
    if value is None:
        return None
    _require(value in PHYS_STATES[1:], where, f"phys_state must be one of {PHYS_STATES[1:]}")
    return str(value)


def _parse_counters(data: Any, where: str) -> dict[str, int]:
    """`counters: {symbol_error: 12, link_downed: 3}`: values within the counter's width (the PMA saturates there)."""
    if data is None:
        return {}
    _require(isinstance(data, dict), where, "counters must be a mapping of counter name to value")
    for name, value in data.items():
        _require(name in PMA_COUNTERS, where, f"unknown counter {name!r}; known: {sorted(PMA_COUNTERS)}")
        top = (1 << PMA_COUNTERS[name]) - 1
        _require(isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top, where,
                 f"counter {name} must be an integer 0..{top} (a {PMA_COUNTERS[name]}-bit PMA counter)")
    return dict(data)


def _parse_hw_counters(data: Any, model: Model, where: str) -> dict[str, int]:
    """`hw_counters: {out_of_sequence: 5}`: names the model reports (models.HW_COUNTER_GROUPS), values that fit the
    counter's width (32-bit Q counters, 64-bit congestion counters)."""
    if data is None:
        return {}
    _require(isinstance(data, dict), where, "hw_counters must be a mapping of counter name to value")
    for name, value in data.items():
        _require(name in model.hw_counters, where,
                 f"hw_counter {name!r} is not one of this model's: {sorted(model.hw_counters) or 'none'}")
        top = (1 << HW_COUNTER_BITS[name]) - 1
        _require(isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top, where,
                 f"hw_counter {name} must be an integer 0..{top} (a {HW_COUNTER_BITS[name]}-bit counter)")
    return dict(data)


def _check_unique(spec: Spec, where: str) -> None:
    seen: set[str] = set()
    for dummy_host, dummy_chain, dev in spec.all_devices():
        bdfs = [dev.bdf] if dev.kind != "nic" else function_bdfs(dev)
        for bdf in bdfs:
            _require(bdf not in seen, where, f"duplicate PCI address {bdf}")
            seen.add(bdf)


def function_bdfs(dev: DeviceSpec) -> list[str]:
    """PCI addresses of every function of a NIC card (function 0 first)."""
    domain, bus, slot, func = fmt.parse_bdf(dev.bdf)
    return [fmt.format_bdf(domain, bus, slot, func + idx) for idx in range(len(dev.functions))]
