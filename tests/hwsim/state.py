"""The simulated node: hardware built from a spec plus the kernel rules that govern it.

Pure Python, no FUSE: every behaviour is unit-testable here, and the FUSE layer only forwards calls.
Kernel sources each rule follows are named in the docstrings and in tests/hwsim/README.md.
"""

from __future__ import annotations

import copy
import dataclasses
import errno
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import fmt, nvconfig, pciconf, qos
from .irq import IrqTable
from .faults import FaultTable
from .models import CLASS_ETH, CLASS_IB, HW_COUNTER_BITS, Model, driver_matches
from .spec import OFED_RE, DeviceSpec, FunctionSpec, ModuleSpec, Spec, function_bdfs
from .vfs import Dir, File, Link, Tree

MLX5 = "mlx5_core"
#: ACS Capability of Root Ports (SV TB RR CR UF) and of switch Downstream Ports (also DT, as PLX/Broadcom PEX
#: switches report it); ACS Control is 0 at reset (README "PCI configuration space")
ROOT_PORT_ACS = 0x1F
SWITCH_PORT_ACS = 0x5F
#: pseudo-path of rtnetlink VF operations for fault injection: rtnl/<ifname>/vf/<N>
RTNL = "rtnl"
#: mlx5 OFED sriov_sysfs.c policy words <-> the netlink link-state names (mlx5 net_to_mlx_policy)
OFED_POLICY = {"Down": "disable", "Up": "enable", "Follow": "auto"}
#: modules MLNX_OFED / DOCA-OFED (mlnx-ofa_kernel) builds with DKMS; with OFED on disk, depmod prefers them
#: (updates/dkms) over the inbox ones, so a (re)load takes the OFED build
OFED_MODULES = frozenset({"ib_core", "ib_uverbs", "ib_umad", "iw_cm", "ib_cm", "rdma_cm", "rdma_ucm", "ib_ipoib",
                          "mlxfw", "mlx5_core", "mlx5_ib"})


@dataclass
class PciDevice:
    """One PCI function as the PCI core sees it."""

    bdf: str
    path: list[str]
    model: Model
    kind: str
    klass: int
    numa: int
    device_id: int
    driver: str | None = None
    driver_override: str | None = None
    pf: Pf | None = None
    vf: Vf | None = None
    #: the spec entry (None for VFs), the PCIe port type, the parent bridge and the PCI configuration space
    dspec: DeviceSpec | None = None
    port_type: int = pciconf.PCI_EXP_TYPE_ENDPOINT
    parent: str | None = None
    config: pciconf.ConfigSpace | None = None
    #: devices sharing one PCIe link (both ends, every function of a card) share this id
    link_id: str = ""


@dataclass
class VfAdmin:
    """What `ip link set <pf> vf N ...` stored for one VF (the PF driver's vfs_ctx cache)."""

    node_guid: int = 0
    port_guid: int = 0
    link_state: str = "auto"
    trust: bool = False
    spoofchk: bool = False
    vlan: int = 0
    qos: int = 0
    mac: bytes = bytes(6)


@dataclass
class Vf:
    """A virtual function; `index` is N in virtfnN."""

    pf: Pf
    index: int
    dev: PciDevice


@dataclass
class Pf:
    """A NIC physical function = one port of a card."""

    dev: PciDevice
    card: Card
    index: int
    fspec: FunctionSpec
    node_guid: int
    mac: bytes
    numvfs: int = 0
    autoprobe: bool = True
    vfs: list[Vf] = field(default_factory=list)
    admin: dict[int, VfAdmin] = field(default_factory=dict)
    generation: int = 0
    eswitch: str = "legacy"

    @property
    def link_layer(self) -> str:
        """InfiniBand or Ethernet, from the firmware LINK_TYPE_P<n> currently active."""
        return self.card.link_layer(self.index)

    @property
    def totalvfs(self) -> int:
        """sriov_totalvfs: NUM_OF_VFS active in firmware; 0 means no SR-IOV capability at all."""
        return self.card.totalvfs

    def vf_bdf(self, index: int) -> str:
        """VF address from the SR-IOV First VF Offset / VF Stride, counted in routing ids (may cross a bus)."""
        domain, rid = fmt.bdf_rid(self.dev.bdf)
        return fmt.rid_bdf(domain, rid + self.card.vf_offset(self.index) + index * self.card.spec.vf_stride)


@dataclass
class Card:
    """A NIC card: its functions share firmware configuration (mlxconfig is per device)."""

    spec: DeviceSpec
    pfs: list[Pf] = field(default_factory=list)
    fw_current: dict[str, Any] = field(default_factory=dict)
    fw_next: dict[str, Any] = field(default_factory=dict)

    @property
    def is_mlx(self) -> bool:
        """ConnectX cards have mlxconfig, RDMA devices and IB support."""
        return self.spec.model.driver == MLX5

    @property
    def totalvfs(self) -> int:
        """SR-IOV VFs the firmware exposes; an Intel card keeps its fixed capability."""
        if not self.is_mlx:
            return int(self.fw_current.get("NUM_OF_VFS", 0))
        return int(self.fw_current["NUM_OF_VFS"]) if self.fw_current["SRIOV_EN"] else 0

    def link_layer(self, index: int) -> str:
        """Per-port link layer; Ethernet-only models have no LINK_TYPE parameter."""
        value = self.fw_current.get(f"LINK_TYPE_P{index + 1}", "ETH")
        return "InfiniBand" if value == "IB" else "Ethernet"

    def vf_offset(self, index: int) -> int:
        """Default offsets keep the VFs of all functions apart, as ConnectX firmware does."""
        first = self.spec.vf_offset if self.spec.vf_offset is not None else len(self.pfs)
        return first - index + index * self.spec_totalvfs()

    def spec_totalvfs(self) -> int:
        """NUM_OF_VFS as configured, used for the VF layout even while SR-IOV is off."""
        return max(int(self.fw_current.get("NUM_OF_VFS", 0)), 1)


@dataclass
class NetDev:
    """A network interface in init_net."""

    name: str
    dev: PciDevice | None
    ifindex: int
    kind: str
    mtu: int
    address: str
    up: bool
    dev_port: int = 0
    #: include/uapi/linux/netdevice.h NET_NAME_*: who named it (sysfs ``name_assign_type``)
    name_assign_type: int = 0
    #: an mlx5 Ethernet PF port's QoS (DCB, OFED ECN; tests/hwsim/qos.py), fresh at every probe; None elsewhere
    qos: qos.PortQos | None = None
    #: the network namespace it is in: None = init_net (the host's), else a pod's (``Node.netns``)
    netns: str | None = None


#: NET_NAME_UNKNOWN (IPoIB allocates "ib%d" with it; sysfs name_assign_type then reads EINVAL), NET_NAME_ENUM
#: (alloc_etherdev's "eth%d"), NET_NAME_RENAMED (set by dev_change_name(), i.e. a udev rename)
NET_NAME_UNKNOWN, NET_NAME_ENUM, NET_NAME_RENAMED = 0, 1, 4


@dataclass
class Flow:
    """Traffic through an RDMA port from `start` to `end` (clock seconds), growing hw_counters at `rates` per second."""

    start: float
    end: float
    rates: dict[str, float]

    def count(self, now: float) -> dict[str, int]:
        """What the flow has counted by `now` (it grows while the traffic runs, then stops)."""
        elapsed = min(max(now - self.start, 0.0), self.end - self.start)
        return dict((name, int(rate * elapsed)) for name, rate in self.rates.items())


#: share of the lost packets a requester recovers only after its ACK timer expires (the loss was at the tail of a
#: burst: no later packet reveals the gap); the rest are NAKed by the responder (packet sequence error NAK).  A model
#: choice of the simulator, not a hardware figure (README "hw_counters").
TIMEOUT_SHARE = 0.1


@dataclass
class IbDev:
    """An RDMA device (ib_device) registered by mlx5_ib."""

    name: str
    dev: PciDevice
    index: int
    node_guid: int
    sys_image_guid: int
    port_guid: int
    link_layer: str
    netdev: str | None
    lid: int = 0
    sm_lid: int = 0
    #: port 1's hw_counters when the device registered (mlx5_ib allocates its Q counter set at probe) and the
    #: traffic flows counting into them since
    hw: dict[str, int] = field(default_factory=dict)
    flows: list[Flow] = field(default_factory=list)
    #: OFED mlx5_ib tc/1/traffic_class (-1: unset) and the rdma_cm cma device's port 1 defaults (qos.py)
    tclass: int = -1
    roce_tos: int = 0
    roce_mode: str = "RoCE v2"
    #: the network namespace it belongs to (exclusive mode only; ``rdma dev set <dev> netns``): None = init_net
    netns: str | None = None


@dataclass
class Module:
    """A loaded kernel module."""

    name: str
    params: dict[str, str]
    #: the OFED build the loaded module file came from (None: inbox)
    ofed: str | None = None


def ofed_module_version(ofed: str) -> str:
    """MODULE_VERSION of OFED's kernel modules (modinfo / sys/module/<m>/version) from an `ofed_info -s` version:
    the release and the first three build numbers, e.g. OFED-internal-24.10-1.1.4.0.200 -> 24.10-1.1.4.

    [inference] from the OFED modules' DRIVER_VERSION and third-party checks comparing `modinfo mlx5_core`
    `version:` with the first characters of `ofed_info -n`.
    """
    number = ofed.split("-", 1)[1] if ofed.startswith("MLNX_OFED_LINUX-") else ofed.split("-", 2)[2]
    release, dummy_sep, build = number.partition("-")
    return release + "-" + ".".join(build.split(".")[:3])


#: the delays a write sleeps for in the caller's request (the others are events due at a later clock reading)
BLOCKING_DELAYS = ("sriov_numvfs_write", "bind")


class Node:
    """A simulated node. All public methods are thread-safe; waits (delays, hangs) happen outside the lock."""

    def __init__(self, spec: Spec, etc_dir: str | Path | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        # a private catalogue: modules on disk change at runtime (set_module) without touching the caller's spec
        self.spec = dataclasses.replace(spec, modules=copy.deepcopy(spec.modules))
        self.etc_dir = Path(etc_dir) if etc_dir else None
        self.clock = clock
        self.sleep = sleep
        self.lock = threading.RLock()
        self.faults = FaultTable()
        self.delays = dict(spec.delays)
        self.devices: dict[str, PciDevice] = {}
        self.cards: list[Card] = []
        #: the netdevs of init_net (the host's view), by name
        self.netdevs: dict[str, NetDev] = {}
        #: netdevs moved into a pod's network namespace: {netns: {name there: netdev}} (names are per namespace)
        self.ns_netdevs: dict[str, dict[str, NetDev]] = {}
        self.ibdevs: dict[str, IbDev] = {}
        self.modules: dict[str, Module] = {}
        self.netns: list[str] = []
        self.sysctl: dict[str, dict[str, int]] = {}
        self.devconf_inherit_init_net = 0
        self.netns_shared = True
        self.cmdline = spec.cmdline
        self.rdma_limits: dict[str, dict[str, str]] = {}
        #: rdma_cm configfs groups made with mkdir (sys/kernel/config/rdma_cm/<dev>; qos.py)
        self.cma_groups: list[str] = []
        #: OFED kernel modules on disk (a DKMS install); survives power-on like the disk does
        self.ofed = spec.ofed
        self.boot_log: list[str] = []
        self.pending: list[tuple[float, Callable[[], None]]] = []
        self._ifindex = 1
        self._ibindex = 0
        self._tree: Tree | None = None
        #: interrupts (hwsim/irq.py): mlx5 vectors per bound function, /proc/interrupts, /proc/irq/<n>/
        self.irq = IrqTable(spec.numa, spec.kernel_release)
        self._build_hardware()
        self.power_on()

    # ------------------------------------------------------------------ hardware and power-on
    def _build_hardware(self) -> None:
        for host, chain, dspec in self.spec.all_devices():
            base = ["devices", host.name] + [anc.bdf for anc in chain]
            if dspec.kind != "nic":
                dev = self._add_device(dspec.bdf, base + [dspec.bdf], dspec.model, dspec.kind, dspec.model.klass,
                                       host.numa_node)
                self._place(dev, dspec, chain)
                continue
            card = Card(dspec)
            self.cards.append(card)
            base_guid = dspec.guid if dspec.guid is not None else _fallback_guid(dspec.bdf)
            for idx, (bdf, fspec) in enumerate(zip(function_bdfs(dspec), dspec.functions)):
                pci = self._add_device(bdf, base + [bdf], dspec.model, "nic", dspec.model.klass, host.numa_node)
                self._place(pci, dspec, chain)
                guid = fspec.node_guid if fspec.node_guid is not None else base_guid + idx
                raw = guid.to_bytes(8, "big")
                mac = fspec.mac or raw[:3] + raw[5:]
                pci.pf = Pf(pci, card, idx, fspec, guid, mac)
                card.pfs.append(pci.pf)

    @staticmethod
    def _place(dev: PciDevice, dspec: DeviceSpec, chain: list[DeviceSpec]) -> None:
        """PCIe port type from the bridge chain: a bridge on the root bus is a Root Port, one below a Root or
        Downstream Port is a switch Upstream Port, one below an Upstream Port a Downstream Port."""
        dev.dspec = dspec
        dev.parent = chain[-1].bdf if chain else None
        types: list[int] = []
        for bridge in chain + ([dspec] if dspec.kind == "bridge" else []):
            if not types:
                types.append(pciconf.PCI_EXP_TYPE_ROOT_PORT)
            elif types[-1] == pciconf.PCI_EXP_TYPE_UPSTREAM:
                types.append(pciconf.PCI_EXP_TYPE_DOWNSTREAM)
            else:
                types.append(pciconf.PCI_EXP_TYPE_UPSTREAM)
        dev.port_type = types[-1] if dspec.kind == "bridge" else pciconf.PCI_EXP_TYPE_ENDPOINT

    def _add_device(self, bdf: str, path: list[str], model: Model, kind: str, klass: int, numa: int) -> PciDevice:
        dev = PciDevice(bdf, path, model, kind, klass, numa, model.device)
        self.devices[bdf] = dev
        return dev

    def power_on(self, cmdline: str | None = None) -> None:
        """Power-on reset ("reboot"): hardware back to its spec state, persisted config applied, no VFs, zero GUIDs."""
        with self.lock:
            self.cmdline = cmdline if cmdline is not None else self.spec.cmdline
            self.pending.clear()
            self.netns.clear()
            self.ns_netdevs.clear()
            self.boot_log.clear()
            self.cma_groups = []
            self._power_on_cards()
            for dev in list(self.devices.values()):
                if dev.vf is not None:
                    del self.devices[dev.bdf]
                else:
                    dev.driver = None
                    dev.driver_override = None
            self._power_on_config()
            self.netdevs.clear()
            self.ibdevs.clear()
            self._ifindex = 1
            self._ibindex = 0
            self.sysctl = {scope: dict(values) for scope, values in self.spec.sysctl.items() if scope in ("all", "default")}
            self.devconf_inherit_init_net = self.spec.devconf_inherit_init_net
            self._add_netdev("lo", None, "loopback", 65536, "00:00:00:00:00:00", True)
            self.rdma_limits = {}
            self.modules = {}
            self.irq.reset()
            for name in self._boot_modules():
                try:
                    self._load(name, {})
                except OSError as exc:
                    self.boot_log.append(f"systemd-modules-load: Failed to insert module '{name}': {exc.strerror}")
            self._bind_all()
            self._sync()
            for dev_name, limits in ((self.spec.rdma_cgroup or {}).get("max") or {}).items():
                self.rdma_limits[dev_name] = {key: str(value) for key, value in limits.items()}
            self._changed()

    def _power_on_cards(self) -> None:
        for card in self.cards:
            spec = card.spec
            defaults = self.fw_defaults(card)
            if not card.fw_current:
                card.fw_current = {**defaults, **spec.firmware}
                card.fw_next = {**card.fw_current, **spec.firmware_next}
            else:
                card.fw_current = dict(card.fw_next)
            for pf in card.pfs:
                pf.numvfs = 0
                pf.vfs = []
                pf.admin = {}
                pf.autoprobe = True
                pf.eswitch = "legacy"
                pf.generation += 1
                pf.dev.klass = (CLASS_IB if pf.link_layer == "InfiniBand" else CLASS_ETH) if card.is_mlx else pf.dev.klass

    # ------------------------------------------------------------------ PCI configuration space
    def _own_link(self, dev: PciDevice) -> tuple[int, int]:
        """Link Capabilities of one function: the spec's max_speed/max_width, else Gen5 x16 (README)."""
        link = dev.dspec.link if dev.dspec is not None else {}
        return link.get("max_speed", pciconf.DEFAULT_SPEED), link.get("max_width", pciconf.DEFAULT_WIDTH)

    def _children(self, bdf: str) -> list[PciDevice]:
        return sorted((d for d in self.devices.values() if d.parent == bdf and d.vf is None),
                      key=lambda d: fmt.bdf_rid(d.bdf))

    def _trained(self, lower: PciDevice) -> pciconf.Link:
        """What a link trains to: the lower end's spec current_speed/current_width (a degraded link), else the
        highest speed and width both ends support (LTSSM negotiation)."""
        speed, width = self._own_link(lower)
        parent = self.devices.get(lower.parent or "")
        if parent is not None and parent.port_type in (pciconf.PCI_EXP_TYPE_ROOT_PORT, pciconf.PCI_EXP_TYPE_DOWNSTREAM):
            other = self._own_link(parent)
            speed, width = min(speed, other[0]), min(width, other[1])
        override = lower.dspec.link if lower.dspec is not None else {}
        return pciconf.Link(speed=override.get("current_speed", speed), width=override.get("current_width", width))

    def _layout(self, dev: PciDevice, link: pciconf.Link) -> pciconf.Layout:
        model = dev.model
        dummy_domain, bus, slot, dummy_fn = fmt.parse_bdf(dev.bdf)
        max_speed, max_width = self._own_link(dev.vf.pf.dev if dev.vf is not None else dev)
        lay = pciconf.Layout(vendor=model.vendor, device=dev.device_id, klass=dev.klass,
                             subsystem_vendor=model.subsystem_vendor, subsystem_device=model.subsystem_device,
                             port_type=dev.port_type, port_number=slot, vf=dev.vf is not None,
                             link=pciconf.Link(max_speed, max_width, link.speed, link.width, link.up))
        if dev.pf is not None:
            lay.multifunction = len(dev.pf.card.pfs) > 1
        if dev.kind == "bridge":
            lay.bridge = True
            below = [d for d in self.spec.all_devices() if dev.dspec in d[1]]
            buses = [fmt.parse_bdf(d[2].bdf)[1] for d in below]
            children = self._children(dev.bdf)
            secondary = fmt.parse_bdf(children[0].bdf)[1] if children else bus + 1
            lay.buses = (bus, secondary, max(buses + [secondary]))
            if dev.port_type == pciconf.PCI_EXP_TYPE_ROOT_PORT:
                lay.acs_cap = ROOT_PORT_ACS
            elif dev.port_type == pciconf.PCI_EXP_TYPE_DOWNSTREAM:
                lay.acs_cap = SWITCH_PORT_ACS
            if dev.dspec is not None and dev.dspec.acs is not None:
                lay.acs_ctrl = dev.dspec.acs
        return lay

    def _power_on_config(self) -> None:
        """Every function's configuration space at its power-on values; links trained as the spec says."""
        links: dict[str, tuple[str, pciconf.Link]] = {}
        for dev in self.devices.values():
            if dev.port_type in (pciconf.PCI_EXP_TYPE_ROOT_PORT, pciconf.PCI_EXP_TYPE_DOWNSTREAM):
                continue
            lower = dev.pf.card.pfs[0].dev if dev.pf is not None else dev
            links[dev.bdf] = (lower.bdf, self._trained(lower))
        for dev in self.devices.values():
            if dev.port_type in (pciconf.PCI_EXP_TYPE_ROOT_PORT, pciconf.PCI_EXP_TYPE_DOWNSTREAM):
                children = self._children(dev.bdf)
                link_id, link = links[children[0].bdf] if children else (dev.bdf, pciconf.Link(speed=1, width=0, up=False))
            else:
                link_id, link = links[dev.bdf]
            dev.link_id = link_id
            dev.config = pciconf.ConfigSpace(self._layout(dev, link))

    def _vf_config(self, dev: PciDevice) -> None:
        """A VF's configuration space; its link registers mirror its PF's (README: not modelled)."""
        pf_dev = dev.vf.pf.dev if dev.vf is not None else dev
        dev.link_id = pf_dev.link_id
        speed, width = (pf_dev.config.current_link() if pf_dev.config else ("", 0))
        link = pciconf.Link(speed=pciconf.speed_code(speed.split()[0]) if speed else pciconf.DEFAULT_SPEED,
                            width=width or pciconf.DEFAULT_WIDTH)
        dev.config = pciconf.ConfigSpace(self._layout(dev, link))

    def _config_dev(self, bdf: str) -> PciDevice:
        dev = self.devices.get(bdf)
        if dev is None or dev.config is None:
            raise fmt.oserror(errno.ENODEV, bdf)
        return dev

    def pci_config(self, bdf: str, offset: int = 0, size: int | None = None) -> bytes:
        """Read `size` bytes (default: all) of a function's config space at `offset`, as pread() on its sysfs
        `config` does (faults on that path apply)."""
        dev = self._config_dev(bdf)
        assert dev.config is not None
        return self.pread(f"sys/bus/pci/devices/{bdf}/config", dev.config.size if size is None else size, offset)

    def pci_config_write(self, bdf: str, offset: int, data: bytes) -> int:
        """pwrite() on a function's sysfs `config`: returns the bytes taken (EFBIG at or past the end)."""
        self._config_dev(bdf)
        return self.pwrite(f"sys/bus/pci/devices/{bdf}/config", data, offset)

    def pci_link_set(self, bdf: str, speed: Any = None, width: int | None = None) -> dict[str, Any]:
        """The link of `bdf` (either end) retrains at another speed/width: Link Status of both ends, of every
        function of the card and of its VFs changes, so do current_link_speed/current_link_width."""
        with self.lock:
            dev = self._config_dev(bdf)
            assert dev.config is not None
            current_speed, current_width = dev.config.current_link()
            code = pciconf.speed_code(speed) if speed is not None else pciconf.speed_code(current_speed.split()[0])
            if width is not None and int(width) not in pciconf.WIDTHS:
                raise ValueError(f"width must be one of {pciconf.WIDTHS}")
            link = pciconf.Link(speed=code, width=int(width) if width is not None else current_width)
            changed = []
            for other in self.devices.values():
                if other.link_id == dev.link_id and other.config is not None:
                    other.config.set_link_status(link)
                    changed.append(other.bdf)
            return {"speed": pciconf.SPEEDS[code], "width": link.width, "devices": sorted(changed)}

    def fw_params(self, card: Card) -> dict[str, nvconfig.Param]:
        """The firmware parameters of the card's model (tests/hwsim/nvconfig.py); {} for a card without NVCONFIG."""
        if not card.is_mlx:
            return {}
        return nvconfig.catalogue(card.spec.model_name, len(card.pfs), card.spec.model.vpi)

    def fw_defaults(self, card: Card) -> dict[str, Any]:
        """mlxconfig 'Default' column: the model's defaults (SR-IOV off; VPI ports default to InfiniBand)."""
        if not card.is_mlx:
            return {"NUM_OF_VFS": card.spec.firmware.get("NUM_OF_VFS", 0)}
        return nvconfig.defaults(self.fw_params(card))

    def _boot_modules(self) -> list[str]:
        """Spec modules, then systemd-modules-load: names from etc/modules-load.d/*.conf known to the catalogue."""
        names = list(self.spec.modules_loaded)
        for conf in self._etc_files("modules-load.d"):
            for line in conf.read_text(encoding="utf-8").splitlines():
                name = line.split("#", 1)[0].split(";", 1)[0].strip()
                if not name:
                    continue
                if self.on_disk(name):
                    names.append(name.replace("-", "_"))
                else:
                    self.boot_log.append(f"systemd-modules-load: Failed to find module '{name}'")
        return names

    def _etc_files(self, sub: str) -> list[Path]:
        if self.etc_dir is None or not (self.etc_dir / sub).is_dir():
            return []
        return sorted(path for path in (self.etc_dir / sub).iterdir() if path.suffix == ".conf" and path.is_file())

    def module_options(self, name: str) -> dict[str, str]:
        """Options kmod passes: modprobe.d files in name order, then `name.param=` from /proc/cmdline (last wins).

        kmod's kmod_config_new() parses the config files first and the kernel command line last, and
        kmod_module_get_options() concatenates them in that order, so the kernel command line wins.
        """
        options: dict[str, str] = {}
        for conf in self._etc_files("modprobe.d"):
            for line in conf.read_text(encoding="utf-8").splitlines():
                words = line.split("#", 1)[0].split()
                if len(words) >= 3 and words[0] == "options" and words[1].replace("-", "_") == name:
                    options.update(_kv(words[2:]))
        for word in self.cmdline.split():
            if word.startswith(name + ".") and "=" in word:
                key, value = word[len(name) + 1:].split("=", 1)
                options[key] = value
        return options

    # ------------------------------------------------------------------ time and change tracking
    def advance(self) -> None:
        """Apply delayed kernel work (VF probe) whose time has come; called at the start of every operation."""
        with self.lock:
            now = self.clock()
            due = [item for item in self.pending if item[0] <= now]
            if not due:
                return
            self.pending = [item for item in self.pending if item[0] > now]
            for dummy_when, action in sorted(due, key=lambda item: item[0]):
                action()
            self._changed()

    def _changed(self) -> None:
        self._tree = None

    def tree(self) -> Tree:
        """The current sysfs/procfs tree (rebuilt lazily after structural changes)."""
        with self.lock:
            self.advance()
            if self._tree is None:
                from .build import build_tree  # pylint: disable=import-outside-toplevel  # build imports state
                self._tree = build_tree(self)
            return self._tree

    # ------------------------------------------------------------------ file access (used by FUSE and tests)
    def canonical(self, path: str) -> str:
        """Path with every symlink resolved; unresolvable paths are returned unchanged."""
        try:
            return "/".join(self.tree().lookup(path)[0])
        except OSError:
            return path.strip("/")

    def lookup(self, path: str, follow_last: bool = True) -> tuple[str, Any]:
        """(canonical path, entry) of a path."""
        parts, entry = self.tree().lookup(path, follow_last)
        return "/".join(parts), entry

    def read(self, path: str) -> Any:
        """Read an attribute the way open()+read() would (EACCES for write-only files, EISDIR for directories);
        text for text attributes, bytes for binary ones (`config`)."""
        canon, entry = self.lookup(path)
        self.faults.check("read", canon, self.canonical)
        return self._read_entry(canon, entry)

    def _read_entry(self, canon: str, entry: Any) -> Any:
        if isinstance(entry, Dir):
            raise fmt.oserror(errno.EISDIR, canon)
        if entry.read is None:
            raise fmt.oserror(errno.EACCES, canon)
        with self.lock:
            self.advance()
            return entry.read()

    def check_writable(self, path: str) -> tuple[str, File]:
        """What open(O_WRONLY) checks: kernfs_fop_open() gives EACCES when the attribute has no store method."""
        canon, entry = self.lookup(path)
        if isinstance(entry, Dir):
            raise fmt.oserror(errno.EISDIR, canon)
        if not isinstance(entry, File) or (entry.write is None and entry.pwrite is None):
            raise fmt.oserror(errno.EACCES, canon)
        return canon, entry

    def pread(self, path: str, size: int, offset: int) -> bytes:
        """pread() on a file: binary attributes (`config`) serve exactly the bytes asked for (sysfs_kf_bin_read());
        text attributes are read whole and sliced, as a read at an offset of a kernfs seq_file is."""
        canon, entry = self.lookup(path)
        self.faults.check("read", canon, self.canonical)
        if isinstance(entry, File) and entry.binary:
            with self.lock:
                self.advance()
                assert entry.pread is not None
                return entry.pread(offset, size)
        data = self._read_entry(canon, entry)
        raw = data if isinstance(data, bytes) else data.encode()
        return raw[offset:offset + size]

    def pwrite(self, path: str, data: bytes, offset: int) -> int:
        """pwrite() on a file: binary attributes take the offset (sysfs_kf_bin_write()), text ones ignore it."""
        canon, entry = self.check_writable(path)
        if not entry.binary:
            return self.write(path, data)
        self.faults.check("write", canon, self.canonical)
        with self.lock:
            self.advance()
            assert entry.pwrite is not None
            return entry.pwrite(offset, bytes(data))

    def write(self, path: str, data: str | bytes) -> int:
        """One write() syscall on an attribute; returns the byte count like the kernel store does."""
        canon, entry = self.check_writable(path)
        if entry.binary:
            return self.pwrite(path, data.encode() if isinstance(data, str) else data, 0)
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        self.faults.check("write", canon, self.canonical)
        assert entry.write is not None
        entry.write(text)
        return len(data)

    def readdir(self, path: str) -> list[str]:
        """Directory listing (ENOTDIR for files)."""
        canon, entry = self.lookup(path)
        if not isinstance(entry, Dir):
            raise fmt.oserror(errno.ENOTDIR, canon)
        self.faults.check("read", canon, self.canonical)
        return sorted(entry.children)

    def readlink(self, path: str) -> str:
        """Symlink text (EINVAL for non-links, as readlink(2))."""
        entry = self.lookup(path, follow_last=False)[1]
        if not isinstance(entry, Link):
            raise fmt.oserror(errno.EINVAL, path)
        return entry.target

    # ------------------------------------------------------------------ SR-IOV (drivers/pci/iov.c)
    def pf_by_bdf(self, bdf: str) -> Pf:
        """The PF at a PCI address (ENODEV if there is none)."""
        dev = self.devices.get(bdf)
        if dev is None or dev.pf is None:
            raise fmt.oserror(errno.ENODEV, bdf)
        return dev.pf

    def store_sriov_numvfs(self, pf: Pf, text: str) -> None:
        """sriov_numvfs_store(): EINVAL, ERANGE, same-value no-op, ENOENT without driver, 0 disables, EBUSY N->M."""
        wanted = fmt.kstrtoul(text, 0xFFFF)
        with self.lock:
            self.advance()
            if wanted > pf.totalvfs:
                raise fmt.oserror(errno.ERANGE)
            if wanted == pf.numvfs:
                return
            if pf.dev.driver is None:
                raise fmt.oserror(errno.ENOENT)
            if wanted == 0:
                self._disable_vfs(pf)
            elif pf.numvfs:
                raise fmt.oserror(errno.EBUSY)
            else:
                self._enable_vfs(pf, wanted)
            self._changed()
        if wanted and self.delays["sriov_numvfs_write"] > 0:
            self.sleep(self.delays["sriov_numvfs_write"])

    def _enable_vfs(self, pf: Pf, count: int) -> None:
        """pci_enable_sriov(): VF devices and virtfn/physfn links now; the VF driver probe after `vf_probe` s."""
        pf.numvfs = count
        pf.generation += 1
        for idx in range(count):
            bdf = pf.vf_bdf(idx)
            dev = self._add_device(bdf, pf.dev.path[:-1] + [bdf], pf.dev.model, "vf", pf.dev.klass, pf.dev.numa)
            dev.device_id = pf.dev.model.vf_device
            dev.vf = Vf(pf, idx, dev)
            self._vf_config(dev)
            pf.vfs.append(dev.vf)
            pf.admin[idx] = VfAdmin(link_state="disable" if pf.link_layer == "InfiniBand" else "auto")
        generation = pf.generation

        def probe() -> None:
            if pf.generation != generation:
                return
            for vf in pf.vfs:
                driver = self._vf_driver(vf.dev)
                if driver not in self.modules and self.on_disk(driver):
                    self._load(driver, {})  # udev loads the VF driver by modalias (iavf for Intel VFs)
                if vf.dev.driver is None and self._can_probe(vf.dev) and self._driver_loaded(driver):
                    self._attach(vf.dev, driver)
            self._sync()

        self.pending.append((self.clock() + self.delays["vf_probe"], probe))
        if self.delays["vf_probe"] <= 0:
            self.advance()

    def _disable_vfs(self, pf: Pf) -> None:
        """pci_disable_sriov(): VFs, their netdevs and RDMA devices go; the admin GUID cache goes with them."""
        for vf in pf.vfs:
            vf.dev.driver = None
            del self.devices[vf.dev.bdf]
        pf.vfs = []
        pf.numvfs = 0
        pf.admin = {}
        pf.generation += 1
        self._sync()

    def store_autoprobe(self, pf: Pf, text: str) -> None:
        """sriov_drivers_autoprobe_store(): kstrtobool."""
        value = fmt.kstrtobool(text)
        with self.lock:
            pf.autoprobe = value

    # ------------------------------------------------------------------ driver core (drivers/base/bus.c, dd.c)
    def _vf_driver(self, dev: PciDevice) -> str:
        return dev.model.vf_driver or dev.model.driver

    def _can_probe(self, dev: PciDevice) -> bool:
        """pci_device_can_probe(): a VF probes only with drivers_autoprobe on or a driver_override set."""
        if dev.vf is None:
            return True
        return dev.vf.pf.autoprobe or bool(dev.driver_override)

    def _driver_loaded(self, driver: str) -> bool:
        return driver == "pcieport" or driver in self.modules

    def store_bind(self, driver: str, text: str) -> None:
        """bind_store(): ENODEV if no such device or no ID match or can't probe; EBUSY if already bound."""
        bdf = text.strip()
        if self.delays["bind"] > 0:
            self.sleep(self.delays["bind"])
        with self.lock:
            self.advance()
            dev = self.devices.get(bdf)
            if dev is None or not driver_matches(driver, dev.model.vendor, dev.device_id):
                raise fmt.oserror(errno.ENODEV)
            if dev.driver_override and dev.driver_override != driver:
                raise fmt.oserror(errno.ENODEV)
            if dev.driver is not None:
                raise fmt.oserror(errno.EBUSY)
            if not self._can_probe(dev):
                raise fmt.oserror(errno.ENODEV)
            self._attach(dev, driver)
            self._sync()
            self._changed()

    def store_unbind(self, driver: str, text: str) -> None:
        """unbind_store(): ENODEV unless the device is bound to this very driver."""
        with self.lock:
            self.advance()
            dev = self.devices.get(text.strip())
            if dev is None or dev.driver != driver:
                raise fmt.oserror(errno.ENODEV)
            self._detach(dev)
            self._sync()
            self._changed()

    def store_driver_override(self, dev: PciDevice, text: str) -> None:
        """driver_override_store(): newline stripped, empty clears."""
        with self.lock:
            dev.driver_override = text.rstrip("\n") or None

    def _attach(self, dev: PciDevice, driver: str) -> None:
        dev.driver = driver

    def _detach(self, dev: PciDevice) -> None:
        """Driver remove; mlx5's remove_one() calls mlx5_sriov_disable(), so a PF takes its VFs with it."""
        if dev.pf is not None and dev.pf.vfs:
            self._disable_vfs(dev.pf)
        dev.driver = None

    def _bind_all(self) -> None:
        """Driver registration probes every matching unbound device (bus order), honouring VF autoprobe."""
        for dev in sorted(self.devices.values(), key=lambda d: fmt.bdf_rid(d.bdf)):
            driver = self._vf_driver(dev) if dev.vf else dev.model.driver
            if dev.driver is None and self._driver_loaded(driver) and self._can_probe(dev):
                dev.driver = driver

    # ------------------------------------------------------------------ netdevs and RDMA devices
    def _sync(self) -> None:
        """Create/remove netdevs and RDMA devices so they match bound drivers and loaded modules."""
        want_net: dict[str, PciDevice] = {}
        want_ib: list[PciDevice] = []
        for dev in sorted(self.devices.values(), key=lambda d: (d.vf is not None, fmt.bdf_rid(d.bdf))):
            if dev.driver is None or dev.kind in ("bridge", "gpu"):
                continue
            link = self._link_layer(dev)
            is_mlx = dev.driver == MLX5
            if is_mlx and "mlx5_ib" in self.modules:
                want_ib.append(dev)
            if link == "Ethernet" or ("ib_ipoib" in self.modules and "mlx5_ib" in self.modules):
                want_net[dev.bdf] = dev
        for name in [n for n, nd in self.netdevs.items() if nd.dev is not None and nd.dev.bdf not in want_net]:
            del self.netdevs[name]
        # a netdev in a pod's namespace is unregistered wherever it is (pci_disable_sriov(), driver unbind)
        for pod in self.ns_netdevs.values():
            for name in [n for n, nd in pod.items() if nd.dev is not None and nd.dev.bdf not in want_net]:
                del pod[name]
        for name in [n for n, ib in self.ibdevs.items() if ib.dev not in want_ib]:
            del self.ibdevs[name]
        have_ib = {ib.dev.bdf for ib in self.ibdevs.values()}
        for dev in want_ib:
            if dev.bdf not in have_ib:
                self._add_ibdev(dev)
        have_net = {nd.dev.bdf for nd in self.all_netdevs() if nd.dev is not None}
        for dev in want_net.values():
            if dev.bdf not in have_net:
                self._add_port_netdev(dev)
        for ib in self.ibdevs.values():
            ib.netdev = self._netdev_of(ib.dev) if ib.link_layer == "Ethernet" else None
        self._sync_irqs()

    def _sync_irqs(self) -> None:
        """mlx5_core frees a function's vectors when it unbinds and requests new ones (new numbers, its own
        affinities) when it binds (hwsim/irq.py)."""
        bound = sorted((d for d in self.devices.values() if d.driver == MLX5), key=lambda d: fmt.bdf_rid(d.bdf))
        names = {dev.bdf for dev in bound}
        for bdf in sorted({irq.bdf for irq in self.irq.irqs.values() if irq.bdf and irq.bdf not in names}):
            self.irq.free_device(bdf)
        for dev in bound:
            if not self.irq.of_device(dev.bdf):
                self.irq.request_mlx5(dev.bdf, dev.numa, dev.vf is not None)

    def _link_layer(self, dev: PciDevice) -> str:
        if dev.pf is not None:
            return dev.pf.link_layer
        if dev.vf is not None:
            return dev.vf.pf.link_layer
        return "Ethernet"

    def _netdev_of(self, dev: PciDevice) -> str | None:
        """The name of the function's netdev, in whichever namespace it is (an RDMA device's ``ib.netdev``)."""
        for netdev in self.all_netdevs():
            if netdev.dev is dev:
                return netdev.name
        return None

    def all_netdevs(self) -> list[NetDev]:
        """Every registered netdev: init_net's, then those in pods' namespaces."""
        return list(self.netdevs.values()) + [nd for pod in self.ns_netdevs.values() for nd in pod.values()]

    def netdev_of_device(self, dev: PciDevice) -> NetDev | None:
        """The function's netdev wherever it is (None: it has none)."""
        return next((nd for nd in self.all_netdevs() if nd.dev is dev), None)

    def _add_netdev(self, name: str, dev: PciDevice | None, kind: str, mtu: int, address: str, up: bool) -> NetDev:
        self._ifindex += 0 if name == "lo" else 1
        netdev = NetDev(name, dev, 1 if name == "lo" else self._ifindex, kind, mtu, address, up)
        self.netdevs[name] = netdev
        self.sysctl[name] = dict(self.sysctl["default"])
        self.sysctl[name].update(self.spec.sysctl.get(name, {}))
        return netdev

    def _add_port_netdev(self, dev: PciDevice) -> None:
        link = self._link_layer(dev)
        ib_kind = link == "InfiniBand"
        if dev.pf is not None:
            pf = dev.pf
            name = pf.fspec.netdev if pf.fspec.netdev and self._named_for_link(pf) else _predictable_name(pf, ib_kind)
            mtu = pf.fspec.mtu or (4092 if ib_kind else 1500)
            up = pf.fspec.port_state == "ACTIVE"
            guid = pf.node_guid
            mac = pf.mac
        else:
            assert dev.vf is not None
            pf = dev.vf.pf
            # register_netdev() names it from the driver's template: ipoib_add_port("ib%d"), alloc_etherdev "eth%d"
            name = self._alloc_name("ib%d" if ib_kind else "eth%d")
            mtu = 4092 if ib_kind else 1500
            up = False
            ibdev = next((ib for ib in self.ibdevs.values() if ib.dev is dev), None)
            guid = ibdev.port_guid if ibdev else 0
            mac = pf.admin[dev.vf.index].mac if any(pf.admin[dev.vf.index].mac) else _vf_mac(pf, dev.vf.index)
        address = fmt.ipoib_address(0x1000 + 0x48 * self._ifindex, guid) if ib_kind else fmt.mac_colons(mac)
        netdev = self._add_netdev(name, dev, "infiniband" if ib_kind else "ether", mtu, address, up)
        netdev.dev_port = 0
        if dev.pf is not None:
            netdev.name_assign_type = NET_NAME_RENAMED  # named at boot by udev (or a .link file matching the PF)
            if not ib_kind and dev.pf.card.is_mlx:
                netdev.qos = qos.power_on_state(dev.pf.card.fw_current, dev.pf.index + 1)
            return
        assert dev.vf is not None
        netdev.name_assign_type = NET_NAME_UNKNOWN if ib_kind else NET_NAME_ENUM
        if self.spec.vf_netdev_naming == "predictable":
            self._udev_rename(netdev, f"{self._vf_base_name(dev.vf.pf, ib_kind)}v{dev.vf.index}")

    def _alloc_name(self, template: str) -> str:
        """net/core/dev.c __dev_alloc_name(): the LOWEST number not in use in the namespace for the template
        (a bitmap of the names that sscanf/snprintf round-trip, then find_first_zero_bit) - not a counter, so a
        re-probed VF gets whatever number is free at that moment."""
        prefix = template[:-2]
        used = set()
        for name in self.netdevs:
            digits = name[len(prefix):]
            if name.startswith(prefix) and digits.isdigit() and str(int(digits)) == digits:
                used.add(int(digits))
        number = 0
        while number in used:
            number += 1
        return f"{prefix}{number}"

    def _udev_rename(self, netdev: NetDev, target: str) -> None:
        """systemd-udevd's 80-net-setup-link rename of a new netdev, ``delays.udev_rename`` s after the kernel's
        "add" uevent (until then readers see the kernel's ib%d / eth%d name; sriov-network-operator PR #720 and its
        VFIsReady() re-checking the name by PCI address deal with exactly this window).  udev does not rename a link
        that is already up (systemd PR #21109; dev_change_name() answers EBUSY for IFF_UP) and a taken name fails
        with EEXIST (systemd issue #2657): in both cases the kernel name stays."""
        def rename() -> None:
            if self.netdevs.get(netdev.name) is not netdev or netdev.up or target in self.netdevs:
                return
            del self.netdevs[netdev.name]
            self.sysctl[target] = self.sysctl.pop(netdev.name, dict(self.sysctl["default"]))
            netdev.name = target
            netdev.name_assign_type = NET_NAME_RENAMED
            self.netdevs[target] = netdev
            for ib in self.ibdevs.values():
                if ib.dev is netdev.dev and ib.link_layer == "Ethernet":
                    ib.netdev = target
            self._changed()

        delay = self.delays.get("udev_rename", 0.0)
        if delay <= 0:
            rename()
        else:
            self.pending.append((self.clock() + delay, rename))

    def _vf_base_name(self, pf: Pf, ib_kind: bool) -> str:
        """The PF part of a VF's predictable name: systemd's net_id names an SR-IOV VF after its PF's PCI device plus
        ``v<N>`` (systemd commit 609948c7 "Improve predictable names for SR-IOV virtual devices", v239), from the PF
        device's slot/path names - not from the PF netdev's current name (systemd issue #32836) and without the PF's
        ``n<phys_port_name>`` suffix (a legacy-mode VF netdev has no physical port name)."""
        name = pf.fspec.netdev if pf.fspec.netdev and self._named_for_link(pf) else _predictable_name(pf, ib_kind)
        return re.sub(r"np\d+$", "", name)

    def _named_for_link(self, pf: Pf) -> bool:
        """A spec netdev name is for the spec's link type; after a LINK_TYPE change the predictable name applies."""
        name = pf.fspec.netdev or ""
        return name.startswith("ib") == (pf.link_layer == "InfiniBand")

    def _add_ibdev(self, dev: PciDevice) -> None:
        reserved = {pf.fspec.rdma for card in self.cards for pf in card.pfs if pf.fspec.rdma}
        if dev.pf is not None and dev.pf.fspec.rdma and dev.pf.fspec.rdma not in self.ibdevs:
            name = dev.pf.fspec.rdma
        else:
            idx = 0
            while f"mlx5_{idx}" in self.ibdevs or f"mlx5_{idx}" in reserved:
                idx += 1
            name = f"mlx5_{idx}"
        if dev.pf is not None:
            pf = dev.pf
            node_guid = port_guid = pf.node_guid
            sys_guid = pf.card.pfs[0].node_guid
            lid, sm_lid = pf.fspec.lid, pf.fspec.sm_lid
        else:
            assert dev.vf is not None
            admin = dev.vf.pf.admin[dev.vf.index]
            node_guid, port_guid = admin.node_guid, admin.port_guid
            sys_guid = dev.vf.pf.card.pfs[0].node_guid
            lid, sm_lid = 0, dev.vf.pf.fspec.sm_lid
        hw = dict((counter, 0) for counter in dev.model.hw_counters)
        if dev.pf is not None:
            hw.update(dev.pf.fspec.hw_counters)
        self.ibdevs[name] = IbDev(name, dev, self._ibindex, node_guid, sys_guid, port_guid, self._link_layer(dev), None,
                                  lid, sm_lid, hw)
        self._ibindex += 1

    # ------------------------------------------------------------------ hw_counters and traffic
    def hw_counter(self, ib: IbDev, name: str) -> int:
        """``ports/1/hw_counters/<name>``: the value at registration plus what the traffic flows counted, wrapped at
        the counter's width (32-bit Q counters wrap; sysfs prints ``%llu``)."""
        with self.lock:
            now = self.clock()
            value = ib.hw.get(name, 0) + sum(flow.count(now).get(name, 0) for flow in ib.flows)
            return value & ((1 << HW_COUNTER_BITS.get(name, 64)) - 1)

    def _ibdev_port(self, name: str, port: int) -> IbDev:
        ib = self.ibdevs.get(name)
        if ib is None or port != 1:
            raise fmt.oserror(errno.ENODEV, f"{name}/{port}")
        return ib

    def port_fault(self, name: str, port: int) -> dict[str, Any]:
        """What a port does to the traffic through it: its retransmit fault (none: no loss, full throughput) and its
        rate and link layer (the perftest shim exchanges this with its peer)."""
        with self.lock:
            ib = self._ibdev_port(name, port)
            fault = self.faults.retransmit(self.canonical(f"sys/class/infiniband/{name}/ports/{port}"), self.canonical)
            return {"per_second": fault.per_second if fault else 0.0, "throughput": fault.throughput if fault else 1.0,
                    "cnps_per_second": fault.cnps_per_second if fault else 0.0, "rate": self.port_rate(ib),
                    "link_layer": ib.link_layer, "state": self.port_state(ib)}

    def traffic(self, name: str, port: int, role: str, seconds: float, peer: dict[str, Any] | None = None) -> dict[str, Any]:
        """RC traffic through the port for `seconds` from now, as `requester` (it sends: ib_write_bw's client) or
        `responder` (it receives); the port's hw_counters grow while it runs.

        Packets lost at either end's port (this port's retransmit fault and the peer's, ``peer["per_second"]``) are
        recovered by retransmission: the requester counts each as ``packet_seq_err`` (a sequence-error NAK came back)
        or, for TIMEOUT_SHARE of them, ``local_ack_timeout_err`` (its ACK timer expired; on a RoCE port with RoCE
        acceleration also ``roce_adp_retrans``); the responder counts ``out_of_sequence`` (it saw the gap and NAKed)
        or ``duplicate_request`` (the requester resent from the last ACKed packet after its timeout).  Congestion
        notifications (RoCE only): the requester counts ``rp_cnp_handled``, the responder ``np_ecn_marked_roce_packets``
        and ``np_cnp_sent``.  Counters the model does not have stay absent.
        """
        if role not in ("requester", "responder"):
            raise ValueError("role must be requester or responder")
        seconds = float(seconds)
        if not 0 < seconds <= 3600:
            raise ValueError("seconds must be > 0 and <= 3600")
        peer = peer or {}
        with self.lock:
            own = self.port_fault(name, port)
            ib = self.ibdevs[name]
            losses = own["per_second"] + float(peer.get("per_second") or 0)
            cnps = own["cnps_per_second"] + float(peer.get("cnps_per_second") or 0)
            timeouts, naks = losses * TIMEOUT_SHARE, losses * (1 - TIMEOUT_SHARE)
            if role == "requester":
                rates = {"packet_seq_err": naks, "local_ack_timeout_err": timeouts}
                if ib.link_layer == "Ethernet":
                    rates.update(roce_adp_retrans=timeouts, rp_cnp_handled=cnps)
            else:
                rates = {"out_of_sequence": naks, "duplicate_request": timeouts}
                if ib.link_layer == "Ethernet":
                    rates.update(np_ecn_marked_roce_packets=cnps, np_cnp_sent=cnps)
            rates = dict((key, value) for key, value in rates.items() if key in ib.hw and value)
            now = self.clock()
            ib.flows.append(Flow(now, now + seconds, rates))
            return dict(own, role=role, seconds=seconds, rates=rates)

    def port_state(self, ib: IbDev) -> str:
        """Logical port state: a PF follows its spec; a VF is ACTIVE only with a non-zero GUID and policy auto/enable.

        [inference] from ib-sriov-cni and the community procedure in domain-facts.md §3: zero-GUID or policy-Down VFs
        do not come up in the fabric.
        """
        dev = ib.dev
        if dev.pf is not None:
            return dev.pf.fspec.port_state
        assert dev.vf is not None
        pf_state = dev.vf.pf.fspec.port_state
        if ib.link_layer == "Ethernet":
            return pf_state
        admin = dev.vf.pf.admin[dev.vf.index]
        if admin.link_state == "disable" or ib.port_guid == 0:
            return "DOWN"
        return pf_state

    def port_rate(self, ib: IbDev) -> str:
        """Port rate text as sysfs prints it."""
        pf = ib.dev.pf or (ib.dev.vf.pf if ib.dev.vf else None)
        if pf is not None and pf.fspec.rate:
            return pf.fspec.rate
        return ib.dev.model.rates.get(ib.link_layer, "10 Gb/sec (4X SDR)")

    # ------------------------------------------------------------------ netlink-side operations (shims)
    def netdev(self, name: str) -> NetDev:
        """A netdev by name (ENODEV, as rtnetlink answers for an unknown device)."""
        self.advance()
        netdev = self.netdevs.get(name)
        if netdev is None:
            raise fmt.oserror(errno.ENODEV, name)
        return netdev

    def set_vf(self, ifname: str, vf_index: int, **attrs: Any) -> None:
        """`ip link set <pf> vf N ...`: stores the VF admin state in the PF driver's cache.

        GUIDs only exist on IPoIB PFs (ipoib has ndo_set_vf_guid; mlx5e does not -> EOPNOTSUPP); mac/vlan/trust/
        spoofchk only on Ethernet PFs (ipoib lacks those ndo ops). A VF index past num_vfs is EINVAL (rtnetlink).
        GUID changes reach the VF only when its driver re-probes (unbind/bind), as on mlx5.
        """
        self.faults.check("write", f"{RTNL}/{ifname}/vf/{vf_index}", lambda path: path)
        with self.lock:
            netdev = self.netdev(ifname)
            pf = netdev.dev.pf if netdev.dev is not None else None
            if pf is None:
                raise fmt.oserror(errno.EOPNOTSUPP, ifname)
            if vf_index < 0 or vf_index >= pf.numvfs:
                raise fmt.oserror(errno.EINVAL, ifname)
            admin = pf.admin[vf_index]
            ib_only = {"node_guid", "port_guid"}
            eth_only = {"mac", "vlan", "qos", "trust", "spoofchk"}
            for key, value in attrs.items():
                if (key in ib_only and pf.link_layer != "InfiniBand") or (key in eth_only and pf.link_layer == "InfiniBand"):
                    raise fmt.oserror(errno.EOPNOTSUPP, ifname)
                if key in ("node_guid", "port_guid"):
                    setattr(admin, key, fmt.parse_guid(value) if isinstance(value, str) else int(value))
                elif key == "state":
                    admin.link_state = value
                elif key == "mac":
                    admin.mac = bytes(int(octet, 16) for octet in value.split(":"))
                elif key in ("trust", "spoofchk"):
                    setattr(admin, key, bool(value))
                elif key in ("vlan", "qos"):
                    setattr(admin, key, int(value))
                else:
                    raise fmt.oserror(errno.EINVAL, key)

    def store_ofed_vf(self, pf: Pf, vf_index: int, attr: str, text: str) -> None:
        """MLNX/DOCA OFED ``sriov/<vf>/{node,port,policy}`` stores (mlnx-ofa_kernel mlx5 sriov_sysfs.c).

        node/port: ``sscanf("%02x:%02x:...")`` must give 8 octets, else EINVAL; the value goes to the VF's vport
        context (and the driver's vfs_ctx, so netlink reads it back). policy: exactly Down, Up or Follow, else EINVAL.
        """
        with self.lock:
            admin = pf.admin.get(vf_index)
            if admin is None:
                raise fmt.oserror(errno.ENODEV)
            if attr == "policy":
                word = text.strip()
                if word not in OFED_POLICY:
                    raise fmt.oserror(errno.EINVAL)
                admin.link_state = OFED_POLICY[word]
                return
            octets = text.strip().split(":")
            if len(octets) != 8 or not all(re.fullmatch(r"[0-9a-fA-F]{1,2}", octet) for octet in octets):
                raise fmt.oserror(errno.EINVAL)
            setattr(admin, "node_guid" if attr == "node" else "port_guid", int("".join(o.zfill(2) for o in octets), 16))

    def ofed_policy(self, pf: Pf, vf_index: int) -> str:
        """policy_show(): the word for the VF's vport state policy."""
        state = pf.admin[vf_index].link_state
        return next(word for word, name in OFED_POLICY.items() if name == state)

    def eswitch_pf(self, bdf: str) -> Pf:
        """The PF behind `devlink dev eswitch ... pci/<bdf>`: ENODEV unknown; EOPNOTSUPP without an mlx5 Ethernet
        eswitch (mlx5 has no eswitch on an InfiniBand port, and other drivers here implement no eswitch ops)."""
        dev = self.devices.get(bdf)
        if dev is None or dev.pf is None:
            raise fmt.oserror(errno.ENODEV, bdf)
        pf = dev.pf
        if not pf.card.is_mlx or pf.link_layer != "Ethernet":
            raise fmt.oserror(errno.EOPNOTSUPP, bdf)
        return pf

    def eswitch_set(self, bdf: str, mode: str) -> None:
        """`devlink dev eswitch set pci/<bdf> mode legacy|switchdev` (same mode: no-op). [inference] current mlx5
        allows the change with VFs enabled (it disables and re-enables the eswitch), so no EBUSY is modelled."""
        if mode not in ("legacy", "switchdev"):
            raise fmt.oserror(errno.EINVAL, mode)
        with self.lock:
            self.eswitch_pf(bdf).eswitch = mode

    def set_link(self, ifname: str, mtu: int | None = None, up: bool | None = None) -> None:
        """`ip link set dev X mtu N | up | down` on a simulated netdev; MTU range as the drivers enforce it."""
        with self.lock:
            netdev = self.netdev(ifname)
            if mtu is not None:
                limit = 4092 if netdev.kind == "infiniband" else 9978
                if mtu < 68 or mtu > limit:
                    raise fmt.oserror(errno.EINVAL, ifname)
                netdev.mtu = mtu
            if up is not None:
                netdev.up = up

    def store_mtu(self, netdev: NetDev, text: str) -> None:
        """net/<if>/mtu store: kstrtoul then dev_set_mtu() range checks."""
        self.set_link(netdev.name, mtu=fmt.kstrtoul(text, 0xFFFFFFFF))

    def set_netns_mode(self, shared: bool) -> None:
        """RDMA_NLDEV_CMD_SYS_SET -> rdma_compatdev_set(): same mode no-op, EBUSY if any non-init netns exists."""
        with self.lock:
            if "ib_core" not in self.modules:
                raise fmt.oserror(errno.EPROTONOSUPPORT)
            if shared == self.netns_shared:
                return
            if self.netns:
                raise fmt.oserror(errno.EBUSY)
            self.netns_shared = shared
            self.modules["ib_core"].params["netns_mode"] = "Y" if shared else "N"

    def netns_add(self, name: str) -> None:
        """A non-init network namespace now exists (a pod sandbox, `ip netns add`)."""
        with self.lock:
            if name in self.netns:
                raise fmt.oserror(errno.EEXIST, name)
            self.netns.append(name)
            self.ns_netdevs[name] = {}

    def netns_del(self, name: str) -> dict[str, Any]:
        """The namespace is gone (its last reference dropped: the pod sandbox torn down).  What the kernel's pernet
        exit handlers do with the devices still in it:

        * netdevs - net/core/dev.c ``default_device_exit_net()``: every device that is not ``netns_local`` and is
          physical (no ``rtnl_link_ops``, or ops with ``netns_refund``: IPoIB's ``ipoib_link_ops`` has it,
          drivers/infiniband/ulp/ipoib/ipoib_netlink.c; mlx5e and iavf netdevs have no link ops) goes back to
          init_net through ``dev_change_net_namespace(dev, &init_net, fb_name)``: under its name in the pod when
          init_net has no netdev of that name, else ``dev<ifindex>``, else the lowest free ``dev%d``;
        * RDMA devices - drivers/infiniband/core/device.c ``rdma_dev_exit_net()`` moves every device of the dying
          namespace back to init_net with ``rdma_dev_change_netns()``, under the same name (RDMA device names are
          unique system-wide).

        Returns ``{"netdevs": {name in the pod: name in init_net}, "rdma": [names]}``."""
        with self.lock:
            self.advance()
            if name not in self.netns:
                raise fmt.oserror(errno.ENOENT, name)
            refunded = {}
            for pod_name, netdev in list(self.ns_netdevs.get(name, {}).items()):
                if netdev.name in self.netdevs:
                    fallback = f"dev{netdev.ifindex}"
                    target = fallback if fallback not in self.netdevs else self._alloc_name("dev%d")
                else:
                    target = netdev.name
                self._netdev_to(netdev, name, None, target)
                refunded[pod_name] = target
            moved = []
            for ib in self.ibdevs.values():
                if ib.netns == name:
                    ib.netns = None
                    moved.append(ib.name)
            self.netns.remove(name)
            self.ns_netdevs.pop(name, None)
            self._changed()
            return {"netdevs": refunded, "rdma": moved}

    def _ns_table(self, netns: str | None) -> dict[str, NetDev]:
        """The netdevs of a namespace by name (None: init_net); ENOENT for a namespace that does not exist."""
        if netns is None:
            return self.netdevs
        if netns not in self.netns:
            raise fmt.oserror(errno.ENOENT, netns)
        return self.ns_netdevs.setdefault(netns, {})

    def _netdev_to(self, netdev: NetDev, source: str | None, target: str | None, name: str) -> None:
        """net/core/dev.c ``__dev_change_net_namespace()``: the netdev leaves ``source`` and registers in ``target``
        under ``name``, keeping its ifindex (the simulator's ifindexes are unique on the node, so none collides).  It
        sends NETDEV_UNREGISTER then NETDEV_REGISTER, and IPv4 (net/ipv4/devinet.c ``inetdev_event()``) destroys the
        device's ``in_device`` and makes a fresh one from the *target* namespace's ``default`` devconf: the
        ``/proc/sys/net/ipv4/conf/<name>`` values do not travel with it (a netdev back in init_net has init_net's
        ``default`` values again).  Pods' own sysctl values are not modelled."""
        del self._ns_table(source)[netdev.name]
        if source is None:
            self.sysctl.pop(netdev.name, None)
        netdev.name = name
        netdev.netns = target
        self._ns_table(target)[name] = netdev
        if target is None:
            self.sysctl[name] = dict(self.sysctl["default"])

    def link_set_netns(self, ifname: str, netns: str | None, new_name: str | None = None,
                       source: str | None = None) -> str:
        """``ip [-n SOURCE] link set dev IFNAME netns NETNS [name NEW_NAME]`` (rtnetlink do_setlink() ->
        ``__dev_change_net_namespace()``): ENODEV for no such netdev in ``source`` (None: init_net), ENOENT for a
        namespace that does not exist, EINVAL for ``lo`` (NETIF_F_NETNS_LOCAL), EEXIST when the name is taken in
        the target namespace; moving to the namespace it is in is a no-op.  Returns the name in ``netns``.

        This is what the SR-IOV CNI (and the host-device CNI) does with a VF's netdev for a pod, renaming it to the
        pod's interface name (``net1``) inside, and back (under the name it had on the host) when the pod goes."""
        with self.lock:
            self.advance()
            table = self._ns_table(source)
            netdev = table.get(ifname)
            if netdev is None:
                raise fmt.oserror(errno.ENODEV, ifname)
            target = self._ns_table(netns)
            if netdev.dev is None:
                raise fmt.oserror(errno.EINVAL, ifname)
            name = new_name or ifname
            if netns == source:
                return ifname
            if name in target:
                raise fmt.oserror(errno.EEXIST, name)
            self._netdev_to(netdev, source, netns, name)
            self._changed()
            return name

    def rdma_dev_set_netns(self, name: str, netns: str | None, source: str | None = None) -> None:
        """``rdma dev set NAME netns NETNS`` (nldev.c nldev_set_doit() -> device.c ``ib_device_set_netns_put()`` ->
        ``rdma_dev_change_netns()``): EOPNOTSUPP while the subsystem is in shared mode (``ib_devices_shared_netns``),
        ENODEV for a device the caller's namespace (``source``; None: init_net) does not see, ENOENT for a
        namespace that does not exist; the device keeps its name (unique system-wide); moving a device to the
        namespace it is in is a no-op.  mlx5_ib has ``disassociate_ucontext``, so its devices can move.

        What the RDMA CNI (``rdma-cni``) does with a VF's RDMA device for a pod in exclusive mode."""
        with self.lock:
            self.advance()
            ib = self.ibdevs.get(name)
            if ib is None or (not self.netns_shared and ib.netns != source):
                raise fmt.oserror(errno.ENODEV, name)
            if netns is not None and netns not in self.netns:
                raise fmt.oserror(errno.ENOENT, netns)
            if self.netns_shared:
                raise fmt.oserror(errno.EOPNOTSUPP, name)
            if ib.netns == netns:
                return
            ib.netns = netns
            self._changed()

    def vf_set_netns(self, bdf: str, netns: str | None, ifname: str | None = None) -> dict[str, Any]:
        """A pod takes a VF (``netns``) or gives it back (None), as the CNIs do it: the VF's netdev moves
        (:meth:`link_set_netns`, renamed to ``ifname`` when given) and, in exclusive mode only, its RDMA device
        (:meth:`rdma_dev_set_netns`; in shared mode the RDMA device stays in init_net, visible to every
        namespace).  ENODEV for a PCI address that is not a bound VF.  Returns what moved:
        ``{"netdev": name in the target or None, "rdma": name or None}``."""
        with self.lock:
            self.advance()
            dev = self.devices.get(bdf)
            if dev is None or dev.vf is None or dev.driver is None:
                raise fmt.oserror(errno.ENODEV, bdf)
            if netns is not None and netns not in self.netns:
                raise fmt.oserror(errno.ENOENT, netns)
            netdev = self.netdev_of_device(dev)
            moved: dict[str, Any] = {"netdev": None, "rdma": None}
            if netdev is not None:
                moved["netdev"] = self.link_set_netns(netdev.name, netns, ifname, netdev.netns)
            ib = next((ib for ib in self.ibdevs.values() if ib.dev is dev), None)
            if ib is not None and not self.netns_shared:
                self.rdma_dev_set_netns(ib.name, netns, ib.netns)
                moved["rdma"] = ib.name
            return moved

    # ------------------------------------------------------------------ modules (kmod semantics)
    def modprobe(self, name: str, params: dict[str, str] | None = None) -> list[str]:
        """Load a module and its dependencies; returns the names actually inserted. ENOENT if unknown."""
        name = name.replace("-", "_")
        with self.lock:
            self.advance()
            if not self.on_disk(name):
                raise fmt.oserror(errno.ENOENT, name)
            inserted = self._load(name, params or {})
            self._bind_all()
            self._sync()
            self._changed()
            return inserted

    def _load(self, name: str, params: dict[str, str]) -> list[str]:
        if name in self.modules:
            return []
        mod = self.spec.modules[name]
        if not mod.on_disk:
            raise fmt.oserror(errno.ENOENT, name)
        inserted: list[str] = []
        for dep in mod.depends:
            if dep in self.spec.modules:
                inserted += self._load(dep, {})
        if mod.load_error:
            raise fmt.oserror(_errno_of(mod.load_error), name)
        if mod.needs_ofed_symbols:
            # nvidia-peermem's init is `return -EINVAL` when the driver's conftest found no OFED peer-memory
            # symbols at build time; built against another OFED than the running ib_core, the symbol CRCs differ
            # ("disagrees about version of symbol ib_register_peer_memory_client") and the insert fails EINVAL too
            core = self.modules.get("ib_core")
            if mod.built_against_ofed is None or core is None or core.ofed != mod.built_against_ofed:
                raise fmt.oserror(errno.EINVAL, name)
        values = dict(mod.params)
        values.update(self.module_options(name))
        values.update(params)
        if name == "ib_core":
            values["netns_mode"] = "Y" if values.get("netns_mode", "Y") in ("1", "Y", "y", "true") else "N"
            self.netns_shared = values["netns_mode"] == "Y"
        self.modules[name] = Module(name, values, self.ofed if name in OFED_MODULES else None)
        return inserted + [name]

    def mlx5_from_ofed(self) -> bool:
        """True when the running mlx5_core is OFED's build (its sysfs extensions, e.g. sriov/<vf>/, exist)."""
        module = self.modules.get(MLX5)
        return module is not None and module.ofed is not None

    def on_disk(self, name: str) -> bool:
        """Whether modprobe finds the module for the running kernel (in the catalogue and not removed)."""
        mod = self.spec.modules.get(name.replace("-", "_"))
        return mod is not None and mod.on_disk

    def module_version(self, name: str) -> str | None:
        """sys/module/<m>/version (MODULE_VERSION): OFED's build for OFED modules, the driver version for NVIDIA's;
        mainline RDMA modules have none."""
        module = self.modules.get(name)
        if module is None:
            return None
        if module.ofed:
            return ofed_module_version(module.ofed)
        if name.startswith("nvidia") and self.spec.nvidia_driver:
            return self.spec.nvidia_driver
        return None

    def set_ofed(self, version: str | None) -> None:
        """OFED's kernel packages were installed, upgraded (DKMS built them for this kernel) or removed.

        Only the modules on disk change: loaded modules stay what they are until they are reloaded (openibd
        restart) or the node reboots, as on a real node.
        """
        if version is not None and not re.match(OFED_RE, version):
            raise fmt.oserror(errno.EINVAL, str(version))
        with self.lock:
            self.ofed = version
            self._changed()

    def set_module(self, name: str, **changes: Any) -> None:
        """A module on disk changed (a DKMS build or removal): ``absent`` removes it from disk (loaded copies stay
        loaded), ``load_error`` (errno name or None), ``built_against_ofed`` (None: built without OFED's symbols)."""
        name = name.replace("-", "_")
        unknown = set(changes) - {"absent", "load_error", "built_against_ofed"}
        if unknown:
            raise ValueError(f"unknown module attributes {sorted(unknown)}")
        with self.lock:
            mod = self.spec.modules.get(name)
            if mod is None:
                if changes.get("absent"):
                    raise fmt.oserror(errno.ENOENT, name)
                mod = self.spec.modules[name] = ModuleSpec(name, 16384, [], {})
            if "absent" in changes:
                mod.on_disk = not changes["absent"]
            if "load_error" in changes:
                mod.load_error = changes["load_error"] or ""
            if "built_against_ofed" in changes:
                built = changes["built_against_ofed"]
                if built is not None and not re.match(OFED_RE, str(built)):
                    raise fmt.oserror(errno.EINVAL, str(built))
                mod.needs_ofed_symbols = True
                mod.built_against_ofed = built
            self._changed()

    def rebuild_module(self, name: str) -> str | None:
        """`dkms install` of a module that uses OFED's peer-memory API: its conftest now sees the OFED on disk."""
        self.set_module(name, built_against_ofed=self.ofed, load_error=None)
        return self.ofed

    def holders(self, name: str) -> list[str]:
        """Loaded modules that depend on `name` (the /proc/modules 'used by' column)."""
        return [other for other in self.modules if name in self.spec.modules[other].depends]

    def rmmod(self, name: str) -> list[str]:
        """`modprobe -r`: remove the module, then its dependencies that nothing else uses. EBUSY if in use."""
        name = name.replace("-", "_")
        with self.lock:
            self.advance()
            if name not in self.modules:
                raise fmt.oserror(errno.ENOENT, name)
            if self.holders(name):
                raise fmt.oserror(errno.EBUSY, name)
            removed = self._unload_with_unused_deps(name)
            self._sync()
            self._changed()
            return removed

    def _unload_with_unused_deps(self, name: str) -> list[str]:
        """kmod's modprobe -r also removes dependencies left unused, recursively."""
        removed = self._unload(name)
        for dep in self.spec.modules[name].depends:
            if dep in self.modules and not self.holders(dep):
                removed += self._unload_with_unused_deps(dep)
        return removed

    def _unload(self, name: str) -> list[str]:
        for dev in self.devices.values():
            if dev.driver == name:
                self._detach(dev)
        del self.modules[name]
        return [name]

    # ------------------------------------------------------------------ firmware (mstconfig)
    def card_by_bdf(self, bdf: str) -> Card:
        """The NIC card one of whose functions is at `bdf`."""
        dev = self.devices.get(bdf) or self.devices.get(f"0000:{bdf}")
        if dev is None or dev.pf is None or not dev.pf.card.is_mlx:
            raise fmt.oserror(errno.ENODEV, bdf)
        return dev.pf.card

    def fw_set(self, bdf: str, values: dict[str, str], apply: bool = True) -> dict[str, tuple[Any, Any]]:
        """Stage firmware parameters in 'Next'; returns {param: (old next, new next)}.  EINVAL for a parameter the card
        does not list (its model has none, or its dependency does not hold on the Next Boot values) or a value the
        parameter refuses; the OSError's filename is the message mlxconfig prints after ``-E-``.

        With apply=False only validates, which is what mstconfig does before asking for confirmation.
        """
        with self.lock:
            card = self.card_by_bdf(bdf)
            params = self.fw_params(card)
            listed = nvconfig.listed(params, card.fw_next)
            changes: dict[str, tuple[Any, Any]] = {}
            for key, raw in values.items():
                if key not in listed:
                    raise fmt.oserror(errno.EINVAL, f"Unknown Parameter: {key}")
                try:
                    new = params[key].parse(raw)
                except ValueError as exc:
                    raise fmt.oserror(errno.EINVAL, str(exc)) from None
                changes[key] = (card.fw_next[key], new)
            if apply:
                for key, (dummy_old, new) in changes.items():
                    card.fw_next[key] = new
            return changes

    def fw_reset(self, bdf: str, level: int = 3) -> dict[str, Any]:
        """``mlxfwreset --level 3 reset`` ("Driver restart and PCI reset", mstflint small_utils/mstfwreset.py): the
        driver is removed from every function of the card (mlx5's remove takes the VFs with it), the firmware reloads
        with its Next Boot values as Current, each function's configuration space is back at its reset values, and
        the driver probes the functions it was bound to again (new netdevs and RDMA devices).  Only level 3: level 0
        (live patch) loads no configuration and 4 is a warm reboot of the host (use `reset`).  EINVAL otherwise."""
        if level != 3:
            raise fmt.oserror(errno.EINVAL, f"reset level {level} is not simulated (only 3: Driver restart and PCI reset)")
        with self.lock:
            self.advance()
            card = self.card_by_bdf(bdf)
            bound = dict((pf.dev.bdf, pf.dev.driver) for pf in card.pfs)
            for pf in card.pfs:
                self._detach(pf.dev)
            self._sync()
            applied = dict((key, (card.fw_current.get(key), value)) for key, value in card.fw_next.items()
                           if card.fw_current.get(key) != value)
            card.fw_current = dict(card.fw_next)
            link = self._trained(card.pfs[0].dev)
            for pf in card.pfs:
                pf.numvfs = 0
                pf.vfs = []
                pf.admin = {}
                pf.eswitch = "legacy"
                pf.generation += 1
                pf.dev.klass = CLASS_IB if pf.link_layer == "InfiniBand" else CLASS_ETH
                pf.dev.config = pciconf.ConfigSpace(self._layout(pf.dev, link))
            for pf in card.pfs:
                driver = bound[pf.dev.bdf]
                if driver is not None and self._driver_loaded(driver):
                    self._attach(pf.dev, driver)
            self._sync()
            self._changed()
            return {"functions": sorted(bound), "applied": dict((key, [old, new]) for key, (old, new) in applied.items())}

    # ------------------------------------------------------------------ rdma cgroup
    def store_rdma_max(self, text: str) -> None:
        """rdmacg_resource_set_max(): '<dev> hca_handle=N|max hca_object=N|max'; ENODEV unknown device, EINVAL syntax."""
        words = text.split()
        if not words:
            raise fmt.oserror(errno.EINVAL)
        with self.lock:
            if words[0] not in self.ibdevs:
                raise fmt.oserror(errno.ENODEV)
            limits = dict(self.rdma_limits.get(words[0], {}))
            for word in words[1:]:
                key, dummy_sep, value = word.partition("=")
                if key not in ("hca_handle", "hca_object") or not re.fullmatch(r"max|\d+", value):
                    raise fmt.oserror(errno.EINVAL)
                limits[key] = value
            self.rdma_limits[words[0]] = limits

    # ------------------------------------------------------------------ sysctl
    def store_sysctl(self, scope: str, key: str, text: str) -> None:
        """proc_dointvec store for net.ipv4.conf.<scope>.<key> (no propagation from all/default)."""
        value = fmt.parse_proc_int(text)
        with self.lock:
            self.sysctl[scope][key] = value

    def store_irq_affinity(self, number: int, text: str, as_list: bool) -> None:
        """A write to /proc/irq/<n>/smp_affinity(_list) (hwsim/irq.py write_affinity())."""
        with self.lock:
            self.advance()
            self.irq.write_affinity(number, text, as_list)

    def store_irq_default(self, text: str) -> None:
        with self.lock:
            self.irq.write_default(text)

    def store_inherit(self, text: str) -> None:
        """net.core.devconf_inherit_init_net: proc_dointvec_minmax 0..3."""
        value = fmt.parse_proc_int(text)
        if not 0 <= value <= 3:
            raise fmt.oserror(errno.EINVAL)
        with self.lock:
            self.devconf_inherit_init_net = value

    # ------------------------------------------------------------------ RoCE QoS (tests/hwsim/qos.py)
    def qos_port(self, ifname: str) -> qos.PortQos:
        """The DCB state of a netdev: ENODEV for no such netdev, EOPNOTSUPP for one without mlx5 dcbnl ops (an
        IPoIB or non-mlx5 netdev, a VF: mlx5 builds dcbnl only on the port's vport group manager)."""
        with self.lock:
            self.advance()
            netdev = self.netdevs.get(ifname)
            if netdev is None:
                raise fmt.oserror(errno.ENODEV, ifname)
            if netdev.qos is None:
                raise fmt.oserror(errno.EOPNOTSUPP, ifname)
            return netdev.qos

    def dcb_show(self, ifname: str) -> dict[str, Any]:
        """DCB_CMD_IEEE_GET (+ DCBX): PFC, APP table, the trust they imply, the priority -> TC map."""
        with self.lock:
            return self.qos_port(ifname).as_dict()

    def dcb_set_pfc(self, ifname: str, pfc_en: int, delay: int | None = None) -> dict[str, Any]:
        with self.lock:
            port = self.qos_port(ifname)
            qos.set_pfc(port, pfc_en, delay)
            return port.as_dict()

    def dcb_app(self, ifname: str, op: str, apps: list) -> dict[str, Any]:
        with self.lock:
            port = self.qos_port(ifname)
            qos.app_change(port, op, apps)
            return port.as_dict()

    def store_ecn(self, netdev: NetDev, proto: str, prio: int, text: str) -> None:
        with self.lock:
            qos.store_ecn_enable(netdev.qos, proto, prio, text)

    def store_cnp(self, netdev: NetDev, attr: str, text: str) -> None:
        with self.lock:
            qos.store_cnp(netdev.qos, attr, text)

    def store_tclass(self, ib: IbDev, text: str) -> None:
        with self.lock:
            ib.tclass = qos.parse_tclass(text)

    def cma_device(self, name: str) -> IbDev:
        """The RDMA device a configfs group names (cma_configfs_params_get(): ENODEV once it is gone)."""
        ib = self.ibdevs.get(name)
        if ib is None:
            raise fmt.oserror(errno.ENODEV, name)
        return ib

    def store_roce_tos(self, name: str, text: str) -> None:
        """default_roce_tos_store(): kstrtou8 first (its ERANGE returned as is), then the device (ENODEV when it
        went away)."""
        value = fmt.kstrtoul(text, 0xFF, overflow=errno.ERANGE)
        with self.lock:
            self.cma_device(name).roce_tos = value

    def store_roce_mode(self, name: str, text: str) -> None:
        """default_roce_mode_store(): ib_cache_gid_parse_type_str() names, else EINVAL."""
        mode = text.rstrip("\n")
        if mode not in qos.GID_TYPES:
            raise fmt.oserror(errno.EINVAL)
        with self.lock:
            self.cma_device(name).roce_mode = mode

    def mkdir(self, path: str) -> None:
        """mkdir(2): only configfs ``sys/kernel/config/rdma_cm/<dev>`` (make_cma_dev(): ENODEV for a device rdma_cm
        does not know, EEXIST twice); everywhere else EPERM as on sysfs; ENOENT without rdma_cm loaded."""
        parts = [p for p in path.split("/") if p]
        with self.lock:
            self.advance()
            if parts[:3] != ["sys", "kernel", "config"]:
                raise fmt.oserror(errno.EPERM, path)
            if len(parts) != 5 or parts[3] != "rdma_cm":
                raise fmt.oserror(errno.EPERM if len(parts) > 4 else errno.EEXIST, path)
            if "rdma_cm" not in self.modules:
                raise fmt.oserror(errno.ENOENT, path)
            if parts[4] in self.cma_groups:
                raise fmt.oserror(errno.EEXIST, path)
            self.cma_device(parts[4])
            self.cma_groups.append(parts[4])
            self._changed()

    def rmdir(self, path: str) -> None:
        """rmdir(2) of an rdma_cm configfs group (its default port groups go with it); EPERM elsewhere."""
        parts = [p for p in path.split("/") if p]
        with self.lock:
            if parts[:4] != ["sys", "kernel", "config", "rdma_cm"] or len(parts) != 5:
                raise fmt.oserror(errno.EPERM, path)
            if parts[4] not in self.cma_groups:
                raise fmt.oserror(errno.ENOENT, path)
            self.cma_groups.remove(parts[4])
            self._changed()


def _kv(words: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for word in words:
        key, dummy_sep, value = word.partition("=")
        out[key] = value
    return out


def _errno_of(name: str) -> int:
    code = getattr(errno, name.upper(), None)
    return code if isinstance(code, int) else errno.EINVAL


def _predictable_name(pf: Pf, ib_kind: bool) -> str:
    """systemd path naming: [en|ib][P<domain>]p<bus>s<slot>[f<fn>][np<port>] (fn only on multi-function cards)."""
    domain, bus, slot, func = fmt.parse_bdf(pf.dev.bdf)
    prefix = "ib" if ib_kind else "en"
    name = f"{prefix}{f'P{domain}' if domain else ''}p{bus}s{slot}"
    if len(pf.card.pfs) > 1:
        name += f"f{func}"
    if not ib_kind:
        name += f"np{pf.index}"
    return name


def _vf_mac(pf: Pf, index: int) -> bytes:
    """A stable locally administered MAC for a VF netdev (the real driver picks a random one)."""
    return bytes([0x02, pf.mac[1], pf.mac[2], pf.mac[5], (index >> 8) & 0xFF, index & 0xFF])


def _fallback_guid(bdf: str) -> int:
    """A stable non-zero GUID for cards whose spec gives none: NVIDIA OUI b8:3f:d2 plus the PCI address."""
    domain, rid = fmt.bdf_rid(bdf)
    return (0xB83FD203 << 32) | (domain << 16) | rid
