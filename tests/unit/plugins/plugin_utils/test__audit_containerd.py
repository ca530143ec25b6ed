"""The containerd room's audit on facts from its one observer (``layers/containerd/observe.py``, as rdma_facts gathers
them): ``containerd.override`` on a node tree where a later unit drop-in and an NVIDIA Container Toolkit import
override what the collection set, judged by the module's own rule (``rules.containerd_override_checks``); and
``containerd.config``, containerd_rdma's plan for the role's options (its base spec path, config and service)."""

import pathlib

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd.observe import facts as containerd_facts
from ansible_collections.rdma.k8s_node.plugins.modules import rdma_facts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.module_utils.test__containerd_host import Commands, _node, _write
from unit.safety.benches import ContainerdBench
from unit.safety.nodes import ModuleFail

OURS = "/etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf"


def audit(root, **overrides):
    facts = {"runtime": {"containerd": containerd_facts(HostRoot(str(root)), Commands(root, (2, 1)))}}
    desired = dict(role_defaults(), **overrides)
    return [c for c in _audit.audit_host(facts, desired, ["containerd"]) if c["id"] == "containerd.override"]


def test_later_files_that_win_are_named(tmp_path):
    _node(tmp_path)
    _write(tmp_path, OURS, ctd.render_unit_dropin(ctd.RLIM_INFINITY))
    _write(tmp_path, "/etc/systemd/system/containerd.service.d/99-site.conf", "[Service]\nLimitMEMLOCK=64M\n")
    checks = dict((c["subject"], c) for c in audit(tmp_path))
    assert sorted(checks) == ["LimitMEMLOCK", "enable_cdi"]
    memlock = checks["LimitMEMLOCK"]
    assert (memlock["status"], memlock["desired"], memlock["live"]) == ("fail", "infinity", "67108864")
    assert memlock["persisted"] == "/etc/systemd/system/containerd.service.d/99-site.conf"
    assert OURS in memlock["detail"] and "99-site.conf" in memlock["remedy"]
    cdi = checks["enable_cdi"]
    assert (cdi["persisted"], cdi["desired"], cdi["live"]) == ("/etc/containerd/conf.d/99-nvidia.toml", True, False)


def test_nothing_when_the_desired_state_agrees_or_without_key_sources(tmp_path):
    _node(tmp_path)
    _write(tmp_path, OURS, ctd.render_unit_dropin(ctd.RLIM_INFINITY))
    _write(tmp_path, "/etc/systemd/system/containerd.service.d/99-site.conf", "[Service]\nLimitMEMLOCK=64M\n")
    assert audit(tmp_path, containerd_rdma_memlock="64M", containerd_rdma_cdi=False) == []
    # facts of an older collection version (no key_sources): no judgement rather than a wrong one
    facts = {"runtime": {"containerd": {"installed": True, "version": "1.7.2", "config_version": 2, "runtimes": {},
                                        "enable_cdi": True}}}
    assert [c for c in _audit.audit_host(facts, role_defaults(), ["containerd"]) if c["id"] == "containerd.override"] == []


# -- containerd.config: containerd_rdma's plan on the facts, for the role's options as its task passes them ----------
CUSTOM_SPEC = "/etc/containerd/custom.json"
REPO = pathlib.Path(__file__).resolve().parents[4]


def role_call(desired):
    """roles/containerd_rdma/tasks/main.yml's module options for ``desired`` (the role's defaults under it)."""
    defaults = yaml.safe_load((REPO / "roles/containerd_rdma/defaults/main.yml").read_text(encoding="utf-8"))
    want = dict(defaults, **desired)
    args = {"memlock": want["containerd_rdma_memlock"], "config": want["containerd_rdma_config"],
            "base_runtime_spec": want["containerd_rdma_base_runtime_spec"], "runtimes": want["containerd_rdma_runtimes"],
            "cdi": want["containerd_rdma_cdi"], "cdi_spec_dirs": want["containerd_rdma_cdi_spec_dirs"],
            "edit_imports": want["containerd_rdma_edit_imports"], "edit_generated": want["containerd_rdma_edit_generated"],
            "service": want["containerd_rdma_service"], "restart": want["containerd_rdma_restart_ok"],
            "restart_timeout": want["containerd_rdma_restart_timeout"], "backup": want["containerd_rdma_backup"]}
    if want["containerd_rdma_nofile"]:
        args["nofile"] = want["containerd_rdma_nofile"]
    return args


def gathered(bench):
    """rdma_facts on the bench's node (its fake systemd and containerd answer)."""
    return bench.run_main(rdma_facts.main, {"host_root": str(bench.root)})["ansible_facts"]["rdma"]


def config_check(facts, **desired):
    checks = _audit.audit_host(facts, dict(role_defaults(), **desired), ["containerd"])
    [check] = [c for c in checks if c["id"] == "containerd.config"]
    return check


@pytest.mark.parametrize("version", [(1, 7), (2, 1)])
def test_a_node_converged_with_another_base_spec_path_audits_ok(tmp_path, monkeypatch, version):
    """The role's containerd_rdma_base_runtime_spec is not the default: the facts read the spec the node's config
    names (and ``ctr oci spec``), so the converged node is ok and a changed spec is drift with the module's plan."""
    bench = ContainerdBench(tmp_path, monkeypatch, version=version)
    fresh = config_check(gathered(bench), containerd_rdma_base_runtime_spec=CUSTOM_SPEC)
    # (the facts cannot know an inventory path no file names yet)
    assert fresh["status"] == "unknown" and "the facts do not hold %s" % CUSTOM_SPEC in fresh["detail"], fresh
    args = dict(role_call({"containerd_rdma_base_runtime_spec": CUSTOM_SPEC}), host_root=str(bench.root))
    assert bench.run(args)["changed"] is True
    assert bench.run(args, check=True)["changed"] is False
    facts = gathered(bench)
    observed = facts["layers"]["containerd"]["observed"]
    assert CUSTOM_SPEC in observed["specs"] and observed["oci_spec"], sorted(observed)
    check = config_check(facts, containerd_rdma_base_runtime_spec=CUSTOM_SPEC)
    assert (check["status"], check["detail"]) == ("ok", None), check
    spec = bench.root / CUSTOM_SPEC.lstrip("/")
    spec.write_text(spec.read_text().replace('"RLIMIT_MEMLOCK"', '"RLIMIT_MEMLOCK_OLD"'))
    check = config_check(gathered(bench), containerd_rdma_base_runtime_spec=CUSTOM_SPEC)
    actions = bench.run(args, check=True)["actions"]
    assert [a["target"] for a in actions] == [CUSTOM_SPEC]
    assert (check["status"], check["detail"]) == ("drift", "planned: %s" % actions), check


def test_the_judge_plans_for_the_roles_config(tmp_path, monkeypatch):
    """containerd_rdma_config: the default follows the unit's --config (the module's warning); another path than the
    unit's is refused by the module, and the audit fails with the module's message; another path where the unit
    names none is a file the facts did not read: unknown, saying so."""
    bench = ContainerdBench(tmp_path, monkeypatch, version=(2, 1))
    site = bench.root / "etc/containerd/site.toml"
    site.write_text((bench.root / "etc/containerd/config.toml").read_text())
    facts = gathered(bench)
    assert config_check(facts)["status"] == "drift"
    other = config_check(facts, containerd_rdma_config="/etc/containerd/site.toml")
    assert other["status"] == "unknown" and "containerd_rdma_config" in other["detail"], other
    dropin = bench.root / "etc/systemd/system/containerd.service.d/10-config.conf"
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text("[Service]\nExecStart=\nExecStart=/usr/bin/containerd --config /etc/containerd/site.toml\n")
    facts = gathered(bench)
    default = config_check(facts)
    actions = bench.run(dict(role_call({}), host_root=str(bench.root)), check=True)["actions"]
    assert default["status"] == "drift" and default["detail"] == "planned: %s" % actions
    assert default["subject"] == "/etc/containerd/site.toml"
    named = config_check(facts, containerd_rdma_config="/etc/containerd/site.toml")
    assert named["status"] == "drift" and named["detail"] == default["detail"]
    (bench.root / "etc/containerd/other.toml").write_text("version = 3\n")
    refused = config_check(facts, containerd_rdma_config="/etc/containerd/other.toml")
    failure = bench.run(dict(role_call({"containerd_rdma_config": "/etc/containerd/other.toml"}),
                             host_root=str(bench.root)), expect=ModuleFail)
    assert (refused["status"], refused["detail"]) == ("fail", failure["msg"]), refused


def test_the_judge_plans_for_the_roles_service(tmp_path, monkeypatch):
    """A k3s-only node: rdma_facts reads containerd as k3s.service runs it.  With the role's default service
    (containerd) the plan cannot be made from these facts (unknown, naming containerd_rdma_service), not planned for
    k3s; with containerd_rdma_service=k3s it is k3s's plan."""
    bench = ContainerdBench(tmp_path, monkeypatch, version=(2, 1))
    (bench.root / "lib/systemd/system/containerd.service").unlink()
    (bench.root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    (bench.root / "etc/systemd/system/k3s.service").write_text("[Service]\nExecStart=/usr/local/bin/k3s server\n")
    k3s = bench.root / "var/lib/rancher/k3s/agent/etc/containerd"
    k3s.mkdir(parents=True)
    (k3s / "config.toml").write_text("# File generated by k3s. DO NOT EDIT. Use config-v3.toml.tmpl instead.\n"
                                     'version = 3\nimports = ["/var/lib/rancher/k3s/agent/etc/containerd/'
                                     'config-v3.toml.d/*.toml"]\n')
    facts = gathered(bench)
    assert facts["layers"]["containerd"]["service"] == "k3s"
    default = config_check(facts)
    assert default["status"] == "unknown" and "containerd_rdma_service" in default["detail"], default
    k3s_check = config_check(facts, containerd_rdma_service="k3s")
    assert k3s_check["status"] == "drift", k3s_check
    assert "/config-v3.toml.d/50-rdma-k8s-node.toml" in k3s_check["detail"]


# -- the role's variables as the module receives them ----------------------------------------------------------------
@pytest.mark.parametrize("nofile,cdi", [("1048576", "false"), (1048576, False)])
def test_variables_given_as_text_are_converted_as_the_module_converts_them(tmp_path, monkeypatch, nofile, cdi):
    """``-e containerd_rdma_nofile=1048576 -e containerd_rdma_cdi=false`` are strings; the module's argument spec
    makes them an int and a bool, so the judge must too: the converged node audits ok either way."""
    bench = ContainerdBench(tmp_path, monkeypatch, version=(2, 1))
    desired = {"containerd_rdma_nofile": nofile, "containerd_rdma_cdi": cdi}
    args = dict(role_call(desired), host_root=str(bench.root))
    before = config_check(gathered(bench), **desired)
    assert (before["status"], before["detail"]) == ("drift", "planned: %s" % bench.run(args, check=True)["actions"])
    bench.run(args)
    checks = _audit.audit_host(gathered(bench), dict(role_defaults(), **desired), ["containerd"])
    assert [c for c in checks if c["id"] == "containerd.config"][0]["status"] == "ok"
    assert not [c for c in checks if c["id"] == "containerd.cdi"]  # cdi "false" is False, as the module takes it


@pytest.mark.parametrize("variable,value", [("containerd_rdma_nofile", "lots"), ("containerd_rdma_runtimes", {"a": 1}),
                                            ("containerd_rdma_cdi", "maybe"), ("containerd_rdma_memlock", "-5")])
def test_variables_the_module_refuses_fail_the_config_check_and_not_the_audit(tmp_path, monkeypatch, variable, value):
    bench = ContainerdBench(tmp_path, monkeypatch, version=(2, 1))
    refused = bench.run(dict(role_call({variable: value}), host_root=str(bench.root)), check=True, expect=ModuleFail)
    checks = _audit.audit_host(gathered(bench), dict(role_defaults(), **{variable: value}), ["containerd", "sysctl"])
    [check] = [c for c in checks if c["id"].startswith("containerd.")]
    assert (check["id"], check["status"]) == ("containerd.config", "fail"), check
    assert refused["msg"] in check["detail"] and "role's variables" in check["remedy"]
    assert [c for c in checks if c["id"].startswith("sysctl.")]
