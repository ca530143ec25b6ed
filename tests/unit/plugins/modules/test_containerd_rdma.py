"""containerd_rdma on Debian's stock containerd config, where runc exists only as containerd's built-in default.

containerd 1.x decodes a ``[...runtimes.runc]`` table onto a fresh runtime, not onto the built-in one
(tests/unit/safety/nodes.py ``FakeContainerd`` does the same): a table holding only ``base_runtime_spec``
leaves runc without ``runtime_type`` and every pod then fails to start.  The module must re-state the runtime,
and if an edit changes anything but ``base_runtime_spec`` it must restore the files before containerd sees them.
"""

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _containerd, _toml
from unit.plugins.module_utils.test__containerd import DEBIAN_STOCK
from unit.safety.benches import ContainerdBench
from unit.safety.nodes import ModuleFail


def stock_bench(tmp_path, monkeypatch, version):
    bench = ContainerdBench(tmp_path, monkeypatch, version=version)
    (bench.root / "etc/containerd/config.toml").write_text(DEBIAN_STOCK)
    return bench


def runc_after(bench):
    rc, out, err = bench.containerd(["containerd", "--config", "/etc/containerd/config.toml", "config", "dump"])
    assert rc == 0, err
    return _containerd.effective(_toml.parse(out))["runtimes"]["runc"]


@pytest.mark.parametrize("version", [(1, 6), (1, 7), (2, 1)])
def test_stock_debian_config_keeps_runc_runnable(tmp_path, monkeypatch, version):
    bench = stock_bench(tmp_path, monkeypatch, version)
    result = bench.run(bench.args(restart=True, restart_timeout=1))
    assert result["changed"] is True
    runc = runc_after(bench)
    assert runc == {"runtime_type": _containerd.RUNC_TYPE, "base_runtime_spec": "/etc/containerd/rdma-k8s-node-base-spec.json"}
    text = (bench.root / "etc/containerd/config.toml").read_text()
    assert 'bin_dir = "/usr/lib/cni"' in text
    assert ("runtime_type" in text) is (version < (2, 0))   # 2.x merges runtime tables: nothing to re-state
    again = bench.run(bench.args(restart=True, restart_timeout=1))
    assert again["changed"] is False


def test_an_edit_that_would_break_a_runtime_is_rolled_back(tmp_path, monkeypatch):
    # the seeding is the first line of defence; take it away and the effective-config check must catch it
    bench = stock_bench(tmp_path, monkeypatch, (1, 6))
    before = bench.observe()
    monkeypatch.setattr(_containerd, "seed_runtime", lambda eff, name: [])
    failure = bench.run(bench.args(restart=True, restart_timeout=1), expect=ModuleFail)
    assert "runtimes.runc.runtime_type changed from \"io.containerd.runc.v2\" to null" in failure["msg"]
    assert "the files were restored" in failure["msg"]
    assert failure["details"]["runtime_drift"]
    after = bench.observe()
    assert after["tree"] == before["tree"] and after["services"] == {"containerd": "active"}
