# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The registry of the collection's layers: one entry per layer, and everything that lists layers derives from it.

Derived from :data:`LAYERS` (tests/unit/plugins/plugin_utils/test__layers.py holds the YAML consumers to it):

* the audit's layer list, the desired-state variables it reads and the check-id prefixes of each layer
  (plugin_utils/_audit.py), and each layer's judgement (every layer is a room) in registry order;
* the roles whose defaults are the desired state where a host sets nothing (plugins/filter/rdma_audit.py);
* the variables ``rdma_audit_gather`` resolves per host (its default ``desired_vars``);
* the ``rdma_audit_layers`` choices of the rdma_audit role's argument spec, and the order of the layers in
  ``playbooks/provision.yml`` (both YAML, so a test compares them with this registry);
* the docs anchor of each layer.

Pure data, no I/O.  See docs/architecture.md for the walkthrough of adding a layer.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import importlib
from collections import namedtuple

# Only the observers are imported here: rdma_facts (on the node) ships what this module imports, and the judgements
# run on the controller, which imports them by name when the audit first asks (``Layer.judge``).
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as _containerd_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters import observe as _counters_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import observe as _drivers_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import observe as _firmware_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.health import observe as _health_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import observe as _irq_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import observe as _kernel_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as _kubelet_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import observe as _netns_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import observe as _pcie_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import observe as _qos_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import observe as _sriov_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import observe as _sysctl_observe

_ROOMS = "ansible_collections.rdma.k8s_node.plugins.module_utils.layers."

_Layer = namedtuple("Layer", (
    "name",            # the layer's name in the audit report and in rdma_audit_layers
    "title",           # for humans (docs, reports)
    "roles",           # the roles that provision it, in provision order
    "variables",       # the inventory variables that are its desired state (the roles' own names)
    "check_prefixes",  # check-id prefixes judged in this layer besides its name (``gpudirect.path`` -> drivers)
    "facts_keys",      # the keys of ansible_facts.rdma the audit judges it with
    "docs",            # where it is documented
    # every layer is a room (plugins/module_utils/layers/<name>/): its judgement, and its observer unless it judges
    # facts rdma_facts already returns (topology: the discovery's top-level keys)
    "observe",         # host -> its facts, which rdma_facts returns as ansible_facts.rdma.layers.<name> (None: none)
    "judge_ref",       # "<room module>:<function>": (its facts, desired or None) -> the audit's checks of the layer
    "inventory_judge_ref",  # "<room module>:<function>": ({host: its facts or None}) -> {host: [checks]} (None: none)
    "runs_tools",      # its observer runs node tools: rdma_facts calls observe(host, commands) (mlxconfig)
    "legacy_ref",      # "<room module>:<function>": facts without layers.<name> (an older collection; always for a
                       # room without an observer) -> its section
), defaults=(None, None, None, False, None))


_RESOLVED = {}  # ref -> the room's function: the audit asks for every layer's judge once a host


def _resolve(ref):
    if ref is None:
        return None
    func = _RESOLVED.get(ref)
    if func is None:
        module, dummy, name = ref.partition(":")
        func = _RESOLVED[ref] = getattr(importlib.import_module(_ROOMS + module), name)
    return func


class Layer(_Layer):
    """A registry entry; ``judge`` and ``inventory_judge`` are the room's functions, imported on first use."""

    __slots__ = ()

    @property
    def judge(self):
        return _resolve(self.judge_ref)

    @property
    def inventory_judge(self):
        return _resolve(self.inventory_judge_ref)

    @property
    def legacy_section(self):
        return _resolve(self.legacy_ref)


LAYERS = (
    Layer("drivers", "Drivers (DOCA-OFED) and GPUDirect RDMA", ("doca_ofed", "nvidia_peermem"),
          ("rdma_k8s_node_doca_ofed", "doca_ofed_version", "doca_ofed_profile", "rdma_k8s_node_gpudirect",
           "nvidia_peermem_method",
           "nvidia_peermem_persist", "nvidia_peermem_openibd_dropin", "nvidia_peermem_on_conflict",
           "rdma_audit_ofed_version"),
          ("gpudirect",), ("layers", "modules", "drivers", "gpus", "devices", "kernel_cmdline", "persisted"),
          "docs/drivers.md", observe=_drivers_observe.facts, judge_ref="drivers.judge:judge", runs_tools=True,
          legacy_ref="drivers.judge:section_of"),
    Layer("kernel", "Kernel boot arguments", ("rdma_kernel",),
          ("rdma_kernel_iommu_passthrough", "rdma_kernel_vendor_iommu", "rdma_kernel_extra_args",
           "rdma_kernel_absent_args", "rdma_kernel_bootloader", "rdma_kernel_dropin", "rdma_kernel_update_bootloader"),
          (), ("layers", "kernel_cmdline", "persisted", "cpu_vendor"),
          "docs/kernel.md#boot-arguments-kernel_cmdline-role-rdma_kernel", observe=_kernel_observe.facts,
          judge_ref="kernel.judge:judge", runs_tools=True, legacy_ref="kernel.judge:section_of"),
    Layer("netns", "RDMA subsystem netns mode", ("rdma_netns",),
          ("rdma_netns_mode", "rdma_netns_conf_file", "rdma_netns_live"),
          (), ("layers", "netns_mode", "persisted", "device_plugins"), "docs/kernel.md#rdma-netns-mode-rdma_netns-role-rdma_netns",
          observe=_netns_observe.facts, judge_ref="netns.judge:judge", legacy_ref="netns.judge:section_of"),
    Layer("sysctl", "ARP and reverse-path sysctls of the RDMA netdevs", ("rdma_sysctl",),
          ("rdma_sysctl_host", "rdma_sysctl_per_interface", "rdma_sysctl_interfaces", "rdma_sysctl_file",
           "rdma_sysctl_live"),
          (), ("layers", "sysctl", "persisted", "devices"),
          "docs/kernel.md#arp-and-reverse-path-filtering-sysctl_dropin-role-rdma_sysctl",
          observe=_sysctl_observe.facts, judge_ref="sysctl.judge:judge", legacy_ref="sysctl.judge:section_of"),
    Layer("firmware", "ConnectX firmware (NVCONFIG) parameters of the RDMA NICs", ("nic_firmware",),
          ("nic_firmware_nics",),
          (), ("layers",), "docs/firmware.md", observe=_firmware_observe.facts, judge_ref="firmware.judge:judge",
          inventory_judge_ref="firmware.judge:inventory_judge", runs_tools=True),
    Layer("pcie", "PCIe Max_Read_Request_Size of the RDMA NICs", ("pcie_tuning",),
          ("pcie_tuning_max_read_request", "pcie_tuning_devices", "pcie_tuning_boot_unit"),
          (), ("layers",), "docs/pcie.md", observe=_pcie_observe.facts, judge_ref="pcie.judge:judge"),
    Layer("irq", "RDMA NIC interrupts on the reserved CPUs of their NUMA node", ("irq_affinity",),
          ("irq_affinity_manage", "irq_affinity_cpus", "irq_affinity_on_disjoint", "irq_affinity_devices",
           "irq_affinity_boot_unit", "irq_affinity_boot_wait", "irq_affinity_irqbalance"),
          (), ("layers",), "docs/irq.md", observe=_irq_observe.facts, judge_ref="irq.judge:judge"),
    Layer("sriov", "SR-IOV VFs and InfiniBand VF GUIDs", ("sriov",),
          ("sriov_pfs", "sriov_allow_vf_reset", "sriov_firmware_check", "sriov_timeout", "sriov_guid_prefix",
           "sriov_guid_pool_file", "sriov_export_operator_pool"),
          (), ("layers", "devices", "persisted"), "docs/sriov.md", observe=_sriov_observe.facts,
          judge_ref="sriov.judge:judge", inventory_judge_ref="sriov.judge:inventory_judge", runs_tools=True,
          legacy_ref="sriov.judge:section_of"),
    Layer("qos", "Lossless RoCE QoS of the RoCE netdevs (trust DSCP, PFC, ECN, RoCE ToS)", ("roce_qos",),
          ("roce_qos_manage", "roce_qos_priority", "roce_qos_dscp", "roce_qos_cnp_dscp", "roce_qos_cnp_priority",
           "roce_qos_ecn", "roce_qos_tool", "roce_qos_interfaces", "roce_qos_boot_unit"),
          (), ("layers",), "docs/roce.md", observe=_qos_observe.facts, judge_ref="qos.judge:judge",
          inventory_judge_ref="qos.judge:inventory_judge", runs_tools=True),
    Layer("containerd", "containerd: memlock, base runtime spec, CDI", ("containerd_rdma",),
          ("containerd_rdma_memlock", "containerd_rdma_cdi", "containerd_rdma_cdi_spec_dirs", "containerd_rdma_runtimes",
           "containerd_rdma_base_runtime_spec", "containerd_rdma_nofile", "containerd_rdma_edit_imports",
           "containerd_rdma_edit_generated", "containerd_rdma_config", "containerd_rdma_service"),
          (), ("layers", "runtime"), "docs/containerd.md", observe=_containerd_observe.facts,
          judge_ref="containerd.judge:judge", runs_tools=True, legacy_ref="containerd.judge:section_of"),
    Layer("kubelet", "kubelet Topology, CPU and memory managers", ("kubelet_topology",),
          ("kubelet_topology_topology_manager_policy", "kubelet_topology_topology_manager_scope",
           "kubelet_topology_topology_manager_policy_options", "kubelet_topology_cpu_manager_policy",
           "kubelet_topology_memory_manager_policy", "kubelet_topology_mode", "rdma_audit_whole_node_pods",
           "kubelet_topology_reserved_system_cpus", "kubelet_topology_topology_manager_default_options",
           "kubelet_topology_reserved_memory", "kubelet_topology_on_conflict", "kubelet_topology_restart_ok"),
          (), ("layers", "runtime", "gpus", "devices", "numa_nodes"), "docs/kubelet.md",
          observe=_kubelet_observe.facts, judge_ref="kubelet.judge:judge", runs_tools=True,
          legacy_ref="kubelet.judge:section_of"),
    Layer("topology", "GPU-NIC affinity, MTU and the RDMA cgroup (judged, not provisioned)", (),
          ("rdma_audit_gpu_nic_max_class", "rdma_audit_gpu_nic_map", "rdma_audit_mtu"),
          ("mtu", "cgroup"), ("gpus", "devices", "gpu_nic_affinity", "numa_nodes", "mtu", "rdma_cgroup"),
          "docs/audit.md#checks", judge_ref="topology.judge:judge", inventory_judge_ref="topology.judge:inventory_judge",
          legacy_ref="topology.judge:section_of"),
    Layer("health", "PCIe links, ACS, RDMA ports, error counters and firmware (judged, not provisioned)", (),
          ("rdma_audit_port_rate", "rdma_audit_counter_thresholds", "rdma_audit_expected_gpus", "rdma_audit_expected_nics"),
          (), ("layers",), "docs/health.md", observe=_health_observe.facts,
          judge_ref="health.judge:judge", inventory_judge_ref="health.judge:inventory_judge"),
    Layer("counters", "Retransmission and congestion counters of the RDMA ports (judged, not provisioned)", (),
          ("rdma_audit_hw_counter_thresholds", "rdma_audit_hw_counter_rates"),
          (), ("layers",), "docs/counters.md", observe=_counters_observe.facts, judge_ref="counters.judge:judge"),
)

# the pseudo-layer of the audit's own checks (facts gathered, files readable, options valid): always reported
FACTS_LAYER = "facts"
# the audit's role: its defaults hold the topology layer's variables
AUDIT_ROLE = "rdma_audit"


def names():
    """The layer names, in the audit's order."""
    return tuple(layer.name for layer in LAYERS)


def by_name(name):
    """The registry entry of ``name`` (KeyError for an unknown layer)."""
    for layer in LAYERS:
        if layer.name == name:
            return layer
    raise KeyError(name)


def desired_vars():
    """Every layer's desired-state variables, in registry order, each once."""
    return _DESIRED_VARS


# made once at import: the audit's gather action asks for it for every host, in a worker forked after the strategy
# imported this module
_DESIRED_VARS = tuple(dict.fromkeys(var for layer in LAYERS for var in layer.variables))


def prefix_layers():
    """``{check-id prefix: layer}`` for the prefixes that are not a layer's own name."""
    return dict((prefix, layer.name) for layer in LAYERS for prefix in layer.check_prefixes)


def provision_roles():
    """The provisioning roles in the order ``playbooks/provision.yml`` runs them.

    Registry order, except that GPUDirect (``nvidia_peermem``) runs after the sysctls: it needs the drivers the
    DOCA-OFED role installed and an RDMA stack that is no longer restarted, and it is the drivers layer's second role.
    """
    first = [layer.roles[0] for layer in LAYERS if layer.roles]
    later = [role for layer in LAYERS for role in layer.roles[1:]]
    order = []
    for role in first:
        order.append(role)
        if role == "rdma_sysctl":
            order.extend(later)
    return tuple(order)


def rooms():
    """The rooms with an observer (``rdma_facts`` returns their ``layers.<name>``), in registry order."""
    return tuple(layer for layer in LAYERS if layer.observe is not None)


def default_roles():
    """The roles whose ``defaults/main.yml`` give the desired state where a host sets nothing."""
    return tuple(role for layer in LAYERS for role in layer.roles) + (AUDIT_ROLE,)
