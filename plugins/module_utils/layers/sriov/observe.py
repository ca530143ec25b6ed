# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sriov`` layer's observer: node -> everything the planners of sriov_vfs and ib_vf_guids read
(:func:`collect`, the one reader; the node reads themselves are :mod:`.host`'s).

It reads only what the options need (no firmware query when the kernel already shows enough VFs, no pool file
unless one is read or written, nothing past a switchdev eswitch), in the order the modules read before the room.
A read that fails raises (HostReadError, InputError for a PF the options do not find); a read whose failure is the
planner's to report (``ip -j link show`` of the PF, the firmware query) is kept as what it returned.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import observe_file
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as _host

KINDS = ("sriov_vfs", "ib_vf_guids")


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
    observed = {"pf": pf, "eswitch_mode": _host.eswitch_mode(commands, pf["pci_address"])}
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
