# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SR-IOV VFs and their InfiniBand GUIDs on a node: the reads :mod:`.observe` makes, the writes :mod:`.apply` makes,
the restores - shared by the modules and the boot unit.  All node I/O goes through HostRoot/HostCommands.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import errno
import posixpath
import re
import threading
import time

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import rules as _sriov
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import check_name
from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import normalize_bdf

SYS_NET = "/sys/class/net"
SYS_IB = "/sys/class/infiniband"
SYS_PCI = "/sys/bus/pci/devices"
POLL = 0.1
#: what each errno of a sysfs write means here (domain-facts §2 "errors to map")
_ERRNO_HINTS = {
    errno.EBUSY: "VFs are already enabled (sriov_numvfs must go through 0)",
    errno.ERANGE: "more VFs than the firmware's NUM_OF_VFS (sriov_totalvfs)",
    errno.ENOENT: "no PF driver bound, or the driver cannot configure SR-IOV",
    errno.ENOSPC: "the PCI resources for the VFs (bus numbers, MMIO) are exhausted",
    errno.EIO: "the device or firmware failed the command",
    errno.EACCES: "the attribute is not writable here (read-only sysfs, not root?)",
    errno.ETIMEDOUT: "the driver or firmware did not answer in time",
    errno.ENODEV: "the device or driver is gone",
    errno.EINVAL: "the kernel rejected the value",
}


def describe_oserror(exc):
    """``"EBUSY (VFs are already enabled ...)"`` for an OSError from a write."""
    name = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else str(exc)
    hint = _ERRNO_HINTS.get(exc.errno)
    return "%s (%s)" % (name, hint) if hint else name


# -- the PF -----------------------------------------------------------------------------------------------------------
def pci_address_of(value):
    """The PCI address the option ``pci_address`` names (``18:00.0`` is ``0000:18:00.0``), None when it is none."""
    text = (value or "").strip().lower() if isinstance(value, str) else ""
    return normalize_bdf("0000:" + text if re.match(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", text) else text)


def resolve_pf(host, params):
    """The PF the options name (netdev, rdma_device or pci_address): ``{bdf, path, netdev, rdma, link_layer}``.
    InputError, naming the option, for an unknown device or a VF."""
    for option, base in (("netdev", SYS_NET), ("rdma_device", SYS_IB)):
        value = params.get(option)
        if value:
            check_name(option, value, "netdev" if option == "netdev" else "rdma")
            path = host.resolve("%s/%s/device" % (base, value))
            if path is None:
                raise InputError("%s: there is no %s %r on this node" % (
                    option, "network interface" if option == "netdev" else "RDMA device", value))
            bdf = normalize_bdf(posixpath.basename(path))
            if bdf is None:
                raise InputError("%s %r is not a PCI device (virtual interface?)" % (option, value))
            break
    else:
        option, value = "pci_address", params.get("pci_address")
        bdf = pci_address_of(value)
        if bdf is None:
            raise InputError("pci_address %r is not a PCI address such as 0000:18:00.0" % (value,))
        path = host.resolve("%s/%s" % (SYS_PCI, bdf))
        if path is None:
            raise InputError("pci_address: there is no PCI device %s on this node" % bdf)
    if host.exists(path + "/physfn"):
        raise InputError("%s %s is a VF (of PF %s); give its PF" % (option, value, host.link_name(path + "/physfn")))
    netdevs = host.listdir(path + "/net")
    rdma = host.listdir(path + "/infiniband")
    link_layer = None
    if rdma:
        link_layer = host.read_attr("%s/%s/ports/1/link_layer" % (SYS_IB, rdma[0]))
    elif netdevs:
        link_layer = "InfiniBand" if host.read_attr("%s/%s/type" % (SYS_NET, netdevs[0])) == "32" else "Ethernet"
    return {"pci_address": bdf, "path": path, "netdev": netdevs[0] if netdevs else None,
            "rdma_device": rdma[0] if rdma else None, "link_layer": link_layer, "selected_by": option}


def sysfs_guid(text):
    if not text:
        return None
    try:
        return int(text.replace(":", ""), 16)
    except ValueError:
        return None


def observe_vf(host, pf, index):
    """One VF from its ``virtfnN`` link: address, driver, netdevs, RDMA device and the GUIDs it shows now."""
    link = "%s/virtfn%d" % (pf["path"], index)
    target = host.readlink(link)
    if not target:
        return None
    # kernfs links are relative to the PF's directory (``../0000:18:00.1``): no realpath() stat per component
    path = host.follow(link, target)
    if path is None or not host.exists(path):
        return None
    vf = {"index": index, "pci_address": posixpath.basename(path), "driver": host.link_name(path + "/driver"),
          "netdevs": host.listdir(path + "/net"), "rdma_device": None, "node_guid": None, "port_guid": None,
          "path": path}
    rdma = host.listdir(path + "/infiniband")
    if rdma:
        vf["rdma_device"] = rdma[0]
        base = path + "/infiniband/" + rdma[0]
        vf["node_guid"] = sysfs_guid(host.read_attr(base + "/node_guid"))
        if host.read_attr(base + "/ports/1/link_layer") == "InfiniBand":
            gid = host.read_attr(base + "/ports/1/gids/0") or ""
            vf["port_guid"] = sysfs_guid(":".join(gid.split(":")[4:])) if gid.count(":") == 7 else None
    return vf


def observe(host, pf):
    """``{numvfs, totalvfs, autoprobe, vfs: [...]}`` of a PF from sysfs."""
    # a read error is never a count: EIO here fails the task naming the file, it is not "0 VFs"
    totalvfs = host.read_int_strict(pf["path"] + "/sriov_totalvfs")
    numvfs = host.read_int_strict(pf["path"] + "/sriov_numvfs", default=0) if totalvfs is not None else 0
    vfs = []
    for index in range(numvfs or 0):
        vf = observe_vf(host, pf, index)
        if vf is not None:
            vfs.append(vf)
    return {"numvfs": numvfs, "totalvfs": totalvfs, "vfs": vfs}


def in_use(host, pf, vfs):
    """``{index: reason}`` for VFs that look used: a user-space driver, a netdev that is up, or a netdev / RDMA device
    the PF has but the VF does not show (moved into a pod's network namespace)."""
    pf_driver = host.link_name(pf["path"] + "/driver")
    used = {}
    for vf in vfs:
        if vf["driver"] and vf["driver"] != pf_driver:
            used[vf["index"]] = "bound to %s" % vf["driver"]
        elif vf["driver"] and pf["netdev"] and not vf["netdevs"]:
            used[vf["index"]] = "its netdev is not in the host network namespace"
        elif vf["driver"] and pf["rdma_device"] and not vf["rdma_device"]:
            used[vf["index"]] = "its RDMA device is not in the host network namespace"
        else:
            for name in vf["netdevs"]:
                if host.try_attr("%s/%s/operstate" % (SYS_NET, name)) not in (None, "down"):
                    used[vf["index"]] = "netdev %s is up" % name
    return used


# -- commands ---------------------------------------------------------------------------------------------------------
def eswitch_mode(commands, bdf, link_layer=None):
    """The eswitch mode devlink reports, or None (no devlink, or no eswitch, as on InfiniBand ports).

    A PF whose ``link_layer`` is InfiniBand has no eswitch, so devlink is not asked (one process less per PF): mlx5
    refuses the query before anything else on a function whose port type is not Ethernet (``mlx5_eswitch_check``:
    EOPNOTSUPP; its RDMA port's link_layer is that port type), and the other InfiniBand drivers have no eswitch ops
    (devlink: EOPNOTSUPP).  devlink would fail, which is None here too."""
    if link_layer == "InfiniBand" or commands.module.get_bin_path("devlink") is None:
        return None
    rc, out, dummy_err = commands.run_kernel(["devlink", "-j", "dev", "eswitch", "show", "pci/" + bdf])
    if rc != 0:
        return None
    return _sriov.parse_eswitch(out)


def ip_vfs(commands, pf_netdev):
    """Admin VF attributes the PF driver holds (``ip -j link show``), ``{}`` without a PF netdev."""
    if not pf_netdev:
        return {}
    rc, out, err = commands.run_kernel(["ip", "-j", "link", "show", "dev", pf_netdev])
    if rc != 0:
        raise HostReadError("ip -j link show %s failed (rc=%s): %s" % (pf_netdev, rc, err.strip()))
    return _sriov.parse_ip_vfs(out)


def firmware_query(module, commands, bdf, num_vfs, mode, totalvfs=None):
    """What mstconfig/mlxconfig say of the PF's firmware (``mode``: auto, always, never), for :func:`plan.firmware`:
    None when not asked, else ``{tool, rc, out, err}`` (``tool`` None when neither is installed).

    ``auto`` does not ask the firmware when the kernel already shows enough VFs: ``sriov_totalvfs`` is the SR-IOV
    capability the firmware's Current ``SRIOV_EN``/``NUM_OF_VFS`` expose, so ``totalvfs >= num_vfs`` is the verdict
    the query would give (and a query costs about a second a device on real hardware, on every run)."""
    if not _sriov.firmware_query_needed(num_vfs, mode, totalvfs):
        return None
    tool = next((name for name in ("mstconfig", "mlxconfig") if module.get_bin_path(name)), None)
    if tool is None:
        return {"tool": None, "rc": None, "out": "", "err": ""}
    rc, out, err = commands.run_kernel([tool, "-e", "-d", bdf, "q"])
    return {"tool": tool, "rc": rc, "out": out, "err": err}


# -- writes -----------------------------------------------------------------------------------------------------------
def write_with_timeout(host, node_path, value, timeout):
    """``HostRoot.write_attr`` bounded by ``timeout`` s: a driver can block a sysfs write for minutes (the operator
    uses 2 min).  Raises the write's OSError, or ETIMEDOUT when it has not returned (it may still complete)."""
    box = {}

    def target():
        try:
            host.write_attr(node_path, value)
        except OSError as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name="sysfs-write")
    worker.daemon = True
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise OSError(errno.ETIMEDOUT, "write of %s to %s did not return within %ss" % (value, node_path, timeout))
    if "error" in box:
        raise box["error"]


def wait_for_vfs(host, pf, count, timeout, sleep=time.sleep, clock=time.monotonic):
    """Poll until ``count`` VFs have their virtfn link, a driver and - when the PF has them - a netdev and an RDMA
    device.  Returns the VFs; ApplyError listing what did not appear after ``timeout`` s."""
    deadline = clock() + timeout
    pf_driver = host.link_name(pf["path"] + "/driver")
    autoprobe = host.read_attr(pf["path"] + "/sriov_drivers_autoprobe", default="1") != "0"
    while True:
        missing = []
        vfs = []
        for index in range(count):
            vf = observe_vf(host, pf, index)
            if vf is None:
                missing.append("VF %d: no virtfn%d link" % (index, index))
                continue
            vfs.append(vf)
            if not autoprobe:
                continue
            if not vf["driver"]:
                missing.append("VF %d (%s): no driver bound" % (index, vf["pci_address"]))
            elif vf["driver"] == pf_driver:
                if pf["netdev"] and not vf["netdevs"]:
                    missing.append("VF %d (%s): no netdev" % (index, vf["pci_address"]))
                if pf["rdma_device"] and not vf["rdma_device"]:
                    missing.append("VF %d (%s): no RDMA device" % (index, vf["pci_address"]))
        if not missing:
            return vfs
        if clock() >= deadline:
            raise ApplyError("after %ss not every VF of %s appeared: %s" % (timeout, pf["pci_address"], "; ".join(missing)),
                             {"missing": missing})
        sleep(POLL)


def rebind(host, vf, timeout):
    """Unbind and bind a VF to its driver, so the driver re-reads its GUIDs.  Returns the driver name."""
    driver = vf["driver"]
    write_with_timeout(host, "/sys/bus/pci/drivers/%s/unbind" % driver, vf["pci_address"], timeout)
    try:
        write_with_timeout(host, "/sys/bus/pci/drivers/%s/bind" % driver, vf["pci_address"], timeout)
    except OSError as exc:
        bdf = vf["pci_address"]
        raise ApplyError("VF %s was unbound from %s but binding it again failed: %s; it is now without a driver "
                         "(echo %s > /sys/bus/pci/drivers/%s/bind)" % (bdf, driver, describe_oserror(exc), bdf, driver),
                         {"unbound": bdf}) from exc
    return driver


#: how long to wait for udev to rename a re-bound VF's netdev (sriov-network-operator's VFIsReady() polls 10 s)
RENAME_SETTLE = 10
#: include/uapi/linux/netdevice.h NET_NAME_RENAMED: the name was given by user space (udev), not the kernel
NET_NAME_RENAMED = "4"


def udev_named(host, names):
    """True when every netdev in ``names`` carries a name user space gave it (``name_assign_type`` 4): udev names
    this VF's netdevs, so after a re-bind - which removes the netdev and registers a new one under the kernel's
    lowest free ``ib%d``/``eth%d`` - a rename is still to come.  False for kernel names (1, or EINVAL for IPoIB's
    NET_NAME_UNKNOWN): nothing renames those, the new kernel name is final."""
    return bool(names) and all(host.try_attr("%s/%s/name_assign_type" % (SYS_NET, name)) == NET_NAME_RENAMED
                               for name in names)


def settle_vf_netdevs(host, pf, expect_udev, timeout, sleep=time.sleep, clock=time.monotonic):
    """After re-binding VFs: ``{index: [netdevs]}`` found again by PCI address (``virtfnN/net/*``), never by the name
    they had.  ``expect_udev`` is ``{index: bool}`` (their old names came from udev, see :func:`udev_named`); those
    are polled until udev has renamed the new netdev too, for at most ``timeout`` s.  Returns ``(names, pending)``
    where ``pending`` lists the VFs still carrying a kernel name when the time ran out."""
    deadline = clock() + timeout
    while True:
        names, pending = {}, []
        for index, want_udev in sorted(expect_udev.items()):
            vf = observe_vf(host, pf, index)
            names[index] = vf["netdevs"] if vf else []
            if want_udev and names[index] and not udev_named(host, names[index]):
                pending.append(index)
        if not pending or clock() >= deadline:
            return names, pending
        sleep(POLL)


def run_ip(commands, argv):
    rc, out, err = commands.run_kernel(argv)
    if rc != 0:
        raise ApplyError("%s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out).strip()), {"rc": rc, "stderr": err})


def set_guid(host, commands, pf, index, node_guid, port_guid, via, timeout):
    """Set a VF's node and port GUID in the PF driver: OFED sysfs ``sriov/<n>/{node,port}`` or netlink."""
    # (guid.py when writing only: rdma_facts reads through this module and needs it only for a pool file)
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid  # pylint: disable=import-outside-toplevel
    if via == "ofed_sysfs":
        base = "%s/sriov/%d/" % (pf["path"], index)
        for name, value in (("node", node_guid), ("port", port_guid)):
            try:
                write_with_timeout(host, base + name, _guid.format_guid(value) + "\n", timeout)
            except OSError as exc:
                raise ApplyError("writing %s%s failed: %s" % (base, name, describe_oserror(exc)),
                                 {"errno": exc.errno}) from exc
        return
    run_ip(commands, ["ip", "link", "set", pf["netdev"], "vf", str(index), "node_guid", _guid.format_guid(node_guid)])
    run_ip(commands, ["ip", "link", "set", pf["netdev"], "vf", str(index), "port_guid", _guid.format_guid(port_guid)])


# -- restore ---------------------------------------------------------------------------------------------------------
def restore(host, commands, pf, before, timeout, wait=wait_for_vfs):
    """Put a PF back to ``before`` (count, admin attributes, GUIDs) after a failed change.  Returns a sentence saying
    what state the PF is in now; never raises."""
    want = before["numvfs"] or 0
    try:
        now = host.read_int_strict(pf["path"] + "/sriov_numvfs", default=0)
        if now != want:
            if now:
                write_with_timeout(host, pf["path"] + "/sriov_numvfs", "0", timeout)
            if want:
                write_with_timeout(host, pf["path"] + "/sriov_numvfs", str(want), timeout)
                wait(host, pf, want, timeout)
        vfs = dict((vf["index"], vf) for vf in observe(host, pf)["vfs"])
        current = ip_vfs(commands, pf["netdev"]) if pf["netdev"] else {}
        for index, admin in sorted(before["admin"].items()):
            if index not in vfs:
                continue
            attrs = dict((key, admin[key]) for key in _sriov.VF_ATTRS if admin.get(key) is not None
                         and (pf["link_layer"] != "InfiniBand" or key not in _sriov.ETH_ONLY))
            change = dict(_sriov.plan_vf_attrs({index: attrs}, current)).get(index)
            if change:
                run_ip(commands, _sriov.ip_vf_argv(pf["netdev"], index, change))
            node, port = admin.get("node_guid"), admin.get("port_guid")
            have = current.get(index, {})
            if pf["link_layer"] == "InfiniBand" and (node or port) and (have.get("node_guid"), have.get("port_guid")) != (node, port):
                set_guid(host, commands, pf, index, node or 0, port or 0, guid_path(host, pf), timeout)
                if vfs[index]["driver"]:
                    rebind(host, vfs[index], timeout)
        return "restored: %d VFs with their previous settings and GUIDs" % want
    except (OSError, ApplyError, HostReadError) as exc:
        detail = describe_oserror(exc) if isinstance(exc, OSError) else exc.msg
        now = host.try_attr(pf["path"] + "/sriov_numvfs", default="unknown")
        return ("NOT restored (%s): sriov_numvfs of %s now reads %s (it was %d); VF settings and GUIDs may be missing"
                % (detail, pf["pci_address"], now, want))


def guid_path(host, pf):
    """``ofed_sysfs`` when MLNX/DOCA OFED provides ``sriov/<n>/node`` for this PF, else ``netlink``."""
    return "ofed_sysfs" if host.exists(pf["path"] + "/sriov/0/node") else "netlink"


# -- ib_vf_guids --------------------------------------------------------------------------------------------------------
def ip_links_vfs(commands):
    """``{netdev: {index: attrs}}`` of every link that reports VFs, from one ``ip -j link show`` dump."""
    rc, out, err = commands.run_kernel(["ip", "-j", "link", "show"])
    if rc != 0:
        raise HostReadError("ip -j link show failed (rc=%s): %s" % (rc, err.strip()))
    return _sriov.parse_ip_links_vfs(out)


def admin_guids(host, commands, pf, count, via, links=None):
    """``{index: {admin_node, admin_port}}`` from the OFED sysfs (when used) or netlink (``links``: a dump already
    made, see :func:`ip_links_vfs`)."""
    out = {}
    if via == "ofed_sysfs":
        for index in range(count):
            base = "%s/sriov/%d/" % (pf["path"], index)
            out[index] = {"admin_node": sysfs_guid(host.read_attr(base + "node")),
                          "admin_port": sysfs_guid(host.read_attr(base + "port"))}
        return out
    vfs = links.get(pf["netdev"], {}) if links is not None else ip_vfs(commands, pf["netdev"])
    for index, attrs in vfs.items():
        out[index] = {"admin_node": attrs["node_guid"], "admin_port": attrs["port_guid"]}
    return out


def host_guids(host, commands, skip_pci, own_vfs=None, links=None):
    """``{guid: where}`` for GUIDs in use on this node outside the PF ``skip_pci``: every RDMA device's node GUID and
    the admin GUIDs of other InfiniBand PFs' VFs.  ``own_vfs``: the PF's VFs as :func:`observe` found them (then the
    PF's own RDMA devices are known by name), else each device's ``device`` and ``physfn`` links tell.

    Cheap on purpose (it runs on every call, also when nothing is to change): no path is resolved, and the admin GUIDs
    of every other PF come from one ``ip -j link show`` (a dump has every link's VF list) instead of one ``ip`` per
    PF; ``links``: that dump when the caller has made it already."""
    skip = set([skip_pci]) | set(vf["pci_address"] for vf in own_vfs or ())
    own_names = None
    if own_vfs is not None:
        own_names = set(vf["rdma_device"] for vf in own_vfs if vf["rdma_device"])
        own_names.update(host.listdir("%s/%s/infiniband" % (SYS_PCI, skip_pci)))
    taken = {}
    for name in host.listdir(SYS_IB):
        if own_names is not None:
            if name in own_names:
                continue
        else:
            if skip_pci in (host.link_name("%s/%s/device" % (SYS_IB, name)),
                            host.link_name("%s/%s/device/physfn" % (SYS_IB, name))):
                continue
        guid = sysfs_guid(host.try_attr("%s/%s/node_guid" % (SYS_IB, name)))
        if guid:
            taken.setdefault(guid, "%s (node GUID)" % name)
    if commands.module.get_bin_path("ip") is None:
        others = [name for name in host.listdir(SYS_NET)
                  if host.link_name("%s/%s/device" % (SYS_NET, name)) not in skip | set([None])
                  and host.read_int("%s/%s/device/sriov_numvfs" % (SYS_NET, name))
                  and host.read_attr("%s/%s/type" % (SYS_NET, name)) == "32"]
        if others:
            raise HostReadError("ip is not installed: the VF GUIDs of %s cannot be read" % ", ".join(others))
        return taken
    for name, vfs in sorted((ip_links_vfs(commands) if links is None else links).items()):
        # the links reporting VFs: InfiniBand (type 32) netdevs of another PCI device (IPoIB child interfaces of
        # this PF report its VFs too, and are skipped by their device)
        if host.link_name("%s/%s/device" % (SYS_NET, name)) in skip \
                or host.read_attr("%s/%s/type" % (SYS_NET, name)) != "32":
            continue
        for index, attrs in sorted(vfs.items()):
            for key in ("node_guid", "port_guid"):
                if attrs.get(key):
                    taken.setdefault(attrs[key], "VF %d of %s" % (index, name))
    return taken


def detect_sriov_operator(host):
    """sriov-network-operator's traces on the node (:func:`_sriov.operator_presence`)."""
    existing = [path for path in _sriov.OPERATOR_UNITS + (_sriov.OPERATOR_BINARY, _sriov.OPERATOR_MODPROBE)
                if host.stat(path, follow=False) is not None]
    running = False
    for entry in host.listdir("/proc"):
        if entry.isdigit() and entry.isascii() and host.try_attr("/proc/%s/comm" % entry) == _sriov.OPERATOR_COMM:
            running = True
            break
    return _sriov.operator_presence(existing, host.listdir(_sriov.OPERATOR_DIR), running)


def node_links(host):
    """``[(netdev, hardware address, PCI address or None)]`` of every network interface, in ifindex order (the
    order the operator's netlink LinkList() gives), for resolving a pool file's ``pfGuid`` entries."""
    out = []
    for name in host.listdir(SYS_NET):
        base = "%s/%s" % (SYS_NET, name)
        index = host.read_int(base + "/ifindex", default=None)
        device = host.readlink(base + "/device")
        pci = posixpath.basename(device.rstrip("/")) if device and re.match(
            r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$", posixpath.basename(device.rstrip("/"))) else None
        out.append((index if index is not None else 1 << 31, name, host.try_attr(base + "/address", ""), pci))
    return [(name, address, pci) for dummy, name, address, pci in sorted(out)]


def pool_ib_pfs(host, skip):
    """PCI addresses of the node's InfiniBand PFs that can have VFs (sriov_totalvfs > 0), other than ``skip`` (None:
    all of them)."""
    found = []
    for device in host.listdir(SYS_IB):
        pci = host.link_name("%s/%s/device" % (SYS_IB, device))
        if pci and pci != skip and pci not in found and (host.read_int("%s/%s/sriov_totalvfs" % (SYS_PCI, pci),
                                                                       default=0) or 0) > 0:
            if any(host.read_attr("%s/%s/ports/%s/link_layer" % (SYS_IB, device, port)) == "InfiniBand"
                   for port in host.listdir("%s/%s/ports" % (SYS_IB, device))):
                found.append(pci)
    return sorted(found)


def udev_expected(host, vf_by_index, rebind_actions):
    """``{index: bool}``: will udev rename the netdev a re-bind of this VF creates?  (see :func:`udev_named`)"""
    if not rebind_actions:
        return {}
    # read before any re-bind (the old names are gone, or another netdev's, afterwards); a VF that had no netdev
    # (it was unbound) is expected to be renamed when its siblings' names are udev's
    named = dict((vf["index"], udev_named(host, vf["netdevs"])) for vf in vf_by_index.values() if vf["netdevs"])
    siblings = any(named.values())
    return dict((index, named.get(index, siblings)) for index in rebind_actions)


def report_renames(module, host, pf, vf_by_index, rebind_actions, expect, result, timeout):
    """A re-bind unregisters the VF's netdev and registers a new one, which the kernel names ``ib%d``/``eth%d`` and
    udev may rename: find each re-bound VF's netdevs again by PCI address and report old -> new on its action and in
    ``netdev_renames``.  Waits (at most RENAME_SETTLE s) for udev where ``expect`` says udev names them."""
    if not rebind_actions:
        return
    names, pending = settle_vf_netdevs(host, pf, expect, min(timeout, RENAME_SETTLE))
    renames = []
    for index, step in sorted(rebind_actions.items()):
        old, new = vf_by_index[index]["netdevs"], names.get(index, [])
        step.update(vf=index, netdevs=old, netdevs_after=new)
        if old != new:
            renames.append({"vf": index, "pci_address": vf_by_index[index]["pci_address"], "old": old, "new": new})
    if pending:
        module.warn("udev has not renamed the new netdev of VF %s within %ss (still %s); names reported as found" % (
            ", ".join(str(i) for i in pending), min(timeout, RENAME_SETTLE),
            ", ".join("/".join(names[i]) for i in pending)))
    result.extra["netdev_renames"] = renames


def restore_guids(host, commands, pf, touched, admin, vf_by_index, via, timeout):
    """Put back the GUIDs of the VFs already changed (and re-bind them); a sentence saying what state they are in."""
    failed = []
    for index in touched:
        old = admin.get(index, {})
        try:
            set_guid(host, commands, pf, index, old.get("admin_node") or 0, old.get("admin_port") or 0, via, timeout)
            vf = vf_by_index.get(index)
            if vf and vf["driver"] and host.link_name(vf["path"] + "/driver") == vf["driver"]:
                rebind(host, vf, timeout)
            elif vf and vf["driver"]:
                write_with_timeout(host, "/sys/bus/pci/drivers/%s/bind" % vf["driver"], vf["pci_address"], timeout)
        except (OSError, ApplyError) as exc:
            failed.append("VF %d (%s)" % (index, describe_oserror(exc) if isinstance(exc, OSError) else exc.msg))
    if not touched:
        return "no GUID had been changed yet"
    if failed:
        return "previous GUIDs NOT restored for %s" % "; ".join(failed)
    return "previous GUIDs restored on VF %s" % ", ".join(str(i) for i in touched)
