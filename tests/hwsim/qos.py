"""RoCE QoS of the simulated mlx5 Ethernet ports: the DCB state (PFC, the IEEE APP table and the trust state it
implies), the MLNX/DOCA-OFED ECN sysfs (``/sys/class/net/<if>/ecn/``), the OFED mlx5_ib traffic class
(``/sys/class/infiniband/<dev>/tc/<port>/traffic_class``) and the rdma_cm configfs ToS.  Pure Python; state.py owns
the objects, build.py lays the files out, control.py serves the `dcb`/`mlnx_qos` shims.

Sources (README "RoCE QoS"):

* dcbnl / mlx5: torvalds/linux drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c ``mlx5e_dcbnl_ieee_setapp()``:
  only DSCP APP entries (selector 5, protocol < 64, else EINVAL); the first DSCP entry switches the port's trust
  state to DSCP (``mlx5_set_trust_state(MLX5_QPTS_TRUST_DSCP)``), deleting the last one switches it back to PCP;
  mlnx_qos (Mellanox/mlnx-tools python/mlnx_qos, 8fbfd9c) reads trust the same way (DSCP entries in the APP table).
* ECN: knneth/mlnx-ofa_kernel drivers/net/ethernet/mellanox/mlx5/core/en_sysfs.c (16568c9) creates
  ``ecn/<roce_np|roce_rp>/enable/<0..7>`` (0644 on a PF) and ``roce_np/{cnp_dscp,cnp_802p_prio}``; en_ecn.c
  ``mlx5e_store_ecn_enable()`` answers EPERM to enabling a priority that is already enabled, shows ``"%d\\n"``.
  Not in mainline: with inbox drivers the files do not exist (the firmware's ROCE_CC_PRIO_MASK decides).
* traffic_class: knneth/mlnx-ofa_kernel drivers/infiniband/hw/mlx5/main_ext.c (fee19be): initial value -1 (the
  file reads empty), ``Global tclass=%d`` once set, a store takes ``N`` or ``tclass=N`` (kstrtoint base 0, > 255
  EINVAL; -1 clears).  The rule forms (``src_ip=..,tclass=N``) are not modelled: EINVAL here.
* rdma_cm configfs: torvalds/linux drivers/infiniband/core/cma_configfs.c: ``mkdir rdma_cm/<dev>`` (make_cma_dev:
  ENODEV for an unknown device) creates ``ports/<n>/{default_roce_mode,default_roce_tos}``; ``default_roce_tos``
  shows ``"%u\\n"`` and stores ``kstrtou8(buf, 0)``; the value lives in the cma device, so it is 0 again whenever the
  RDMA device registers again.

[inference, from issue 22 and the mlx5 probe path] all of it is lost when the port's netdev or RDMA device is
created again (driver reload, power-on): the simulator resets it then.  The ECN enables and CNP values start from the
card's firmware (ROCE_CC_PRIO_MASK_P<n>, CNP_DSCP_P<n>, CNP_802P_PRIO_P<n>, nvconfig.py defaults 255/48/6).
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass, field

from . import fmt

#: IEEE_8021QAZ_APP_SEL_DSCP (include/uapi/linux/dcbnl.h)
SEL_DSCP = 5
#: MLX5E_DEFAULT_CABLE_LEN: the PFC delay (mlnx_qos "Cable len") of a freshly probed port
DEFAULT_CABLE_LEN = 7
#: mlx5's default priority -> TC map as every real mlnx_qos output shows it (priority 0 on TC 1, 1 on TC 0)
DEFAULT_PRIO_TC = (1, 0, 2, 3, 4, 5, 6, 7)
ECN_PROTOCOLS = ("roce_np", "roce_rp")


@dataclass
class PortQos:
    """The QoS state of one mlx5 Ethernet PF port (its netdev's dcbnl state and the OFED ECN attributes)."""

    ecn: dict[str, list[int]]
    cnp_dscp: int
    cnp_802p_prio: int
    pfc_en: int = 0
    delay: int = DEFAULT_CABLE_LEN
    #: the IEEE APP table: (selector, protocol, priority)
    apps: list[tuple[int, int, int]] = field(default_factory=list)
    #: DCB_CAP_DCBX_HOST: "OS controlled" once the host configured the port
    dcbx_host: bool = False

    @property
    def trust(self) -> str:
        """mlx5's trust state: DSCP while the APP table holds DSCP entries."""
        return "dscp" if any(sel == SEL_DSCP for sel, dummy_p, dummy_q in self.apps) else "pcp"

    def as_dict(self) -> dict:
        """What the control interface returns (the dcbnl view)."""
        return {"pfc_en": self.pfc_en, "pfc_cap": 8, "delay": self.delay, "apps": [list(a) for a in self.apps],
                "trust": self.trust, "dcbx_host": self.dcbx_host, "prio_tc": list(DEFAULT_PRIO_TC)}


def power_on_state(fw_current: dict, port: int) -> PortQos:
    """A port as the driver probes it: DCB state empty, ECN and CNP from the card's current firmware values."""
    mask = int(fw_current.get(f"ROCE_CC_PRIO_MASK_P{port}", 255))
    enables = [(mask >> prio) & 1 for prio in range(8)]
    return PortQos(ecn={proto: list(enables) for proto in ECN_PROTOCOLS},
                   cnp_dscp=int(fw_current.get(f"CNP_DSCP_P{port}", 48)),
                   cnp_802p_prio=int(fw_current.get(f"CNP_802P_PRIO_P{port}", 6)))


def set_pfc(qos: PortQos, pfc_en: int, delay: int | None = None) -> None:
    """DCB_ATTR_IEEE_PFC set: the enable mask (and the delay, i.e. cable length); the port is host-managed after.
    [inference] mlx5 takes any 8-bit mask on a port with the PFC capability (pfc_cap 8)."""
    if not 0 <= int(pfc_en) <= 0xFF:
        raise fmt.oserror(errno.EINVAL)
    qos.pfc_en = int(pfc_en)
    if delay is not None:
        qos.delay = int(delay)
    qos.dcbx_host = True


def app_change(qos: PortQos, op: str, apps: list) -> None:
    """DCB_CMD_IEEE_SET / _DEL of APP entries on mlx5 (mlx5e_dcbnl_ieee_setapp/delapp): DSCP entries only."""
    parsed = []
    for entry in apps:
        sel, proto, prio = (int(x) for x in entry)
        if sel != SEL_DSCP or not 0 <= proto < 64 or not 0 <= prio < 8:
            raise fmt.oserror(errno.EINVAL)
        parsed.append((sel, proto, prio))
    for sel, proto, prio in parsed:
        if op == "add":
            # the old mapping of this DSCP value is replaced (mlx5 deletes the old entry, "Delete the old entry")
            qos.apps = [a for a in qos.apps if (a[0], a[1]) != (sel, proto)] + [(sel, proto, prio)]
        elif op == "del":
            if (sel, proto, prio) not in qos.apps:
                raise fmt.oserror(errno.ENOENT)
            qos.apps.remove((sel, proto, prio))
        else:
            raise ValueError(f"op must be add or del, not {op!r}")


def store_ecn_enable(qos: PortQos, proto: str, prio: int, text: str) -> None:
    """en_ecn.c mlx5e_store_ecn_enable(): sscanf %d; enabling an enabled priority is EPERM (as the source does).
    [inference] text that is no number is EINVAL here (the source leaves the value uninitialised)."""
    match = re.fullmatch(r"\s*([+-]?\d+)\s*", text)
    if not match:
        raise fmt.oserror(errno.EINVAL)
    enable = 1 if int(match.group(1)) else 0
    if enable and qos.ecn[proto][prio]:
        raise fmt.oserror(errno.EPERM)
    qos.ecn[proto][prio] = enable


def store_cnp(qos: PortQos, attr: str, text: str) -> None:
    """roce_np/cnp_dscp (0..63) and cnp_802p_prio (0..7).  [inference] the ranges are the firmware fields' widths
    (CNP_DSCP 6 bits, CNP_802P_PRIO 3 bits); a value outside is EINVAL."""
    match = re.fullmatch(r"\s*(\d+)\s*", text)
    limit = 63 if attr == "cnp_dscp" else 7
    if not match or int(match.group(1)) > limit:
        raise fmt.oserror(errno.EINVAL)
    setattr(qos, attr, int(match.group(1)))


def parse_tclass(text: str) -> int:
    """main_ext.c traffic_class_store() for the global forms: ``N`` or ``tclass=N`` (kstrtoint base 0, <= 255)."""
    body = text.strip()
    if body.startswith("tclass="):
        body = body[len("tclass="):]
    try:
        value = int(body, 0)
    except ValueError as exc:
        raise fmt.oserror(errno.EINVAL) from exc
    if value > 0xFF or value < -1:
        raise fmt.oserror(errno.EINVAL)
    return value


def show_tclass(value: int) -> str:
    """traffic_class_show(): empty until a global class is set."""
    return f"Global tclass={value}\n" if value >= 0 else ""


#: ib_cache_gid_type_str(): the names default_roce_mode shows and takes
GID_TYPES = ("IB/RoCE v1", "RoCE v2")
