"""rdma_facts reads the node's RDMA devices, GPUs and GPU-NIC classes once (docs/benchmarks.md, "Layer registry
cost"): gather() and the health and counters rooms share one discovery.  Sharing must not change a fact: the facts
with one discovery equal the facts with a discovery per observer, on every archetype (VFs included), and the shared
run lists /sys/class/infiniband once where the separate observers listed it three times."""

import collections

import pytest

import hwsim
from ansible_collections.rdma.k8s_node.plugins.module_utils import _rdma_discovery
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters import observe as counters
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.health import observe as health

ARCHETYPES = ("dgx-h100", "dgx-h100-degraded", "roce-cx6dx", "numa-split", "a100-10nic", "dell-xe9680-12nic", "no-rdma")


class CountingRoot(HostRoot):
    """A HostRoot that counts its directory listings by path."""

    def __init__(self, root):
        super().__init__(root)
        self.listed = collections.Counter()

    def listdir(self, node_path):
        self.listed[node_path] += 1
        return super().listdir(node_path)


def with_vfs(name, root):
    """``name`` rendered with 2 VFs on every SR-IOV PF (VF RDMA devices, which both rooms leave out)."""
    spec = hwsim.load(name)
    node = hwsim.Node(spec)
    for bdf in node.readdir("/sys/bus/pci/devices"):
        base = "/sys/bus/pci/devices/%s" % bdf
        if "sriov_totalvfs" in node.readdir(base) and int(node.read(base + "/sriov_totalvfs")):
            node.write(base + "/sriov_numvfs", "2")
    node.advance()
    hwsim.render(spec, str(root), node=node)
    return root


@pytest.mark.parametrize("name", ARCHETYPES)
def test_one_discovery_gives_the_same_facts_as_one_per_observer(tmp_path, name):
    root = with_vfs(name, tmp_path)
    alone = {"gather": _rdma_discovery.gather(HostRoot(str(root))), "health": health.facts(HostRoot(str(root))),
             "counters": counters.facts(HostRoot(str(root)))}
    host = HostRoot(str(root))
    disc = _rdma_discovery.discover(host)
    shared = {"gather": _rdma_discovery.gather(host, None, disc), "health": health.facts(host, discovery=disc),
              "counters": counters.facts(host, discovery=disc)}
    assert shared == alone
    if name != "no-rdma":
        assert alone["health"]["nics"] and alone["counters"]["ports"]
        assert any(device["is_vf"] for device in alone["gather"]["devices"]) or name == "roce-cx6dx"


def test_the_shared_run_lists_the_rdma_devices_once(tmp_path):
    root = with_vfs("dgx-h100", tmp_path)
    separate = CountingRoot(str(root))
    _rdma_discovery.gather(separate)
    health.facts(separate)
    counters.facts(separate)
    shared = CountingRoot(str(root))
    disc = _rdma_discovery.discover(shared)
    _rdma_discovery.gather(shared, None, disc)
    health.facts(shared, discovery=disc)
    counters.facts(shared, discovery=disc)
    assert separate.listed["/sys/class/infiniband"] == 3 and shared.listed["/sys/class/infiniband"] == 1
    assert sum(shared.listed.values()) < sum(separate.listed.values())


def test_found_is_read_once_per_discovery(tmp_path):
    root = with_vfs("roce-cx6dx", tmp_path)
    disc = _rdma_discovery.discover(HostRoot(str(root)))
    first = disc.found()
    assert disc.found() is first and sorted(first) == ["devices", "gpu_nic_affinity", "gpus", "numa_nodes"]
