# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sriov`` layer's observer: node -> everything the planners of sriov_vfs and ib_vf_guids read
(:func:`collect`, the one reader; the node reads themselves are :mod:`.host`'s).

It reads only what the options need (no firmware query when the kernel already shows enough VFs, no pool file
unless one is read or written, nothing past a switchdev eswitch), in the order the modules read before the room.
A read that fails raises (HostReadError, InputError for a PF the options do not find); a read whose failure is the
planner's to report (``ip -j link show`` of the PF, the firmware query) is kept as what it returned.

:func:`facts` is ``rdma_facts``' ``layers.sriov``: every PF of the node read once with the same readers, without
module options, as plain data (the audit's ``sriov`` judgement, layers/sriov/judge.py, runs the planners on it).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import observe_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import normalize_bdf
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as _host, rules as _sriov

KINDS = ("sriov_vfs", "ib_vf_guids")
#: the sriov role's boot-unit state file (its default ``sriov_state_file``)
STATE_FILE = "/etc/rdma-k8s-node/sriov.json"
#: the pool file the facts read (ib_vf_guids' default ``pool_file``, the role's ``sriov_guid_pool_file``)
POOL_FILE = _sriov.OPERATOR_POOL_FILE
#: the VF admin attributes sriov_vfs sets, as ``ip link show <pf>`` reports them
VF_ATTR_KEYS = ("link_state", "trust", "spoofchk", "vlan", "qos", "mac")


def collect(host, commands, kind, params):
    """``kind`` (``sriov_vfs`` or ``ib_vf_guids``) and its module's parameters -> the observed dict its planner
    (:func:`plan.plan_vfs` / :func:`plan.plan_guids`) reads."""
    if kind == "sriov_vfs":
        return collect_vfs(host, commands, params)
    if kind == "ib_vf_guids":
        return collect_guids(host, commands, params)
    raise ValueError("kind must be one of %s, got %r" % (", ".join(KINDS), kind))


def _pf_driver(host, pf):
    return {"driver": host.link_name(pf["path"] + "/driver"),
            "autoprobe": host.read_attr(pf["path"] + "/sriov_drivers_autoprobe", default="1") != "0"}


def collect_vfs(host, commands, params):
    """sriov_vfs: the PF, its eswitch mode, VF count and VFs, the firmware (when asked), the VFs in use and the
    admin VF attributes the PF driver holds (or the error reading them)."""
    pf = _host.resolve_pf(host, params)
    observed = {"pf": pf, "eswitch_mode": _host.eswitch_mode(commands, pf["pci_address"], pf["link_layer"])}
    if observed["eswitch_mode"] == "switchdev":
        return observed
    state = _host.observe(host, pf)
    observed["state"] = state
    observed["firmware"] = _host.firmware_query(commands.module, commands, pf["pci_address"], params["num_vfs"],
                                                params["firmware_check"], state["totalvfs"])
    observed["in_use"] = _host.in_use(host, pf, state["vfs"])
    observed["admin"], observed["admin_error"] = {}, None
    if state["numvfs"]:
        try:
            observed["admin"] = _host.ip_vfs(commands, pf["netdev"])
        except HostReadError as exc:
            observed["admin_error"] = exc
    return observed


def collect_guids(host, commands, params):
    """ib_vf_guids: the PF; for an InfiniBand PF with its RDMA device also sriov-network-operator's traces, the PF's
    GUID, its VFs, the admin GUIDs, the GUIDs taken elsewhere on the node, the VFs in use, the pool file (read when
    the scheme reads it or it is written) and the node's links."""
    pf = _host.resolve_pf(host, params)
    observed = {"pf": pf}
    if pf["link_layer"] != "InfiniBand" or not pf["rdma_device"]:
        return observed
    operator = _host.detect_sriov_operator(host)
    observed["operator"] = operator
    export = params["export_pool_file"]
    if export is None:
        export = operator["present"] and params["scheme"] != "pool_file"
    observed["pf_guid"] = _host.sysfs_guid(host.read_attr("%s/%s/node_guid" % (_host.SYS_IB, pf["rdma_device"])))
    state = _host.observe(host, pf)
    observed["state"] = state
    count = state["numvfs"] or 0
    observed["links"] = _host.node_links(host) if params["scheme"] == "pool_file" or export else None
    observed["pool_text"] = host.read_bytes(params["pool_file"]) if params["scheme"] == "pool_file" else None
    via = _host.guid_path(host, pf) if count else "netlink"
    observed["via"] = via
    ip_links = (_host.ip_links_vfs(commands) if count and via == "netlink" and commands.module.get_bin_path("ip")
                else None)
    observed["admin"] = _host.admin_guids(host, commands, pf, count, via, ip_links) if count else {}
    observed["taken"] = _host.host_guids(host, commands, pf["pci_address"], state["vfs"], ip_links)
    observed["in_use"] = _host.in_use(host, pf, state["vfs"])
    observed.update(_pf_driver(host, pf))
    observed["pool_file"] = None
    if export:
        existing = observe_file(host, params["pool_file"])
        observed["pool_file"] = {"state": existing,
                                 "text": host.read_bytes(params["pool_file"]) if existing.exists else None,
                                 "other_ib_pfs": None if existing.exists else _host.pool_ib_pfs(host, pf["pci_address"])}
    return observed


# -- rdma_facts: layers.sriov ------------------------------------------------------------------------------------------
def node_pfs(host):
    """The PCI addresses of the node's physical functions behind a network interface or an RDMA device (VFs and
    devices that are not PCI functions left out), sorted."""
    found = set()
    for base in (_host.SYS_NET, _host.SYS_IB):
        for name in host.listdir(base):
            bdf = normalize_bdf(host.link_name("%s/%s/device" % (base, name)) or "")
            if bdf is not None and not host.exists("%s/%s/device/physfn" % (base, name)):
                found.add(bdf)
    return sorted(found)


def sysfs_spelling(value):
    """A GUID as sysfs and rdma_facts' ``devices`` spell it (``0002:c903:00f9:bfa1``), None for None."""
    if value is None:
        return None
    raw = "%016x" % value
    return ":".join(raw[i:i + 4] for i in range(0, 16, 4))


def pairs(mapping):
    """``{int: value}`` as ``[[int, value]]`` (JSON keeps no integer keys); :func:`unpairs` reads it back."""
    return [[key, value] for key, value in sorted(mapping.items())]


def unpairs(items):
    return dict((key, value) for key, value in items or [])


def file_facts(state):
    """A FileState as plain data (content included)."""
    return {"path": state.path, "exists": state.exists, "content": state.content, "mode": state.mode,
            "uid": state.uid, "gid": state.gid, "link": state.link}


def _pf_facts(host, commands, bdf, cache):
    """What both planners read of one PF (:func:`collect_vfs` and :func:`collect_guids` without options)."""
    pf = _host.resolve_pf(host, {"pci_address": bdf})
    pf.pop("selected_by")
    out = {"pf": pf, "netdevs": host.listdir(pf["path"] + "/net"),
           "rdma_devices": host.listdir(pf["path"] + "/infiniband"),
           "eswitch_mode": _host.eswitch_mode(commands, bdf, pf["link_layer"]) if commands is not None else None,
           "guids": None}
    if out["eswitch_mode"] == "switchdev":
        return out
    state = _host.observe(host, pf)
    out["state"] = state
    out["in_use"] = pairs(_host.in_use(host, pf, state["vfs"]))
    out["admin"], out["admin_error"] = [], None
    if commands is None:
        return out
    if state["numvfs"]:
        try:
            out["admin"] = pairs(_host.ip_vfs(commands, pf["netdev"]))
        except RdmaNodeError as exc:
            out["admin_error"] = exc.msg
    if pf["link_layer"] == "InfiniBand" and pf["rdma_device"]:
        try:
            out["guids"] = _guid_facts(host, commands, pf, state, cache)
        except RdmaNodeError as exc:
            out["guids"] = {"error": exc.msg}
    return out


def _guid_facts(host, commands, pf, state, cache):
    """ib_vf_guids' reads of an InfiniBand PF (:func:`collect_guids`); ``cache``: the node's ``ip -j link show`` and
    its InfiniBand PFs that can have VFs, read once a run."""
    count = state["numvfs"] or 0
    via = _host.guid_path(host, pf) if count else "netlink"
    if "links" not in cache:
        cache["links"] = _host.ip_links_vfs(commands) if commands.module.get_bin_path("ip") else None
    ip_links = cache["links"] if count and via == "netlink" else None
    out = {"pf_guid": _host.sysfs_guid(host.read_attr("%s/%s/node_guid" % (_host.SYS_IB, pf["rdma_device"]))),
           "via": via,
           "admin": pairs(_host.admin_guids(host, commands, pf, count, via, ip_links)) if count else [],
           "taken": sorted([guid, where] for guid, where in _host.host_guids(host, commands, pf["pci_address"],
                                                                             state["vfs"], cache["links"]).items()),
           "other_ib_pfs": _other_ib_pfs(host, pf["pci_address"], cache)}
    out.update(_pf_driver(host, pf))
    return out


def _other_ib_pfs(host, bdf, cache):
    """:func:`host.pool_ib_pfs` for the PF ``bdf``: the node's InfiniBand PFs that can have VFs are read once a run
    (``cache["ib_pfs"]``, kept only when read), and each PF's are the others."""
    if "ib_pfs" not in cache:
        cache["ib_pfs"] = _host.pool_ib_pfs(host, None)
    return [pci for pci in cache["ib_pfs"] if pci != bdf]


def _report(entry):
    """A PF as the audit's ``sriov.num_vfs``, ``vf_attrs`` and ``vf_guids`` read it: rdma_facts' ``devices`` entry
    (name, PCI address, netdevs, link layer, VF count, VFs with their GUIDs and admin attributes)."""
    pf, state = entry["pf"], entry.get("state")
    admin = unpairs(entry.get("admin"))
    vfs = []
    for vf in (state or {}).get("vfs") or []:
        row = {"index": vf["index"], "pci_address": vf["pci_address"], "driver": vf["driver"],
               "name": vf["rdma_device"], "node_guid": sysfs_spelling(vf["node_guid"]),
               "port_guid": sysfs_spelling(vf["port_guid"])}
        row.update((key, (admin.get(vf["index"]) or {}).get(key)) for key in VF_ATTR_KEYS)
        vfs.append(row)
    return {"name": pf["rdma_device"], "pci_address": pf["pci_address"], "netdevs": entry["netdevs"],
            "rdma_devices": entry["rdma_devices"], "link_layer": pf["link_layer"], "eswitch_mode": entry["eswitch_mode"],
            "numvfs": state["numvfs"] if state and state["totalvfs"] is not None else None,
            "totalvfs": state["totalvfs"] if state else None, "vfs": vfs}


def state_file_pfs(data):
    """The PFs and VF counts of the sriov role's boot-unit state file (the ``sriov_vfs`` calls it repeats at boot):
    ``{pfs: [{netdev, rdma_device, pci_address, num_vfs}], guid_pfs: [PCI addresses]}``; ValueError when ``data``
    is not such a file."""
    if not isinstance(data, dict) or not isinstance(data.get("sriov_vfs"), list):
        raise ValueError("not an rdma.k8s_node sriov state file (no sriov_vfs list)")
    pfs = []
    for entry in data["sriov_vfs"]:
        if not isinstance(entry, dict):
            raise ValueError("sriov_vfs entries must be objects")
        pfs.append(dict((key, entry.get(key)) for key in ("netdev", "rdma_device", "pci_address", "num_vfs")))
    guids = data.get("ib_vf_guids") or []
    if not isinstance(guids, list):
        raise ValueError("ib_vf_guids must be a list")
    guid_pfs = sorted((e.get("pci_address") for e in guids if isinstance(e, dict)), key=lambda a: (a is None, str(a)))
    return {"pfs": pfs, "guid_pfs": guid_pfs}


def _persisted(host, problems):
    try:
        text = host.read_text(STATE_FILE)
    except RdmaNodeError as exc:
        problems.append({"path": STATE_FILE, "error": exc.msg})
        return None
    if text is None:
        return None
    try:
        return dict(state_file_pfs(json.loads(text)), state_file=STATE_FILE)
    except (ValueError, RecursionError, TypeError, AttributeError) as exc:
        problems.append({"path": STATE_FILE, "error": str(exc)})
        return None


def _pool_facts(host):
    try:
        state = observe_file(host, POOL_FILE)
        data = host.read_bytes(POOL_FILE) if state.exists else None
    except RdmaNodeError as exc:
        return {"path": POOL_FILE, "error": exc.msg}
    if data is None:
        return {"path": POOL_FILE, "state": file_facts(state), "text": None}
    # guid.py (the pool file's format, the GUID scheme) only for a node that has the file
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid  # pylint: disable=import-outside-toplevel
    return {"path": POOL_FILE, "state": file_facts(state), "text": guid.go_text(data)}


def facts(host, commands=None):
    """``rdma_facts``' ``layers.sriov``: ``{pfs, persisted, observed, problems}``.

    ``pfs``: each PF (:func:`node_pfs`) as the audit's per-PF checks read it (:func:`_report`); ``persisted``: the
    boot unit's state file (:func:`state_file_pfs`, None without one); ``observed``: what the planners of sriov_vfs
    and ib_vf_guids read, without their options: ``{pfs: {PCI address: {pf, netdevs, rdma_devices, eswitch_mode,
    state, in_use, admin, admin_error, guids}}, operator, links, pool_file}`` (the node-wide parts only with an
    InfiniBand PF; the pool file at ib_vf_guids' default path; no firmware query, which costs about a second a
    device: the judgement says when the plan needs it).  A PF that could not be read is ``{error}`` and a problem.
    Without ``commands`` (no node tools: no eswitch mode, VF attributes or GUIDs set) ``observed`` is None."""
    problems, observed, report, cache = [], {}, [], {}
    for bdf in node_pfs(host):
        try:
            entry = _pf_facts(host, commands, bdf, cache)
        except RdmaNodeError as exc:
            observed[bdf] = {"error": exc.msg}
            problems.append({"path": "%s/%s" % (_host.SYS_PCI, bdf), "error": exc.msg})
            continue
        observed[bdf] = entry
        report.append(_report(entry))
        for what in ("admin_error",):
            if entry.get(what):
                problems.append({"path": "ip -j link show dev %s" % entry["pf"]["netdev"], "error": entry[what]})
        if (entry["guids"] or {}).get("error"):
            problems.append({"path": "%s (VF GUIDs)" % bdf, "error": entry["guids"]["error"]})
    out = {"pfs": report, "persisted": _persisted(host, problems),
           "observed": {"pfs": observed, "operator": None, "links": None, "pool_file": None}, "problems": problems}
    if commands is None:
        out["observed"] = None
    elif any(entry.get("guids") is not None for entry in observed.values()):
        out["observed"].update(operator=_host.detect_sriov_operator(host),
                               links=[list(link) for link in _host.node_links(host)], pool_file=_pool_facts(host))
    return out
