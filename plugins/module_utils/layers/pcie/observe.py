# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``pcie`` layer's observer: written once, used by the module and by ``rdma_facts`` (``layers.pcie``).

Reads each RDMA NIC's physical function's ``config`` (the kernel's pci_read_config: any offset and size, the whole
space for root) and the boot unit the layer installs.  Virtual functions are left out: a VF's Max_Read_Request_Size
field is reserved (RsvdP) by the SR-IOV specification and the PF's setting applies.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import posixpath
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import TOOL_DIRS
from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import normalize_bdf
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import config

IB_CLASS = "/sys/class/infiniband"
PCI_DEVICES = "/sys/bus/pci/devices"
UNIT = "/etc/systemd/system/rdma-k8s-node-pcie.service"
_EXEC = re.compile(r"^ExecStart=\S*setpci -s ([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) CAP_EXP\+8\.w=([0-9a-f]{4}):7000$")


# a PCI address without its domain (18:00.0), as sriov_vfs, pcie_tuning and irq_affinity also take it
_SHORT_BDF = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def resolve_devices(names, pfs):
    """PCI addresses of ``names`` (addresses, short ones included, or RDMA device names) among ``pfs``
    ({address: [rdma names]}), as the modules that take a ``devices`` list resolve it; InputError names the one that
    is neither."""
    by_name = dict((rdma, bdf) for bdf, rdmas in pfs.items() for rdma in rdmas)
    found = []
    for name in names:
        text = name.strip().lower()
        bdf = normalize_bdf("0000:" + text if _SHORT_BDF.match(text) else text)
        if bdf is not None:
            if bdf not in pfs:
                raise InputError("devices: %s is not the physical function of an RDMA NIC on this node (known: %s)"
                                 % (name, ", ".join(pfs) or "none"))
        elif name in by_name:
            bdf = by_name[name]
        else:
            raise InputError("devices: %r is neither a PCI address nor an RDMA device of this node (known: %s)"
                             % (name, ", ".join(sorted(by_name)) or "none"))
        if bdf not in found:
            found.append(bdf)
    return found


def audited_devices(names, devices):
    """The PCI addresses an audit judges for the role's ``devices`` list ``names``, resolved as the module resolves
    them among the facts' ``devices`` ({address: {"rdma_devices": [...]}}); a name that resolves to no RDMA NIC here
    stays as given, for the judgement to report."""
    pfs = dict((bdf, (item or {}).get("rdma_devices") or []) for bdf, item in devices.items())
    found = []
    for name in names:
        try:
            bdf = resolve_devices([str(name)], pfs)[0]
        except InputError:
            bdf = name
        if bdf not in found:
            found.append(bdf)
    return found


def rdma_pfs(host):
    """``{pci address: [rdma device names]}`` of the RDMA devices' physical functions, sorted by address."""
    found = {}
    for name in host.listdir(IB_CLASS):
        # follow the class link first: the device link is relative to where the class link points
        device = host.follow(host.follow(IB_CLASS + "/" + name) + "/device")
        bdf = normalize_bdf(posixpath.basename(device))
        if bdf is None or host.readlink(device + "/physfn") is not None:
            continue
        found.setdefault(bdf, []).append(name)
    return dict((bdf, sorted(found[bdf])) for bdf in sorted(found))


def read_live(host, bdf):
    """``{"max_read_request", "devctl", "cap"}`` of one function; ``{"error": ...}`` when it cannot be read."""
    try:
        data = host.read_bytes(PCI_DEVICES + "/" + bdf + "/config")
        if data is None:
            return {"error": "no configuration space (%s/%s/config is missing)" % (PCI_DEVICES, bdf)}
        found = config.read_request(data)
    except (HostReadError, ParseError) as exc:
        return {"error": exc.msg}
    if found is None:
        return {"error": "not a PCI Express function (no PCI Express capability)"}
    cap, devctl, size = found
    return {"max_read_request": size, "devctl": "0x%04x" % devctl, "cap": "0x%02x" % cap}


def unit_values(text):
    """``{pci address: size}`` of the setpci lines of our boot unit (what the next boot sets)."""
    values = {}
    for line in (text or "").splitlines():
        match = _EXEC.match(line.strip())
        if match:
            field = (int(match.group(2), 16) & config.READRQ_MASK) >> config.READRQ_SHIFT
            if field < len(config.SIZES):
                values[match.group(1)] = config.SIZES[field]
    return values


def find_setpci(host):
    """setpci's path on the node, or None (the boot unit needs it; pciutils)."""
    for directory in TOOL_DIRS:
        if host.is_executable(directory + "/setpci"):
            return directory + "/setpci"
    return None


def observe(host, unit=UNIT, devices=None):
    """The layer's observed state: ``{"devices": {bdf: {rdma_devices, max_read_request | error ...}},
    "unit": {"path", "exists", "values"}, "setpci"}``; ``devices`` limits it to those PCI addresses."""
    pfs = rdma_pfs(host)
    wanted = sorted(devices) if devices is not None else list(pfs)
    observed = {}
    for bdf in wanted:
        item = {"rdma_devices": pfs.get(bdf, [])}
        item.update(read_live(host, bdf))
        observed[bdf] = item
    try:
        text = host.read_text(unit)
    except HostReadError as exc:
        return {"devices": observed, "unit": {"path": unit, "exists": None, "values": {}, "error": exc.msg},
                "setpci": find_setpci(host)}
    return {"devices": observed, "unit": {"path": unit, "exists": text is not None, "values": unit_values(text),
                                          "text": text}, "setpci": find_setpci(host)}


def facts(host):
    """``rdma_facts``' ``layers.pcie``: every RDMA PF and the boot unit, as :func:`observe` sees them."""
    return observe(host)
