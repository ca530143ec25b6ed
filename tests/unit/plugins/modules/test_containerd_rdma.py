"""containerd_rdma on Debian's stock containerd config, where runc exists only as containerd's built-in default.

containerd 1.x decodes a ``[...runtimes.runc]`` table onto a fresh runtime, not onto the built-in one
(tests/unit/safety/nodes.py ``FakeContainerd`` does the same): a table holding only ``base_runtime_spec``
leaves runc without ``runtime_type`` and every pod then fails to start.  The module must re-state the runtime,
and if an edit changes anything but ``base_runtime_spec`` it must restore the files before containerd sees them.
"""

import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as _containerd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.modules import containerd_rdma
from unit.plugins.module_utils.test__containerd import DEBIAN_STOCK
from unit.safety.benches import ContainerdBench
from unit.safety.nodes import ModuleFail

INF = _containerd.RLIM_INFINITY


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


# -- other tools' files -------------------------------------------------------------------------------------------
OWNER_SPEC = '{\n  "ociVersion": "1.1.0",\n  "process": {\n    "cwd": "/",\n    "rlimits": [\n      {\n        "type": ' \
             '"RLIMIT_NOFILE",\n        "soft": 65536,\n        "hard": 1048576\n      }\n    ]\n  }\n}'
OWNED_CONFIG = '''version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "/etc/containerd/base-runtime-spec.json"
'''


def owner_bench(tmp_path, monkeypatch, config=OWNED_CONFIG, version=(1, 7)):
    bench = ContainerdBench(tmp_path, monkeypatch, version=version)
    (bench.root / "etc/containerd/config.toml").write_text(config)
    (bench.root / "etc/containerd/base-runtime-spec.json").write_text(OWNER_SPEC)
    return bench


def test_owner_spec_is_never_written_and_the_copy_follows_it(tmp_path, monkeypatch):
    bench = owner_bench(tmp_path, monkeypatch)
    owner = bench.root / "etc/containerd/base-runtime-spec.json"
    copy = bench.root / "etc/containerd/rdma-k8s-node.base-runtime-spec.json"
    result = bench.run(bench.args(cdi=False))
    assert result["observed"]["base_specs"]["runc"]["action"] == "derive"
    assert owner.read_text() == OWNER_SPEC and copy.read_text() == _containerd.derive_spec(OWNER_SPEC, INF)
    assert 'base_runtime_spec = "/etc/containerd/rdma-k8s-node.base-runtime-spec.json"' in \
        (bench.root / "etc/containerd/config.toml").read_text()
    headers = [d["after_header"] for d in result["diff"]]
    assert any("derived copy of /etc/containerd/base-runtime-spec.json, which is not written" in h for h in headers)
    assert bench.run(bench.args(cdi=False))["changed"] is False
    # the owner's tool rewrites its spec: the next run carries the change into the copy, still not touching the owner
    owner.write_text(OWNER_SPEC.replace('"cwd": "/"', '"cwd": "/srv"'))
    again = bench.run(bench.args(cdi=False))
    assert again["changed"] is True and [a["target"] for a in again["actions"] if "file" in a["action"]] == \
        ["/etc/containerd/rdma-k8s-node.base-runtime-spec.json"]
    assert '"cwd": "/srv"' in copy.read_text() and owner.read_text() != copy.read_text()
    assert again["observed"]["base_specs"]["runc"]["owner"] == "rdma.k8s_node"


def test_owner_spec_that_already_has_the_limit_is_kept(tmp_path, monkeypatch):
    bench = owner_bench(tmp_path, monkeypatch)
    satisfied = _containerd.derive_spec(OWNER_SPEC, INF)
    (bench.root / "etc/containerd/base-runtime-spec.json").write_text(satisfied)
    result = bench.run(bench.args(cdi=False))
    assert result["observed"]["base_specs"]["runc"]["action"] == "keep"
    assert [a["target"] for a in result["actions"] if "file" in a["action"]] == [bench.dropin]   # only the unit
    # nofile asked for: the owner's spec has another value, so a copy is made after all
    result = bench.run(bench.args(cdi=False, nofile=4096))
    assert result["observed"]["base_specs"]["runc"]["action"] == "derive"
    copy = json.loads((bench.root / "etc/containerd/rdma-k8s-node.base-runtime-spec.json").read_text())
    assert copy["process"]["rlimits"][0] == {"type": "RLIMIT_NOFILE", "soft": 4096, "hard": 4096}


def test_missing_owner_spec_is_refused(tmp_path, monkeypatch):
    bench = owner_bench(tmp_path, monkeypatch)
    (bench.root / "etc/containerd/base-runtime-spec.json").unlink()
    before = bench.observe()["tree"]
    failure = bench.run(bench.args(), expect=ModuleFail)
    assert "base-runtime-spec.json does not exist" in failure["msg"]
    assert bench.observe()["tree"] == before


def test_import_override_is_refused_with_the_file_and_value(tmp_path, monkeypatch):
    bench = ContainerdBench(tmp_path, monkeypatch, version=(2, 1))
    (bench.root / "etc/containerd/config.toml").write_text('version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    (bench.root / "etc/containerd/conf.d").mkdir()
    (bench.root / "etc/containerd/conf.d/99-nvidia.toml").write_text(
        "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n")
    before = bench.observe()["tree"]
    failure = bench.run(bench.args(), expect=ModuleFail)
    assert "/etc/containerd/conf.d/99-nvidia.toml sets enable_cdi = false" in failure["msg"]
    assert failure["details"]["imported_overrides"][0]["wanted"] is True
    assert failure["backup_files"] == {}, "returned always, a refusal too"
    assert bench.observe()["tree"] == before
    result = bench.run(bench.args(edit_imports=True))
    assert "enable_cdi = true" in (bench.root / "etc/containerd/conf.d/99-nvidia.toml").read_text()
    assert any("an imported file, edited because edit_imports=true" in d["after_header"] for d in result["diff"])
    assert result["observed"]["imported_overrides"][0]["file"] == "/etc/containerd/conf.d/99-nvidia.toml"
    assert bench.run(bench.args(edit_imports=True))["changed"] is False


def test_generated_header_is_refused_unless_edit_generated(tmp_path, monkeypatch):
    bench = ContainerdBench(tmp_path, monkeypatch)
    config = bench.root / "etc/containerd/config.toml"
    config.write_text("# Managed by Puppet. DO NOT EDIT.\n" + config.read_text())
    before = bench.observe()["tree"]
    failure = bench.run(bench.args(), expect=ModuleFail)
    assert "says it is regenerated" in failure["msg"] and "Managed by Puppet" in failure["msg"]
    assert failure["backup_files"] == {}, "returned always, a refusal too"
    assert bench.observe()["tree"] == before
    result = bench.run(bench.args(edit_generated=True))
    assert result["changed"] is True and any("edit_generated=true" in w for w in result.get("warnings", []))


def test_k3s_needs_its_own_service(tmp_path, monkeypatch):
    bench = ContainerdBench(tmp_path, monkeypatch, version=(2, 1))
    k3s = bench.root / "var/lib/rancher/k3s/agent/etc/containerd"
    k3s.mkdir(parents=True)
    (k3s / "config.toml").write_text("# File generated by k3s. DO NOT EDIT. Use config-v3.toml.tmpl instead.\nversion = 3\n")
    failure = bench.run(bench.args(config="/var/lib/rancher/k3s/agent/etc/containerd/config.toml"), expect=ModuleFail)
    assert "set service to k3s (server) or k3s-agent (agent)" in failure["msg"]


def test_unit_dropin_follows_the_service():
    params = {"memlock": "unlimited", "nofile": None, "config": "/etc/containerd/config.toml", "runtimes": [],
              "base_runtime_spec": "/etc/containerd/rdma-k8s-node-base-spec.json", "cdi": True,
              "cdi_spec_dirs": ["/etc/cdi"], "service": "k3s-agent", "unit_dropin": None, "restart_timeout": 60}
    containerd_rdma.validate(params)
    assert params["unit_dropin"] == "/etc/systemd/system/k3s-agent.service.d/50-rdma-k8s-node-memlock.conf"
    with pytest.raises(InputError) as info:
        containerd_rdma.validate(dict(params, base_runtime_spec="/etc/containerd/rdma-k8s-node.x.json", unit_dropin=None))
    assert info.value.msg.startswith("base_runtime_spec must not be named rdma-k8s-node.")


def test_the_config_named_by_the_units_execstart_is_the_one_configured(tmp_path, monkeypatch):
    """The observer reads --config of containerd.service's ExecStart: with the default `config` that file is
    edited (and a warning says so); a different `config` given explicitly is refused, naming both."""
    bench = ContainerdBench(tmp_path, monkeypatch, version=(2, 1))
    site = bench.root / "etc/containerd/site.toml"
    site.write_text((bench.root / "etc/containerd/config.toml").read_text())
    dropin = bench.root / "etc/systemd/system/containerd.service.d/10-config.conf"
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text("[Service]\nExecStart=\nExecStart=/usr/bin/containerd --config /etc/containerd/site.toml\n")
    before = (bench.root / "etc/containerd/config.toml").read_text()
    result = bench.run(bench.args())
    assert result["changed"] is True and result["observed"]["config_files"][0] == "/etc/containerd/site.toml"
    assert any("/etc/containerd/site.toml" in w for w in result.get("warnings", []))
    assert (bench.root / "etc/containerd/config.toml").read_text() == before
    assert result["observed"]["key_sources"]["LimitMEMLOCK"] == {"file": None, "value": None, "how": None}
    other = bench.root / "etc/containerd/other.toml"
    other.write_text("version = 3\n")
    failure = bench.run(bench.args(config="/etc/containerd/other.toml"), expect=ModuleFail)
    assert "starts containerd with the config /etc/containerd/site.toml" in failure["msg"]


def test_k3s_config_without_a_dropin_directory_is_refused_with_backup_files(tmp_path, monkeypatch):
    """k3s's generated config of containerd 1.x (no drop-in directory): refused, and the refusal's result has
    ``backup_files`` ({}), as documented (returned always)."""
    bench = ContainerdBench(tmp_path, monkeypatch, version=(1, 7))
    k3s = bench.root / "var/lib/rancher/k3s/agent/etc/containerd"
    k3s.mkdir(parents=True)
    (k3s / "config.toml").write_text("# File generated by k3s. DO NOT EDIT. Use config.toml.tmpl instead.\nversion = 2\n")
    failure = bench.run(bench.args(config="/var/lib/rancher/k3s/agent/etc/containerd/config.toml", service="k3s"),
                        expect=ModuleFail)
    assert "config.toml.tmpl" in failure["msg"] and failure["backup_files"] == {}, failure
