"""irq_affinity (issue 22.4) on the default scenario's nodes, after converge: every MSI vector of each RDMA NIC's
physical function (the function's msi_irqs/, read through the host-root view) has the kubelet's reserved CPUs
(0-3,56-59 in converge.yml) of the NIC's NUMA node as its affinity, the kernel's effective CPU is among them, and the
boot unit names the same CPUs per function."""

from __future__ import annotations

import pytest

ROOT = "/opt/hostroot"
# physical function -> the CPUs its interrupts must be on, per archetype (tests/hwsim/specs): the reserved set
# 0-3,56-59 intersected with the NUMA node of the function's host bridge (dgx-h100-degraded: node 0 = CPUs 0-55,112-167,
# node 1 = 56-111,168-223; roce-cx6dx: one node, CPUs 0-63)
NODE0, NODE1 = "0-3", "56-59"
TARGETS = {
    "dgx-h100-degraded": {"0000:18:00.0": NODE0, "0000:29:00.0": NODE0, "0000:29:00.1": NODE0,
                          "0000:40:00.0": NODE0, "0000:4f:00.0": NODE0, "0000:5e:00.0": NODE0,
                          "0000:9a:00.0": NODE1, "0000:aa:00.0": NODE1, "0000:aa:00.1": NODE1,
                          "0000:c0:00.0": NODE1, "0000:ce:00.0": NODE1, "0000:dc:00.0": NODE1},
    "roce-cx6dx": {"0000:01:00.0": "0-3,56-59", "0000:01:00.1": "0-3,56-59"},
}


def _cpus(text):
    cpus = set()
    for part in text.strip().split(","):
        bounds = part.split("-")
        cpus.update(range(int(bounds[0]), int(bounds[-1]) + 1))
    return cpus


@pytest.fixture(scope="module")
def targets(host):
    spec = host.run("printenv HWSIM_SPEC").stdout.strip().rsplit("/", 1)[-1].removesuffix(".yaml").removesuffix(".yml")
    return TARGETS[spec]


def _vectors(host, bdfs):
    """``{bdf: {irq: (smp_affinity_list, effective_affinity_list)}}`` read in one command: one ``podman exec`` per file
    made this test read about 1,500 files one by one (8 minutes on a loaded CI machine for dgx-h100-degraded)."""
    script = (
        'for bdf in "$@"; do for irq in $(ls "%(root)s/sys/bus/pci/devices/$bdf/msi_irqs"); do '
        'printf "%%s %%s %%s %%s\\n" "$bdf" "$irq" "$(cat "%(root)s/proc/irq/$irq/smp_affinity_list")" '
        '"$(cat "%(root)s/proc/irq/$irq/effective_affinity_list")"; done; done' % {"root": ROOT})
    out = host.run_test("sh -c %s sh " + " ".join(["%s"] * len(bdfs)), script, *bdfs)
    assert out.rc == 0, out.stderr
    found = dict((bdf, {}) for bdf in bdfs)
    for line in out.stdout.splitlines():
        bdf, irq, affinity, effective = line.split(" ")
        found[bdf][irq] = (affinity, effective)
    return found


def test_every_vector_on_the_reserved_cpus_of_its_numa_node(host, targets):
    vectors = _vectors(host, sorted(targets))
    for bdf, cpus in targets.items():
        assert len(vectors[bdf]) > 1, "%s has no MSI vectors" % bdf  # mlx5_async0 and its completion vectors
        for irq, (affinity, effective) in vectors[bdf].items():
            assert affinity == cpus, "%s IRQ %s: %s, not %s" % (bdf, irq, affinity, cpus)
            assert _cpus(effective) <= _cpus(cpus), "%s IRQ %s runs on CPU %s" % (bdf, irq, effective)


def test_boot_unit_places_the_same_cpus(host, targets):
    assert host.file("/etc/rdma-k8s-node/irq-affinity.sh").mode == 0o755
    unit = host.file("/etc/systemd/system/rdma-k8s-node-irq.service").content_string
    args = " ".join("%s %s" % (bdf, targets[bdf]) for bdf in sorted(targets))
    assert "ExecStart=/bin/sh /etc/rdma-k8s-node/irq-affinity.sh 120 %s\n" % args in unit
    assert "PartOf=openibd.service" in unit and "Before=irqbalance.service kubelet.service" in unit
