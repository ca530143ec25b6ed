"""The audit's sysctl, netns and GPUDirect override checks on facts gathered from node trees built from the real-world
corpus: the file that wins over the role's is named, judged by the modules' own planners (_sysctl.overrides,
_netns.overrides, _gpudirect.peermem_overrides)."""

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules as _sysctl
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import plan as _netns
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns.observe import CONF_FILE as NETNS_CONF_FILE
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import judge as _sysctl_judge
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl.observe import CONF_FILE as SYSCTL_FILE
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import observe as _drivers_observe
from unit.plugins.modules.realworld_trees import (
    DEBIAN12_LINKS, DEBIAN12_SYSCTL, DOCA_MODPROBE, EKS_AL2023_SYSCTL, OPERATOR_MODPROBE, build, corpus, operator_modprobe,
)

IFACE = "ibp24s0"
PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n"
               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


def desired(**overrides):
    out = dict(role_defaults())
    out.update({"rdma_sysctl_interfaces": [IFACE], "rdma_netns_mode": "exclusive", "nvidia_peermem_method": "peermem"})
    out.update(overrides)
    return out


def provisioned(extra=None, links=None):
    """The role's own files as the modules write them, on top of ``extra``."""
    settings = _sysctl.validate({"net.ipv4.conf.all.arp_ignore": 1, "net.ipv4.conf.all.arp_announce": 2,
                                 "net.ipv4.conf.all.rp_filter": 2, "net.ipv4.conf.default.arp_ignore": 1,
                                 "net.ipv4.conf.default.arp_announce": 2, "net.ipv4.conf.default.rp_filter": 2,
                                 "net.ipv4.conf.%s.arp_ignore" % IFACE: 2, "net.ipv4.conf.%s.arp_announce" % IFACE: 2,
                                 "net.ipv4.conf.%s.rp_filter" % IFACE: 2})
    files = {SYSCTL_FILE: _sysctl.render(settings), NETNS_CONF_FILE: _netns.render_conf("exclusive"),
             "/etc/modules-load.d/nvidia-peermem.conf": _gpudirect.render_modules_load(),
             "/etc/systemd/system/openibd.service": "[Service]\nExecStart=/etc/init.d/openibd start\n",
             _drivers_observe.DROPIN_FILE: _gpudirect.render_openibd_dropin("/usr/sbin/modprobe"),
             "/proc/driver/nvidia/version": PROPRIETARY, "/proc/sys/kernel/osrelease": "6.1.0-28-amd64\n"}
    files.update(DOCA_MODPROBE)
    files.update(extra or {})
    return files, links


def audit(tmp_path, files, links=None, **overrides):
    root = build(tmp_path, files, links)
    host = HostRoot(root)
    facts = {"persisted": persisted_facts(host, [IFACE]), "drivers": _gpudirect.drivers_facts(host),
             "gpus": [{"pci_address": "0000:1b:00.0"}], "kernel_cmdline": {"args": ["ro", "quiet"]},
             "devices": [], "modules": ["nvidia_peermem"]}
    checks = _audit.audit_host(facts, desired(**overrides), ["sysctl", "netns", "drivers"])
    return [c for c in checks if c["id"].endswith(".override")]


def test_provisioned_debian_doca_node_has_no_override(tmp_path):
    files, links = provisioned(DEBIAN12_SYSCTL, DEBIAN12_LINKS)
    assert audit(tmp_path, files, links) == []


def test_provisioned_eks_al2023_node_has_no_override(tmp_path):
    files, links = provisioned(EKS_AL2023_SYSCTL)
    assert audit(tmp_path, files, links) == []


def test_debian_sysctl_conf_through_the_link_is_named(tmp_path):
    text = corpus("debian12/etc/sysctl.conf").replace("#net.ipv4.conf.all.rp_filter=1", "net.ipv4.conf.all.rp_filter=1")
    files, links = provisioned(dict(DEBIAN12_SYSCTL, **{"/etc/sysctl.conf": text}), DEBIAN12_LINKS)
    [check] = audit(tmp_path, files, links)
    assert (check["id"], check["status"], check["subject"]) == ("sysctl.override", "fail", "net.ipv4.conf.all.rp_filter")
    assert (check["desired"], check["live"], check["persisted"]) == ("2", "1", "/etc/sysctl.d/99-sysctl.conf:20")
    assert "rdma_sysctl_file" in check["remedy"]


def test_sysctl_conf_read_by_procps_only_is_ok_with_a_detail(tmp_path):
    text = corpus("eks-al2023/etc/sysctl.conf") + "net.ipv4.conf.all.rp_filter = 1\n"
    files, links = provisioned(dict(EKS_AL2023_SYSCTL, **{"/etc/sysctl.conf": text}))
    [check] = audit(tmp_path, files, links)
    assert check["status"] == "ok" and "sysctl --system" in check["detail"] and check["remedy"] is None


def test_the_audit_judges_the_role_file_even_before_it_is_written(tmp_path):
    files, links = provisioned(dict(EKS_AL2023_SYSCTL, **{"/etc/sysctl.d/99-zz.conf": "-net.ipv4.conf.all.rp_filter\n"}))
    del files[SYSCTL_FILE]
    [check] = audit(tmp_path, files, links)
    assert check["subject"] == "net.ipv4.conf.all.rp_filter" and "writes nothing" in check["detail"]


def test_operator_modprobe_file_is_named(tmp_path):
    files, links = provisioned(dict(EKS_AL2023_SYSCTL, **{OPERATOR_MODPROBE: operator_modprobe(1)}))
    [check] = audit(tmp_path, files, links)
    assert (check["id"], check["status"], check["subject"]) == ("netns.override", "fail", OPERATOR_MODPROBE)
    assert (check["desired"], check["live"]) == ("exclusive", "shared")
    assert "SriovNetworkPoolConfig" in check["remedy"]
    # the role's file name can be chosen to sort after it
    assert audit(tmp_path / "renamed", files, links, rdma_netns_conf_file="/etc/modprobe.d/zz-rdma.conf") == []


def test_peermem_blacklist_and_openibd_reset_are_named(tmp_path):
    files, links = provisioned(dict(EKS_AL2023_SYSCTL, **{
        "/etc/modprobe.d/blacklist-gpudirect.conf": "blacklist nvidia_peermem\n",
        "/etc/systemd/system/openibd.service.d/99-site.conf": "[Service]\nExecStartPost=\n"}))
    checks = audit(tmp_path, files, links)
    assert [(c["id"], c["subject"], c["live"], c["persisted"]) for c in checks] == [
        ("gpudirect.override", "modules-load.d", "blacklist", "/etc/modprobe.d/blacklist-gpudirect.conf:1"),
        ("gpudirect.override", "openibd.service", "reset", "/etc/systemd/system/openibd.service.d/99-site.conf:2")]
    # DMA-BUF needs no module: nothing to judge
    assert audit(tmp_path / "dmabuf", files, links, nvidia_peermem_method="dmabuf") == []


def _override_checks(facts, wanted):
    return [c for c in _audit.audit_host(facts, wanted, ["sysctl"]) if c["id"] == "sysctl.override"]


def test_sysctl_override_judgement_is_cached_per_desired_state_with_the_uncached_result(tmp_path):
    """The validated settings and our file's entries are computed once per desired sysctl state (a fleet shares a
    few); every state gives what the uncached computation gives, types included (``True`` is not ``1``) and the
    host's RDMA netdevs part of the state when ``rdma_sysctl_interfaces`` is empty."""
    text = corpus("eks-al2023/etc/sysctl.conf") + "net.ipv4.conf.all.rp_filter = 1\nnet.ipv4.conf.eth1.rp_filter = 0\n"
    files, links = provisioned(dict(EKS_AL2023_SYSCTL, **{"/etc/sysctl.d/99-zz.conf": text}))
    root = build(tmp_path, files, links)
    persisted = persisted_facts(HostRoot(root), [IFACE, "eth1"])

    def facts(netdevs):
        return {"persisted": persisted, "devices": [{"name": "mlx5_%d" % i, "netdevs": [n]} for i, n in enumerate(netdevs)]}

    states = [{}, {"rdma_sysctl_host": {"rp_filter": 2}}, {"rdma_sysctl_host": {"rp_filter": True}},
              {"rdma_sysctl_host": {"rp_filter": 2.0}}, {"rdma_sysctl_interfaces": []},
              {"rdma_sysctl_interfaces": ["all"]}, {"rdma_sysctl_per_interface": {"rp_filter": 0}},
              {"rdma_sysctl_file": "/tmp/90-rdma.conf"}, {"rdma_sysctl_interfaces": [], "rdma_sysctl_host": {}}]
    _sysctl_judge._validated_cached.cache_clear()
    for netdevs in ([IFACE], [IFACE, "eth1"], [IFACE], []):
        for state in states:
            wanted = desired(**state)
            cached = _override_checks(facts(netdevs), wanted)
            original = _sysctl_judge._validated_cached
            _sysctl_judge._validated_cached = original.__wrapped__  # the computation itself, uncached
            try:
                uncached = _override_checks(facts(netdevs), wanted)
            finally:
                _sysctl_judge._validated_cached = original
            assert cached == uncached, (netdevs, state)
    info = _sysctl_judge._validated_cached.cache_info()
    assert info.hits > 0 and info.misses < 4 * len(states)
    # the judgement the states lead to, so the comparison above compares something
    assert _override_checks(facts([IFACE, "eth1"]), desired(rdma_sysctl_interfaces=[]))[-1]["subject"] == \
        "net.ipv4.conf.eth1.rp_filter"
    assert _override_checks(facts([IFACE]), desired(rdma_sysctl_host={"rp_filter": True}))[0]["status"] == "unknown"
    assert [c["status"] for c in _override_checks(facts([IFACE]), desired(rdma_sysctl_host={"rp_filter": 1}))] == []
    assert _sysctl_judge._frozen({"rp_filter": True}) != _sysctl_judge._frozen({"rp_filter": 1})


def test_sysctl_override_of_a_value_that_cannot_be_frozen_is_judged_uncached(tmp_path):
    files, links = provisioned(dict(EKS_AL2023_SYSCTL))
    persisted = persisted_facts(HostRoot(build(tmp_path, files, links)), [IFACE])
    # the judge itself: the sysctl.arp check refuses a set before it
    checks = _sysctl_judge._plan_checks(_sysctl_judge.section_of({"persisted": persisted}),
                                        desired(rdma_sysctl_per_interface={"rp_filter": {2}}), [IFACE])
    assert [(c["id"], c["status"], "rp_filter" in c["detail"]) for c in checks] == [
        ("sysctl.override", "unknown", True)]
