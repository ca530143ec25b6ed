"""Fixtures of the safety suite (bad inputs, fault campaign, security, concurrency)."""

import os

import pytest

from unit.safety.benches import SriovBench

#: the randomized fault campaign: seed and how many scenarios a default run does
FAULT_SEED = int(os.environ.get("RDMA_FAULT_SEED", "20260917"))
FAULT_SCENARIOS = int(os.environ.get("RDMA_FAULT_SCENARIOS", "200"))


def pytest_configure(config):
    config.addinivalue_line("markers", "fault_campaign: the seeded randomized fault campaign (RDMA_FAULT_SEED, "
                                       "RDMA_FAULT_SCENARIOS; -m 'not fault_campaign' leaves it out)")
    config.addinivalue_line("markers", "rollout_fleet: provision.yml on 100 simulated nodes, 5 failing (minutes; "
                                       "runs only when selected with -m rollout_fleet; RDMA_ROLLOUT_NODES)")


def pytest_report_header(config):  # pylint: disable=unused-argument
    return "rdma.k8s_node fault campaign: RDMA_FAULT_SEED=%d RDMA_FAULT_SCENARIOS=%d" % (FAULT_SEED, FAULT_SCENARIOS)


@pytest.fixture(scope="module")
def dgx_bench(tmp_path_factory):
    """One simulated DGX H100 for a whole test module: 2 VFs with GUIDs on the first IB rail."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        bench = SriovBench(tmp_path_factory.mktemp("dgx"), monkeypatch)
        try:
            yield bench
        finally:
            bench.close()
