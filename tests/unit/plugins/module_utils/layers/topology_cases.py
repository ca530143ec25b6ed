"""Inventories for the topology room's differential test: ``_audit.audit``'s input (``{host: {facts, desired, layers,
error}}``) built from the simulator's archetypes as rdma_facts gathers them (every room's ``layers.<name>`` too), and
hand-made edge cases: no GPUs, a class nvidia-smi does not rank, the expected-NIC map, VFs in a GPU's row, unknown
NUMA nodes, unreadable and mixed MTUs across three hosts, a host without facts, rdma_cgroup limits, facts of another
shape (among them GPUs without devices or affinity matrix, which the summary draws), MTUs of another type.
Deterministic: the same archetypes give the same inventories."""

import copy
import json

import hwsim
import hwsim.spec

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._gpudirect import drivers_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import gather
from ansible_collections.rdma.k8s_node.plugins.modules.rdma_facts import layer_facts

ARCHETYPES = tuple(hwsim.spec.archetypes())


def node_facts(name, directory):
    """``ansible_facts.rdma`` of archetype ``name`` at power-on, rendered under ``directory`` (plain JSON)."""
    host = HostRoot(str(hwsim.render(name, directory)))
    facts = gather(host)
    facts["drivers"] = drivers_facts(host)
    facts["persisted"] = persisted_facts(host, [n for n in facts["sysctl"] if n not in ("all", "default")])
    facts["layers"] = layer_facts(host, facts["problems"])
    return json.loads(json.dumps(facts))


def _desired(**overrides):
    out = dict(role_defaults())
    out.update(overrides)
    return out


def _host(facts, desired="defaults", layers=None, error=None):
    return {"facts": facts, "desired": _desired() if desired == "defaults" else desired, "layers": layers, "error": error}


def _edited(facts, edit):
    facts = copy.deepcopy(facts)
    edit(facts)
    return facts


def _gpu(facts, index=0):
    return facts["gpus"][index]["pci_address"]


def _no_gpus(facts):
    facts["gpus"] = []
    facts["gpu_nic_affinity"] = {}


def _unranked_class(facts):
    for row in facts["gpu_nic_affinity"].values():
        for nic in row:
            row[nic] = "NV12" if row[nic] == "PIX" else row[nic]


def _vf_in_row(facts):
    """The closest NIC of the first GPU is a VF (its PF one class further): the GPU's NIC is then the closest PF."""
    vf = {"name": "mlx5_vf0", "pci_address": "0000:18:00.2", "numa_node": 0, "driver": "mlx5_core",
          "netdevs": ["ibp24s0v0"], "ports": [{"port": 1, "link_layer": "InfiniBand"}], "is_vf": True, "pf": "mlx5_0"}
    facts["devices"].append(vf)
    facts["mtu"]["ibp24s0v0"] = 1500
    facts["gpu_nic_affinity"][_gpu(facts)]["mlx5_vf0"] = "PIX"
    facts["gpu_nic_affinity"][_gpu(facts)]["mlx5_0"] = "PXB"


def _unknown_numa(facts):
    facts["gpus"][0]["numa_node"] = None
    nic = min(facts["gpu_nic_affinity"][_gpu(facts, 1)].items(), key=lambda item: (item[1] != "PIX", item[0]))[0]
    next(d for d in facts["devices"] if d["name"] == nic)["numa_node"] = None


def _unreadable_mtu(facts):
    facts["mtu"][sorted(facts["mtu"])[0]] = None


def _mixed_mtu(facts):
    names = sorted(facts["mtu"])
    facts["mtu"][names[0]] = 1500
    facts["mtu"][names[-1]] = 2044


def _no_link_layer(facts):
    for port in facts["devices"][0]["ports"]:
        port["link_layer"] = None


def _cgroup_limits(facts):
    facts["rdma_cgroup"] = {"/kubepods.slice": {"mlx5_0": {"hca_handle": 2, "hca_object": "max"},
                                                "mlx5_1": {"hca_handle": "max", "hca_object": 100}},
                            "/system.slice": {"mlx5_0": {"hca_handle": "max", "hca_object": "max"}}}


def _with_vfs(facts):
    """Two VFs with GUIDs on the first InfiniBand PF (a clone of this host has the same: sriov.guid_inventory)."""
    pf = facts["layers"]["sriov"]["pfs"][0]
    pf["numvfs"] = 2
    pf["vfs"] = [{"index": i, "node_guid": "0200:0000:0000:%04x" % i, "port_guid": "0200:0000:0000:%04x" % (0x80 + i)}
                 for i in range(2)]


def _with_pfc(priority):
    """PFC read on every RoCE port, lossless on ``priority`` (qos.inventory)."""
    def edit(facts):
        for port in facts["layers"]["qos"]["ports"].values():
            port.update(trust="dscp", pfc=[1 if i == priority else 0 for i in range(8)])
    return edit


def cases(facts):
    """``{case: hosts}`` for ``_audit.audit``, from ``{archetype: node_facts(...)}``."""
    dgx, roce, split = facts["dgx-h100"], facts["roce-cx6dx"], facts["numa-split"]
    out = {}
    for name in ARCHETYPES:
        out["archetype-%s" % name] = {"node": _host(facts[name])}
        out["facts-only-%s" % name] = {"node": _host(facts[name], None)}
    gpu, other = _gpu(dgx), _gpu(dgx, 1)
    out["edges"] = {
        "no-gpus": _host(_edited(dgx, _no_gpus)),
        "unranked-class": _host(_edited(dgx, _unranked_class)),
        "unranked-class-sys": _host(_edited(dgx, _unranked_class), _desired(rdma_audit_gpu_nic_max_class="SYS")),
        "map": _host(dgx, _desired(rdma_audit_gpu_nic_map={gpu: "mlx5_6", other: "mlx5_99"})),
        "map-sys": _host(dgx, _desired(rdma_audit_gpu_nic_max_class="SYS", rdma_audit_gpu_nic_map={gpu: "mlx5_6"})),
        "pix-only": _host(dgx, _desired(rdma_audit_gpu_nic_max_class="PIX")),
        "bad-options": _host(dgx, _desired(rdma_audit_gpu_nic_max_class="NV4", rdma_audit_gpu_nic_map=["x"],
                                           rdma_audit_mtu=True)),
        "vf-in-row": _host(_edited(dgx, _vf_in_row)),
        "unknown-numa": _host(_edited(dgx, _unknown_numa)),
        "one-numa-node": _host(_edited(split, lambda f: f["numa_nodes"].update(online=[0]))),
        "unreadable-mtu": _host(_edited(roce, _unreadable_mtu)),
        "roce-mtu-4200": _host(roce, _desired(rdma_audit_mtu=4200)),
        "roce-mtu-9000": _host(roce, _desired(rdma_audit_mtu=9000)),
        "roce-mixed": _host(_edited(roce, _mixed_mtu), _desired(rdma_audit_mtu=9000)),
        "ib-mixed-desired": _host(_edited(dgx, _mixed_mtu), _desired(rdma_audit_mtu=9000)),
        "no-link-layer": _host(_edited(dgx, _no_link_layer)),
        "cgroup": _host(_edited(dgx, _cgroup_limits), None),
        "no-keys": _host({}),
        "topology-only": _host(dgx, layers=["topology"]),
        "without-topology": _host(dgx, layers=["drivers", "sriov"]),
    }
    # one MTU per link layer across the inventory: three hosts, two agreeing, one odd; one without facts; one that
    # does not audit the layer (its MTUs count); a tie between two values
    odd = _edited(dgx, lambda f: f["mtu"].update(ibp24s0=2044, ibp64s0=2044))
    out["inventory-mtu"] = {
        "a": _host(dgx), "b": _host(dgx), "c": _host(odd), "d": _host(None, error="unreachable"),
        "e": _host(roce), "f": _host(_edited(roce, _mixed_mtu), layers=["kernel", "sriov"]),
    }
    out["inventory-mtu-tie"] = {"a": _host(dgx), "b": _host(odd), "c": _host(None)}
    # mtu.inventory among the other rooms' inventory checks (sriov.guid_inventory, qos.inventory)
    clone = _edited(odd, _with_vfs)
    out["inventory-order"] = {"a": _host(clone), "b": _host(clone), "c": _host(_edited(dgx, _with_vfs)),
                              "d": _host(_edited(roce, _with_pfc(3))), "e": _host(_edited(_edited(roce, _mixed_mtu), _with_pfc(4))),
                              "f": _host(_edited(roce, _with_pfc(3)))}
    out["inventory-one-host"] = {"a": _host(odd)}
    # facts of another shape: that host is unknown, the others are judged (also when it does not audit the layer)
    for index, bad in enumerate(HOSTILE):
        out["hostile-%d" % index] = {"bad": _host(bad), "bad-no-topology": _host(bad, layers=["kernel"]),
                                     "good": _host(dgx)}
    # MTUs the room no longer judges as the code before it did (which judged a string MTU, or failed the whole report
    # when the host did not audit the layer): that host is unknown with the reason, whatever its layers
    for index, (bad, _reason) in enumerate(MTU_OF_ANOTHER_TYPE):
        out["mtu-type-%d" % index] = {"bad": _host(bad), "bad-no-topology": _host(bad, layers=["kernel"]),
                                      "good": _host(dgx), "odd": _host(odd)}
    return out


#: facts of another shape: what the room's judgement raises (the code before it raised the same) makes that host
#: unknown; the report's summary raises nothing (GPUs without devices or an affinity matrix, values of another type)
HOSTILE = [
    {"devices": "x"}, {"devices": ["x"]}, {"devices": [None]}, {"mtu": [], "devices": [{"netdevs": ["a"]}]},
    {"devices": [{"name": "m", "netdevs": 5}]}, {"devices": [{"name": "m", "netdevs": [["a"]]}], "mtu": {"a": 1}},
    {"devices": [{"name": "m", "ports": [None], "netdevs": []}]}, {"gpus": [{}]}, {"gpus": "x"},
    {"gpu_nic_affinity": [1], "gpus": [{"pci_address": "a"}]}, {"numa_nodes": "x"},
    {"gpus": [{}], "devices": [], "gpu_nic_affinity": {}}, {"gpus": "x", "devices": [], "gpu_nic_affinity": {}},
    {"gpus": [{"pci_address": "a"}], "devices": [], "gpu_nic_affinity": [1]},
    {"gpus": [{"pci_address": "a"}], "devices": [{"name": "m"}], "gpu_nic_affinity": {"a": {"m": "PIX"}},
     "numa_nodes": {"online": 5}},
    {"rdma_cgroup": {"/": "x"}}, {"rdma_cgroup": {"/": {"mlx5_0": "max"}}},
    {"layers": "x"}, {"layers": {"topology": "x"}},
    # GPUs the judgement accepts (no NIC in their row: no topology.gpu_nic check) without devices or affinity matrix,
    # or with them None: the summary's matrix has GPU rows without NIC columns (it used to fail the whole report)
    {"gpus": [{"pci_address": "0000:1b:00.0", "numa_node": 0, "local_cpulist": "0-15"}]},
    {"gpus": [{"pci_address": "a"}], "devices": None, "gpu_nic_affinity": None},
    {"gpus": [{"pci_address": "a"}], "devices": [{"name": "m", "pci_address": "p"}]},
    {"gpus": [{"pci_address": "a"}], "gpu_nic_affinity": {"a": {"m": "PIX"}}},
    {"gpus": [{"pci_address": "a"}], "devices": "", "gpu_nic_affinity": []},
    # values of other types the judgement accepts: a class or a CPU list that is not a string, a row that is empty
    # but not a mapping, VFs or modules that are not lists, a gpudirect that is not a mapping
    {"gpus": [{"pci_address": "a", "local_cpulist": 5, "numa_node": "x"}, {"pci_address": "b"}],
     "devices": [{"name": "m", "pci_address": "p", "vfs": 5}, {"name": "n", "pci_address": "q", "vfs": "ab"}],
     "gpu_nic_affinity": {"a": {"m": 3, "n": ["SYS"]}, "b": []}},
    {"gpus": [{"pci_address": "a"}, {"pci_address": ["unhashable"]}], "devices": [{"name": "m", "pci_address": "p"}],
     "gpu_nic_affinity": {"a": {"m": True}}},
    {"gpus": [{"pci_address": "a"}], "devices": [{"name": "m", "pci_address": "p"}], "gpu_nic_affinity": {"a": {}},
     "modules": "nvidia_peermem", "drivers": {"gpudirect": "x"}, "netns_mode": 5},
    {"gpus": True}, {"gpus": {"a": 1}}, {"gpus": [None, "x"]},
]

#: MTUs (and what groups them) of another type: ``(facts, the reason the audit gives)``
MTU_OF_ANOTHER_TYPE = [
    ({"devices": [{"name": "m", "netdevs": ["a"]}], "mtu": {"a": [1]}}, "the MTU of a is [1], not an integer"),
    ({"devices": [{"name": "m", "netdevs": ["a"]}], "mtu": {"a": {"v": 1}}}, "the MTU of a is {'v': 1}, not an integer"),
    ({"devices": [{"name": "m", "netdevs": ["a"]}], "mtu": {"a": "4092"}}, "the MTU of a is '4092', not an integer"),
    ({"devices": [{"name": "m", "netdevs": ["a"]}], "mtu": {"a": True}}, "the MTU of a is True, not an integer"),
    ({"devices": [{"name": "m", "netdevs": ["a"]}], "mtu": {"a": 4092.0}}, "the MTU of a is 4092.0, not an integer"),
    ({"devices": [{"name": "m", "netdevs": ["a"], "ports": [{"link_layer": "InfiniBand"}]}], "mtu": {"a": "4092"}},
     "the MTU of a is '4092', not an integer"),
    ({"mtu": "x"}, "mtu is a str, not a mapping of netdevs to MTUs"),
    ({"mtu": ["ibp24s0"], "devices": [{"name": "m", "netdevs": ["ibp24s0"]}]}, "mtu is a list, not a mapping of netdevs to MTUs"),
    ({"devices": [{"name": "m", "netdevs": ["a"], "ports": [{"link_layer": 5}]},
                  {"name": "n", "netdevs": ["b"], "ports": [{"link_layer": "InfiniBand"}]}], "mtu": {"a": 1, "b": 2}},
     "the link layer of a port of m is 5, not a name"),
    ({"devices": [{"name": "m", "netdevs": ["a"], "ports": [{"link_layer": ["InfiniBand"]}]}], "mtu": {"a": 4092}},
     "the link layer of a port of m is ['InfiniBand'], not a name"),
]
