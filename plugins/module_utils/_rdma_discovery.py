# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Observation for ``rdma_facts``: walk sysfs/procfs through :class:`HostRoot` and return plain data.

No AnsibleModule here, and one command only: the VF admin attributes (trust, spoof check, link state, VLAN/QoS,
MAC) live in the PF driver and the kernel exposes them through rtnetlink alone (``ip -j link show dev <pf>``,
``vfinfo_list``), one call per PF that has VFs, and only when ``gather()`` is given a HostCommands.  One pass, every
file read at most once:

* ``/sys/class/infiniband/*``       RDMA devices (-> their PCI function, ports, GUIDs)
* the RDMA devices' PCI functions   NUMA node, driver, netdevs, SR-IOV counts, ``virtfnN``/``physfn`` links
* ``/sys/bus/pci/devices/*``        NVIDIA display/3D controllers (``vendor`` first, the rest only for 0x10de)
* ``/sys/class/net/<netdev>/mtu``, ``/proc/sys/net/ipv4/conf/{all,default,<netdev>}/...``
* ``/sys/module/ib_core/parameters/netns_mode``, ``/proc/cmdline``, ``/proc/modules``
* ``rdma.max`` under ``/sys/fs/cgroup``, descending only into cgroups whose parent enables ``rdma``

Attributes that are absent give ``None``; attributes that exist but cannot be read or parsed give ``None`` *and*
an entry in ``problems`` (``{path, error}``) so an audit can say "unknown" instead of trusting a wrong value.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import posixpath
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as topo
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import rules as _sriov
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline

NVIDIA_VENDOR = "0x10de"
#: PCI class prefixes of GPUs: 0x0300 VGA-compatible display controller, 0x0302 3D controller
GPU_CLASS_PREFIXES = ("0x0300", "0x0302")
SYSCTL_KEYS = ("arp_ignore", "arp_announce", "rp_filter")
ZERO_GUID = "0000:0000:0000:0000"
#: per-VF admin attributes read from ``ip link show <pf>`` (None when not read or not reported by the driver)
VF_ADMIN_KEYS = ("link_state", "trust", "spoofchk", "vlan", "qos", "mac")

_VIRTFN_RE = re.compile(r"^virtfn(\d+)$")
_GID_RE = re.compile(r"^[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){7}$")
_RDMA_LIMIT_RE = re.compile(r"^([A-Za-z0-9_]+)=(\S+)$")

SYS_IB = "/sys/class/infiniband"
SYS_NET = "/sys/class/net"
SYS_PCI = "/sys/bus/pci/devices"
CGROUP_ROOT = "/sys/fs/cgroup"
_V1_FILES = ("tasks", "notify_on_release", "release_agent")


class _Reader:
    """HostRoot access that never raises for a single node: failures land in ``problems``."""

    def __init__(self, host):
        self.host = host
        self.problems = []

    def attr(self, path):
        return self.host.try_attr(path, None, self.problems)

    def int(self, path):
        return self.host.read_int(path, None, 10, self.problems)

    def text(self, path):
        try:
            return self.host.read_text(path)
        except HostReadError as exc:
            self.problems.append({"path": path, "error": exc.msg})
            return None

    def listdir(self, path):
        try:
            return self.host.listdir(path)
        except HostReadError as exc:
            self.problems.append({"path": path, "error": exc.msg})
            return []

    def problem(self, path, error):
        self.problems.append({"path": path, "error": error})

    def follow(self, path, target=False):
        """The node path a class/bus entry points to (:meth:`HostRoot.follow`)."""
        return self.host.follow(path, target)


# /proc/<pid>/comm of device plugins (cut at 15 characters by the kernel)
DEVICE_PLUGIN_COMMS = ("k8s-rdma-shared", "sriovdp")


def _numa(value):
    """``numa_node`` as reported: an int >= 0, or None for -1 / missing / unparsable (never node 0 by default)."""
    if value is None or value < 0:
        return None
    return value


def _state_name(text):
    """``"4: ACTIVE"`` -> ``"ACTIVE"``; text without a number prefix is returned as it is."""
    if text is None:
        return None
    head, sep, tail = text.partition(":")
    if sep and head.strip().isdigit():
        return tail.strip()
    return text


def port_guid_from_gid(gid):
    """The interface-id half of a GID (``fe80:0000:0000:0000:0002:c903:00f9:bfa1`` -> ``0002:c903:00f9:bfa1``)."""
    if gid is None or not _GID_RE.match(gid):
        return None
    return ":".join(gid.lower().split(":")[4:])


def _device_dir(path, bdf):
    """Cut a sysfs path after its PCI function's component (``.../0000:82:00.0/infiniband/mlx4_0`` -> ``.../0000:82:00.0``)."""
    idx = path.rfind("/" + bdf)
    if idx < 0:
        return None
    return path[:idx + len(bdf) + 1]


class _Pci:
    """One PCI function, read lazily and at most once."""

    def __init__(self, reader, bdf, path):
        self.reader = reader
        self.bdf = bdf
        self.path = path
        self.position = topo.pci_path(path)
        self._entries = None
        self._numa = False
        self._driver = False

    @property
    def entries(self):
        if self._entries is None:
            self._entries = set(self.reader.listdir(self.path))
        return self._entries

    @property
    def numa_node(self):
        if self._numa is False:
            self._numa = _numa(self.reader.int(self.path + "/numa_node")) if "numa_node" in self.entries else None
        return self._numa

    @property
    def driver(self):
        if self._driver is False:
            self._driver = self.reader.host.link_name(self.path + "/driver") if "driver" in self.entries else None
        return self._driver

    def netdevs(self):
        if "net" not in self.entries:
            return []
        return sorted(self.reader.listdir(self.path + "/net"), key=topo.natural_key)

    def physfn(self):
        if "physfn" not in self.entries:
            return None
        bdf = topo.normalize_bdf(self.reader.host.link_name(self.path + "/physfn") or "")
        if bdf is None:
            self.reader.problem(self.path + "/physfn", "physfn entry is not a link to a PCI function")
        return bdf

    def sriov(self):
        if "sriov_totalvfs" not in self.entries:
            return None
        numvfs = self.reader.int(self.path + "/sriov_numvfs") if "sriov_numvfs" in self.entries else None
        return {"totalvfs": self.reader.int(self.path + "/sriov_totalvfs"), "numvfs": numvfs}

    def virtfns(self):
        """``[(index, vf_bdf, vf_path)]`` from the ``virtfnN`` links, by index."""
        found = []
        for entry in self.entries:
            match = _VIRTFN_RE.match(entry)
            if not match:
                continue
            link = self.path + "/" + entry
            target = self.reader.host.readlink(link)
            bdf = topo.normalize_bdf(posixpath.basename((target or "").rstrip("/")))
            if bdf is None:
                self.reader.problem(link, "virtfn entry is not a link to a PCI function")
                continue
            vf_path = self.reader.follow(link, target)
            found.append((int(match.group(1)), bdf, vf_path))
        return sorted(found)


class _Discovery:
    def __init__(self, host, commands=None):
        self.reader = _Reader(host)
        self.host = host
        self.commands = commands
        self.pci = {}
        self._found = None

    def pci_at(self, bdf, path):
        known = self.pci.get(bdf)
        if known is None:
            known = _Pci(self.reader, bdf, path)
            self.pci[bdf] = known
        return known

    def found(self):
        """``{devices, gpus, numa_nodes, gpu_nic_affinity}`` of the node, read once per discovery.

        gather() reads them through this; rdma_facts gives the same discovery to the rooms that need them (the
        health and counters observers), so one rdma_facts run reads these sysfs files once, not three times."""
        if self._found is None:
            devices = self.rdma_devices()
            gpus = self.gpus(skip=set(self.pci))
            numa = self.numa_nodes()
            nodes_with_cpu = numa["has_cpu"] if numa["has_cpu"] is not None else numa["online"]
            single_numa = nodes_with_cpu is not None and len(nodes_with_cpu) == 1
            self._found = {"devices": devices, "gpus": gpus, "numa_nodes": numa,
                           "gpu_nic_affinity": self.affinity(gpus, devices, single_numa)}
        return self._found

    # -- RDMA devices ----------------------------------------------------------------------
    def _ports(self, ib_path):
        ports = []
        for name in sorted(self.reader.listdir(ib_path + "/ports"), key=topo.natural_key):
            base = ib_path + "/ports/" + name
            link_layer = self.reader.attr(base + "/link_layer")
            gid0 = self.reader.attr(base + "/gids/0")
            ports.append({
                "port": int(name) if name.isdigit() and name.isascii() else name,  # (int("²") is a ValueError)
                "link_layer": link_layer,
                "state": _state_name(self.reader.attr(base + "/state")),
                "phys_state": _state_name(self.reader.attr(base + "/phys_state")),
                "rate": self.reader.attr(base + "/rate"),
                "port_guid": port_guid_from_gid(gid0) if link_layer == "InfiniBand" else None,
                # RoCE: the netdev behind GID 0 (the kernel answers EINVAL here for InfiniBand ports)
                "netdev": self.reader.attr(base + "/gid_attrs/ndevs/0") if link_layer == "Ethernet" else None,
            })
        return ports

    def rdma_devices(self):
        devices = []
        for name in sorted(self.reader.listdir(SYS_IB), key=topo.natural_key):
            entry = SYS_IB + "/" + name
            path = self.reader.follow(entry)
            if path is None or not self.host.exists(path):
                self.reader.problem(entry, "dangling link: the RDMA device's sysfs directory does not exist")
                path = None
            ports = self._ports(path) if path else []
            position = topo.pci_path(path) if path else None
            pci = None
            if position is not None:
                pci = self.pci_at(position["bdf"], _device_dir(path, position["bdf"]))
            device = {
                "name": name,
                "pci_address": pci.bdf if pci else None,
                "numa_node": pci.numa_node if pci else None,
                "driver": pci.driver if pci else None,
                "netdevs": pci.netdevs() if pci else [],
                "ports": ports,
                "node_guid": self.reader.attr(path + "/node_guid") if path else None,
                "fw_ver": self.reader.attr(path + "/fw_ver") if path else None,
                "board_id": self.reader.attr(path + "/board_id") if path else None,
                "is_vf": False,
                "pf": None,
                "sriov": None,
                "vfs": [],
            }
            if pci is None:
                # a device with no PCI function of its own (Soft-RoCE rxe, siw): its netdevs are its ports' GID netdevs.
                # Not for a PCI function with no netdev listed: a VF whose netdev a pod's namespace holds (SR-IOV CNI)
                # still names it in its GID's ndev (print_ndev() prints the name in the pod, ``net1``), a name this
                # namespace has no such interface for - or another one (its MTU and sysctls would be another's)
                device["netdevs"] = sorted(set(p["netdev"] for p in ports if p["netdev"]), key=topo.natural_key)
            if pci is not None:
                device["pf"] = pci.physfn()
                device["is_vf"] = device["pf"] is not None
                device["sriov"] = pci.sriov()
            devices.append(device)
        by_pci = {}
        for device in devices:
            if device["pci_address"] and device["pci_address"] not in by_pci:
                by_pci[device["pci_address"]] = device
        for device in devices:
            if device["pci_address"] and not device["is_vf"]:
                device["vfs"] = self._vfs(self.pci[device["pci_address"]], by_pci)
                if device["vfs"]:
                    admin = self.vf_admin(device)
                    for vf in device["vfs"]:
                        vf.update((key, (admin.get(vf["index"]) or {}).get(key)) for key in VF_ADMIN_KEYS)
        return devices

    def vf_admin(self, device):
        """``{vf index: {link_state, trust, spoofchk, vlan, qos, mac, ...}}`` the PF driver holds, from
        ``ip -j link show dev <pf>`` (the text form when ``ip`` has no JSON output); ``{}`` without commands or
        without a PF netdev, and ``{}`` plus a problem when ``ip`` fails."""
        netdevs = [name for name in device["netdevs"] if "." not in name] or device["netdevs"]
        if self.commands is None or not netdevs:
            return {}
        argv = ["ip", "-j", "link", "show", "dev", netdevs[0]]
        rc, out, err = self.commands.run_kernel(argv)
        if rc == 0:
            try:
                return _sriov.parse_ip_vfs(out)
            except ParseError:
                pass
        argv = ["ip", "link", "show", "dev", netdevs[0]]  # iproute2 without -j (before 4.13, or built without JSON)
        rc, out, err = self.commands.run_kernel(argv)
        if rc == 0:
            try:
                return _sriov.parse_ip_vfs_text(out)
            except ParseError as exc:
                self.reader.problem(" ".join(argv), exc.msg)
                return {}
        self.reader.problem(" ".join(argv), "rc=%s: %s" % (rc, (err or out).strip()))
        return {}

    def _vfs(self, pf, by_pci):
        vfs = []
        for index, bdf, vf_path in pf.virtfns():
            vf_dev = by_pci.get(bdf)
            if vf_dev is not None:
                driver = vf_dev["driver"]
                first_port = vf_dev["ports"][0] if vf_dev["ports"] else {}
                node_guid = vf_dev["node_guid"]
                port_guid = first_port.get("port_guid")
            else:
                driver = self.pci_at(bdf, vf_path).driver if vf_path else None
                node_guid = port_guid = None
            vfs.append({
                "index": index,
                "pci_address": bdf,
                "driver": driver,
                "name": vf_dev["name"] if vf_dev else None,
                "node_guid": node_guid,
                "port_guid": port_guid,
            })
        return vfs

    # -- GPUs ----------------------------------------------------------------------------------
    def gpus(self, skip):
        gpus = []
        for entry in self.reader.listdir(SYS_PCI):
            bdf = topo.normalize_bdf(entry)
            if bdf is None or bdf in skip:
                continue
            link = SYS_PCI + "/" + entry
            vendor = self.reader.attr(link + "/vendor")
            if vendor is None or vendor.lower() != NVIDIA_VENDOR:
                continue
            pci_class = self.reader.attr(link + "/class")
            if pci_class is None or not pci_class.lower().startswith(GPU_CLASS_PREFIXES):
                continue
            pci = self.pci_at(bdf, self.reader.follow(link) or link)
            cpulist = None
            if "local_cpulist" in pci.entries:
                cpulist = self.reader.attr(pci.path + "/local_cpulist")
            elif "local_cpus" in pci.entries:
                mask = self.reader.attr(pci.path + "/local_cpus")
                try:
                    cpulist = topo.format_cpulist(topo.cpumask_to_list(mask)) if mask is not None else None
                except ValueError:
                    self.reader.problem(pci.path + "/local_cpus", "not a CPU mask: %r" % mask)
            gpus.append({
                "pci_address": bdf,
                "numa_node": pci.numa_node,
                "vendor": vendor.lower(),
                "device": self.reader.attr(pci.path + "/device") if "device" in pci.entries else None,
                "class": pci_class.lower(),
                "driver": pci.driver,
                "local_cpulist": cpulist,
            })
        gpus.sort(key=lambda gpu: topo.bdf_key(gpu["pci_address"]))
        return gpus

    def numa_nodes(self):
        """Online NUMA nodes and those with CPUs (``has_cpu``); None each when unknown."""
        out = {}
        for key in ("online", "has_cpu"):
            text = self.reader.attr("/sys/devices/system/node/" + key)
            try:
                out[key] = topo.parse_cpulist(text)
            except ValueError:
                self.reader.problem("/sys/devices/system/node/" + key, "not a node list: %r" % text)
                out[key] = None
        return out

    def affinity(self, gpus, devices, single_numa):
        matrix = {}
        nics = [dev for dev in devices if dev["pci_address"]]
        for gpu in gpus:
            gpu_pci = self.pci[gpu["pci_address"]]
            row = {}
            for nic in nics:
                nic_pci = self.pci[nic["pci_address"]]
                row[nic["name"]] = topo.classify(gpu_pci.position, nic_pci.position, gpu["numa_node"], nic["numa_node"],
                                                 single_numa=single_numa)
            matrix[gpu["pci_address"]] = row
        return matrix

    # -- node-wide settings ----------------------------------------------------------------------
    def netns_mode(self):
        value = self.reader.attr("/sys/module/ib_core/parameters/netns_mode")
        if value is None:
            return None
        if value in ("Y", "y", "1"):
            return "shared"
        if value in ("N", "n", "0"):
            return "exclusive"
        self.reader.problem("/sys/module/ib_core/parameters/netns_mode", "unexpected value %r" % value)
        return None

    def kernel_cmdline(self):
        raw = self.reader.attr("/proc/cmdline")
        if raw is None:
            return None
        return _cmdline.parse(raw)

    def modules(self):
        text = self.reader.text("/proc/modules")
        if text is None:
            return None
        return sorted({line.split()[0] for line in text.splitlines() if line.strip()})

    def sysctl(self, netdevs):
        out = {}
        for ifname in ["all", "default"] + list(netdevs):
            base = "/proc/sys/net/ipv4/conf/" + ifname + "/"
            out[ifname] = dict((key, self.reader.int(base + key)) for key in SYSCTL_KEYS)
        return out

    def cpu_vendor(self):
        """``vendor_id`` of the first CPU (``GenuineIntel``, ``AuthenticAMD`` ...), which picks the IOMMU switch."""
        for line in (self.reader.text("/proc/cpuinfo") or "").splitlines():
            if line.startswith("vendor_id"):
                return line.partition(":")[2].strip() or None
            if not line.strip():
                break
        return None

    def device_plugins(self):
        """Sorted ``comm`` names of running Kubernetes RDMA/SR-IOV device plugins (the shared device plugin's
        ``k8s-rdma-shared``, the SR-IOV device plugin's ``sriovdp``), which the netns mode must agree with."""
        found = set()
        for entry in self.reader.listdir("/proc"):
            if entry.isdigit():
                comm = self.host.try_attr("/proc/%s/comm" % entry)
                if comm and comm.startswith(DEVICE_PLUGIN_COMMS):
                    found.add(comm)
        return sorted(found)

    def mtu(self, netdevs):
        return dict((ifname, self.reader.int(SYS_NET + "/" + ifname + "/mtu")) for ifname in netdevs)

    def rdma_cgroup(self):
        """``{cgroup: {device: {hca_handle, hca_object}}}`` from every ``rdma.max`` (cgroup v2, or the v1 rdma hierarchy)."""
        limits = {}
        if self.host.exists(CGROUP_ROOT + "/cgroup.controllers"):
            self._walk_v2(CGROUP_ROOT, "/", limits)
        elif self.host.isdir(CGROUP_ROOT + "/rdma"):
            self._walk_v1(CGROUP_ROOT + "/rdma", "/", limits)
        return limits

    def _walk_v2(self, path, name, limits):
        # A child cgroup has rdma.max only when its parent lists "rdma" in cgroup.subtree_control, so the walk
        # never enters the (large) parts of the tree where the controller is off.
        control = self.reader.attr(path + "/cgroup.subtree_control")
        if control is None or "rdma" not in control.split():
            return
        for entry in self.reader.listdir(path):
            child = path + "/" + entry
            if not self.host.isdir(child):
                continue
            child_name = posixpath.join(name, entry)
            self._read_rdma_max(child + "/rdma.max", child_name, limits)
            self._walk_v2(child, child_name, limits)

    def _walk_v1(self, path, name, limits):
        # cgroup v1: every cgroup of the rdma hierarchy has rdma.max (except the root)
        for entry in self.reader.listdir(path):
            child = path + "/" + entry
            if entry == "rdma.max":
                self._read_rdma_max(child, name, limits)
            elif entry not in _V1_FILES and not entry.startswith(("cgroup.", "rdma.")) and self.host.isdir(child):
                self._walk_v1(child, posixpath.join(name, entry), limits)

    def _read_rdma_max(self, path, name, limits):
        text = self.reader.text(path)
        if text is None:
            return
        try:
            limits[name] = parse_rdma_max(text)
        except ValueError as exc:
            self.reader.problem(path, str(exc))


def parse_rdma_max(text):
    """``mlx5_0 hca_handle=2 hca_object=max`` lines -> ``{"mlx5_0": {"hca_handle": 2, "hca_object": "max"}}``."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        limits = {}
        for field in fields[1:]:
            match = _RDMA_LIMIT_RE.match(field)
            if not match:
                raise ValueError("unexpected rdma.max field %r" % field)
            key, value = match.groups()
            if value == "max":
                limits[key] = "max"
            elif value.isdigit():
                limits[key] = int(value)
            else:
                raise ValueError("unexpected rdma.max value %r" % field)
        out[fields[0]] = limits
    return out


def discover(host, commands=None):
    """A discovery of the node behind ``host`` to hand to :func:`gather` and then to the rooms' observers that take
    one (``discovery=``), so they share what it read (:meth:`_Discovery.found`)."""
    return _Discovery(host, commands)


def gather(host, commands=None, discovery=None):
    """All ``ansible_facts.rdma`` facts of the node behind ``host`` (a :class:`HostRoot`), as plain data.
    ``commands`` (a HostCommands) lets it read the VF admin attributes with ``ip``; without it they are None.
    ``discovery`` (from :func:`discover`, made with the same ``commands``) is used instead of a new one."""
    disc = discovery if discovery is not None else _Discovery(host, commands)
    found = disc.found()
    devices, gpus, numa = found["devices"], found["gpus"], found["numa_nodes"]
    netdevs = []
    for device in devices:
        for ifname in device["netdevs"]:
            if ifname not in netdevs:
                netdevs.append(ifname)
    netdevs.sort(key=topo.natural_key)
    facts = {
        "devices": devices,
        "gpus": gpus,
        "gpu_nic_affinity": found["gpu_nic_affinity"],
        "numa_nodes": numa,
        "netns_mode": disc.netns_mode(),
        "kernel_cmdline": disc.kernel_cmdline(),
        "modules": disc.modules(),
        "sysctl": disc.sysctl(netdevs),
        "mtu": disc.mtu(netdevs),
        "rdma_cgroup": disc.rdma_cgroup(),
        "cpu_vendor": disc.cpu_vendor(),
        "device_plugins": disc.device_plugins(),
    }
    facts["problems"] = disc.reader.problems
    return facts
