"""roce_qos (issue 22.3) on the default scenario's nodes, after converge: every RoCE port trusts DSCP with PFC on
priority 3 only (read with the tool the node has), RDMA-CM's default ToS is 104, and the boot files exist."""

from __future__ import annotations

import pytest

# RoCE netdev -> its RDMA device, per archetype (tests/hwsim/specs)
ROCE = {"dgx-h100-degraded": {"enp41s0f0np0": "mlx5_1", "enp41s0f1np1": "mlx5_2", "enp170s0f0np0": "mlx5_7",
                              "enp170s0f1np1": "mlx5_8"},
        "roce-cx6dx": {"ens1f0np0": "mlx5_0", "ens1f1np1": "mlx5_1"}}


@pytest.fixture(scope="module")
def ports(host):
    spec = host.run("printenv HWSIM_SPEC").stdout.strip().rsplit("/", 1)[-1].removesuffix(".yaml").removesuffix(".yml")
    return ROCE[spec]


def test_trust_and_pfc(host, ports):
    for netdev in ports:
        app = host.run("HWSIM_ROOT=/opt/hwsim dcb -N app show dev %s dscp-prio" % netdev)
        pfc = host.run("HWSIM_ROOT=/opt/hwsim dcb pfc show dev %s prio-pfc" % netdev)
        assert app.rc == 0 and "26:3" in app.stdout.split(), app.stdout + app.stderr
        assert pfc.stdout.split()[1:] == ["0:off", "1:off", "2:off", "3:on", "4:off", "5:off", "6:off", "7:off"]


def test_rdma_cm_default_tos(host, ports):
    for device in ports.values():
        tos = host.file("/opt/hostroot/sys/kernel/config/rdma_cm/%s/ports/1/default_roce_tos" % device)
        assert tos.content_string == "104\n"


def test_boot_files(host):
    assert host.file("/etc/rdma-k8s-node/roce-qos.sh").mode == 0o755
    unit = host.file("/etc/systemd/system/rdma-k8s-node-roce-qos.service").content_string
    assert "PartOf=openibd.service" in unit and "ExecStart=/bin/sh /etc/rdma-k8s-node/roce-qos.sh" in unit
