"""The audit's ``containerd.override``: facts from the one containerd observer (``_containerd_host``, as rdma_facts
gathers them) on a node tree where a later unit drop-in and an NVIDIA Container Toolkit import override what the
collection set; judged by the module's own rule (``_containerd.containerd_override_checks``)."""

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd.observe import facts as containerd_facts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.module_utils.test__containerd_host import Commands, _node, _write

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
