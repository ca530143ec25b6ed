# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pre-flight of ``provision.yml``: a desired state whose layers contradict each other, found before any node is
touched.  Pure: one host's variables (its inventory, extra vars, the roles' defaults) -> the contradictions.

Each rule names the variables to change.  ``rdma_k8s_node_preflight_ignore`` (a list of rule names) turns a rule off
for a host whose operator knows better; the rule is then a warning, not a refusal.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

from ansible.module_utils.common.validation import check_type_bool

#: the names ``rdma_k8s_node_device_plugin`` takes: which Kubernetes RDMA device plugin the node's pods use
DEVICE_PLUGINS = ("shared", "sriov", "none")


def _bool(value, default=False):
    if value is None:
        return default
    try:
        return check_type_bool(value)
    except TypeError:
        return default


def _vfs(desired):
    pfs = desired.get("sriov_pfs") or []
    if not isinstance(pfs, list):
        return []
    return [pf for pf in pfs if isinstance(pf, Mapping) and isinstance(pf.get("num_vfs"), int) and pf["num_vfs"] > 0]


def _name(pf):
    for key in ("netdev", "rdma_device", "pci_address"):
        if pf.get(key):
            return str(pf[key])
    return "?"


def rules(desired):
    """``[(rule, message)]`` of every contradiction in one host's desired state (the ignore list not applied)."""
    found = []
    mode = desired.get("rdma_netns_mode") or "shared"
    plugin = desired.get("rdma_k8s_node_device_plugin")
    vfs = _vfs(desired)
    if plugin is not None and plugin not in DEVICE_PLUGINS:
        found.append(("device_plugin", "rdma_k8s_node_device_plugin must be one of %s, got %r"
                      % (", ".join(DEVICE_PLUGINS), plugin)))
    if vfs and mode == "shared" and plugin != "shared":
        found.append(("sriov_needs_exclusive", (
            "sriov_pfs creates VFs for pods (%s) but rdma_netns_mode is shared: the RDMA CNI gives a pod its VF's RDMA "
            "device only in exclusive mode (in shared mode every pod sees every RDMA device). Set "
            "rdma_netns_mode: exclusive, or rdma_k8s_node_device_plugin: shared if pods use the VFs through the shared "
            "device plugin" % ", ".join("%s: %d VFs" % (_name(pf), pf["num_vfs"]) for pf in vfs))))
    if plugin == "shared" and mode == "exclusive":
        found.append(("shared_plugin_needs_shared", (
            "rdma_k8s_node_device_plugin is shared but rdma_netns_mode is exclusive: the RDMA shared device plugin "
            "stops seeing the devices in exclusive mode (every pod gets none). Set rdma_netns_mode: shared, or "
            "rdma_k8s_node_device_plugin: sriov with sriov_pfs")))
    if desired.get("kubelet_topology_topology_manager_policy") == "single-numa-node" and \
            _bool(desired.get("rdma_audit_whole_node_pods"), True):
        found.append(("single_numa_whole_node", (
            "kubelet_topology_topology_manager_policy is single-numa-node but pods may ask for the whole node "
            "(rdma_audit_whole_node_pods, default true): the kubelet refuses a pod asking for GPUs and NICs on two "
            "NUMA nodes (Topology Affinity Error). Set kubelet_topology_topology_manager_policy: restricted, or "
            "rdma_audit_whole_node_pods: false if no pod asks for more than one NUMA node's devices")))
    if _bool(desired.get("rdma_k8s_node_gpudirect")) and desired.get("nvidia_peermem_method") == "peermem" and \
            not _bool(desired.get("rdma_k8s_node_doca_ofed")) and not _bool(desired.get("rdma_k8s_node_external_ofed")):
        found.append(("gpudirect_without_driver", (
            "rdma_k8s_node_gpudirect with nvidia_peermem_method: peermem needs DOCA-OFED (nvidia_peermem uses its "
            "peer-memory API), but rdma_k8s_node_doca_ofed is false. Set rdma_k8s_node_doca_ofed: true, or "
            "rdma_k8s_node_external_ofed: true when DOCA-OFED comes from elsewhere (the NVIDIA Network Operator's "
            "driver container), or nvidia_peermem_method: dmabuf (open GPU kernel modules on Linux 5.12 or later)")))
    return found


def check(desired):
    """``{"refused": [messages], "ignored": [messages]}`` for one host, ``rdma_k8s_node_preflight_ignore`` applied."""
    if not isinstance(desired, Mapping):
        return {"refused": ["the host's variables are not a mapping"], "ignored": []}
    ignore = desired.get("rdma_k8s_node_preflight_ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(i, str) for i in ignore):
        return {"refused": ["rdma_k8s_node_preflight_ignore must be a list of rule names, got %r" % (ignore,)],
                "ignored": []}
    out = {"refused": [], "ignored": []}
    for rule, message in rules(desired):
        if rule in ignore:
            out["ignored"].append("[%s] %s" % (rule, message))
        else:
            out["refused"].append("[%s] %s" % (rule, message))
    return out


#: the variables the rules read (the pre-flight resolves exactly these per host)
VARIABLES = ("sriov_pfs", "rdma_netns_mode", "rdma_k8s_node_device_plugin", "kubelet_topology_topology_manager_policy",
             "rdma_audit_whole_node_pods", "rdma_k8s_node_gpudirect", "nvidia_peermem_method", "rdma_k8s_node_doca_ofed",
             "rdma_k8s_node_external_ofed", "rdma_k8s_node_preflight_ignore")
