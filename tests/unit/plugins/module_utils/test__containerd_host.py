"""_containerd_host.observe: the one containerd observer of containerd_rdma and rdma_facts, on node trees in tmp;
_containerd.containerd_override_checks on its facts."""

import os

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import observe as ctdh
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd.observe import facts as containerd_facts
from unit.safety.nodes import FakeContainerd

NVIDIA_V2 = ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n'
             '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n')
MAIN_V2 = ('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
           '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
           '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
           '  base_runtime_spec = "/etc/containerd/rdma-k8s-node.cri-base.json"\n')
SPEC = '{"ociVersion": "1.1.0", "process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": %d, "soft": %d}]}}\n'


def _write(root, path, text):
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _mask(root, path):
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/dev/null", target)


class Commands:  # pylint: disable=too-few-public-methods
    """HostCommands for a node tree: containerd/ctr answered by the safety suite's stand-in."""

    def __init__(self, root, version=(1, 7), bins=("/usr/bin/containerd", "/usr/bin/ctr")):
        self.root = root
        self.fake = FakeContainerd(root, version)
        self.bins = bins
        self.calls = []

    def find(self, name):
        return next((path for path in self.bins if path.rsplit("/", 1)[1] == name and path.startswith("/usr/bin")), None)

    def run(self, argv, data=None, timeout=None):  # pylint: disable=unused-argument
        self.calls.append(list(argv))
        return self.fake([argv[0].rsplit("/", 1)[-1]] + list(argv[1:]))

    @staticmethod
    def run_kernel(argv):
        """No systemd in a node tree: ``systemctl`` cannot be asked (the module then neither reloads nor restarts)."""
        return 1, "", "%s: command not found" % argv[0]


def _node(root, unit="[Service]\nExecStart=/usr/bin/containerd\nLimitMEMLOCK=8M\n"):
    _write(root, "/lib/systemd/system/containerd.service", unit)
    _write(root, "/etc/containerd/config.toml", MAIN_V2)
    _write(root, "/etc/containerd/conf.d/99-nvidia.toml", NVIDIA_V2)
    _write(root, "/etc/containerd/cri-base.json", SPEC % (65536, 65536))
    inf = ctd.RLIM_INFINITY
    _write(root, "/etc/containerd/rdma-k8s-node.cri-base.json", SPEC % (inf, inf))


def test_unit_dropins_in_systemd_order_with_masks_and_the_top_level_service_d(tmp_path):
    _node(tmp_path)
    _write(tmp_path, "/usr/lib/systemd/system/containerd.service.d/10-vendor.conf", "[Service]\nLimitMEMLOCK=1M\n")
    _write(tmp_path, "/etc/systemd/system/containerd.service.d/10-vendor.conf", "[Service]\nLimitMEMLOCK=2M\n")
    _write(tmp_path, "/etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf",
           ctd.render_unit_dropin(ctd.RLIM_INFINITY))
    _mask(tmp_path, "/etc/systemd/system/containerd.service.d/60-masked.conf")
    _write(tmp_path, "/usr/lib/systemd/system/containerd.service.d/60-masked.conf", "[Service]\nLimitMEMLOCK=3M\n")
    _write(tmp_path, "/run/systemd/system/service.d/99-everything.conf", "[Service]\nLimitMEMLOCK=64K\n")
    host = HostRoot(str(tmp_path))
    unit, masked, files = ctdh.unit_files(host, "containerd")
    assert unit == "/lib/systemd/system/containerd.service" and not masked
    assert [p for p, t in files] == ["/lib/systemd/system/containerd.service",
                                     "/etc/systemd/system/containerd.service.d/10-vendor.conf",
                                     "/etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf",
                                     "/run/systemd/system/service.d/99-everything.conf"]
    obs = ctdh.observe(host, problems=[])
    assert obs["unit_memlock"] == 65536 and obs["unit_memlock_source"] == "/run/systemd/system/service.d/99-everything.conf"
    # the collection's drop-in as it will be: gone, the vendor's 2M is the last but one; replaced, it stays in place
    dropin = ctdh.unit_dropin_path("containerd")
    assert [p for p, t in ctdh.unit_files(host, "containerd", replace=(dropin, None))[2]][2] == \
        "/run/systemd/system/service.d/99-everything.conf"


def test_the_config_containerd_reads_comes_from_its_unit(tmp_path):
    _node(tmp_path, "[Service]\nEnvironment=CFG=/etc/containerd/site.toml\nExecStart=/usr/bin/containerd --log-level "
                    "info -c ${CFG}\n")
    _write(tmp_path, "/etc/containerd/site.toml", "version = 2\n")
    obs = ctdh.observe(HostRoot(str(tmp_path)), problems=[])
    assert (obs["config_path"], obs["config_from"]) == ("/etc/containerd/site.toml", "unit")
    assert obs["command"]["argv"][-2:] == ["-c", "/etc/containerd/site.toml"]
    _write(tmp_path, "/etc/systemd/system/containerd.service.d/override.conf",
           "[Service]\nExecStart=\nExecStart=/usr/bin/containerd --config=/etc/containerd/other.toml\n")
    obs = ctdh.observe(HostRoot(str(tmp_path)), problems=[])
    assert obs["config_path"] == "/etc/containerd/other.toml" and obs["files"][0][1].exists is False
    assert obs["config_requested"] == ctdh.DEFAULT_CONFIG


def test_k3s_agent_with_its_data_dir_and_template(tmp_path):
    data = "/srv/k3s"
    _write(tmp_path, "/etc/systemd/system/k3s-agent.service",
           "[Service]\nExecStart=/usr/local/bin/k3s \\\n    agent --data-dir=%s\n" % data)
    config = data + "/agent/etc/containerd/config.toml"
    _write(tmp_path, config, "# File generated by k3s. DO NOT EDIT. Use config.toml.tmpl instead.\nversion = 3\n"
                             'imports = ["%s/agent/etc/containerd/config-v3.toml.d/*.toml"]\n' % data)
    host = HostRoot(str(tmp_path))
    assert ctdh.find_service(host) == "k3s-agent"  # no containerd.service: k3s's own
    obs = ctdh.observe(host, Commands(tmp_path, (2, 1), bins=(data + "/data/current/bin/containerd",)), service=None,
                       problems=[])
    assert (obs["service"], obs["config_path"], obs["config_from"]) == ("k3s-agent", config, "k3s")
    assert obs["generated_config"]["tool"] == "k3s" and obs["generated_config"]["path"] == config
    assert obs["template"] == {"path": data + "/agent/etc/containerd/config-v3.toml.tmpl", "exists": False}
    assert obs["installed"] is False  # not on PATH, and rancher_bin_dirs only knows /.../k3s data directories
    _write(tmp_path, data + "/agent/etc/containerd/config.toml.tmpl", "{{ template \"base\" . }}\n")
    assert ctdh.template_path(host, config, (2, 1, 4)) == {"path": data + "/agent/etc/containerd/config.toml.tmpl",
                                                           "exists": True}


@pytest.mark.parametrize("version, enable_cdi_from, how", [((1, 7), "/etc/containerd/conf.d/99-nvidia.toml", "set"),
                                                           ((2, 1), "/etc/containerd/conf.d/99-nvidia.toml", "set")])
def test_key_sources_and_derived_copies(tmp_path, version, enable_cdi_from, how):
    _node(tmp_path)
    commands = Commands(tmp_path, version)
    obs = ctdh.observe(HostRoot(str(tmp_path)), commands, problems=[])
    assert obs["imports"] == ["/etc/containerd/conf.d/99-nvidia.toml"]
    assert obs["version"][:2] == version and obs["config_version"] == (2 if version < (2, 0) else 3)
    assert obs["key_sources"]["enable_cdi"] == {"file": enable_cdi_from, "value": False, "how": how}
    assert obs["key_sources"]["LimitMEMLOCK"] == {"file": "/lib/systemd/system/containerd.service", "value": "8388608",
                                                  "how": "set"}
    if version >= (2, 0):
        assert obs["key_sources"]["runtimes.runc.base_runtime_spec"] == {
            "file": "/etc/containerd/config.toml", "value": "/etc/containerd/rdma-k8s-node.cri-base.json", "how": "set"}
        assert obs["derived_from"] == {"runc": "/etc/containerd/cri-base.json", "nvidia": None}
        assert obs["runtimes"]["runc"]["owner"] == "rdma.k8s_node"
    else:  # 1.x: the drop-in's CRI section replaced config.toml's whole (runc's table with it)
        assert "runc" not in obs["runtimes"]
        assert obs["key_sources"]["runtimes.nvidia.base_runtime_spec"] == {
            "file": "/etc/containerd/conf.d/99-nvidia.toml", "value": None, "how": "section"}
        assert obs["derived_from"] == {"nvidia": None}


def test_the_observer_raises_for_the_module_and_reports_for_facts(tmp_path):
    _node(tmp_path)
    host = HostRoot(str(tmp_path))
    commands = Commands(tmp_path, bins=())
    with pytest.raises(ApplyError, match="containerd is not installed"):
        ctdh.observe(host, commands)
    problems = []
    obs = ctdh.observe(host, commands, problems=problems)
    assert obs["installed"] is False and obs["effective"] is None and problems == []
    _write(tmp_path, "/etc/containerd/config.toml", 'imports = "nope"\n')
    obs = ctdh.observe(host, Commands(tmp_path), problems=problems)
    assert obs["files"] is None and problems == [{"what": "/etc/containerd/config.toml",
                                                  "error": "/etc/containerd/config.toml: imports must be a list of paths"}]


def test_rdma_facts_section_keeps_its_keys_and_gains_the_observers(tmp_path):
    _node(tmp_path)
    facts = containerd_facts(HostRoot(str(tmp_path)), Commands(tmp_path, (2, 1)))
    old_keys = {"installed", "version", "config_file", "config_version", "runtimes", "enable_cdi", "cdi_spec_dirs",
                "unit_memlock", "unit_memlock_source", "running", "problems"}
    new_keys = {"config_path", "service", "generated_config", "key_sources", "derived_from"}
    assert old_keys | new_keys <= set(facts)
    assert facts["problems"] == [] and facts["config_file"] == facts["config_path"] == "/etc/containerd/config.toml"
    assert facts["runtimes"]["runc"]["base_spec_memlock"] == {"soft": "infinity", "hard": "infinity"}
    assert facts["runtimes"]["runc"]["derived_from"] == "/etc/containerd/cri-base.json"
    assert facts["config_files"] == ["/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"]
    assert facts["enable_cdi"] is False and facts["service"] == "containerd"


# -- containerd_override_checks ----------------------------------------------------------------------------------------
def test_override_checks_name_the_later_file_that_wins(tmp_path):
    _node(tmp_path)
    _write(tmp_path, "/etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf",
           ctd.render_unit_dropin(ctd.RLIM_INFINITY))
    _write(tmp_path, "/etc/systemd/system/containerd.service.d/99-site.conf", "[Service]\nLimitMEMLOCK=64M\n")
    facts = containerd_facts(HostRoot(str(tmp_path)), Commands(tmp_path, (2, 1)))
    findings = ctd.containerd_override_checks(facts, {"containerd_rdma_memlock": "unlimited"})
    assert [dict((k, f[k]) for k in ("key", "winner", "wanted", "found")) for f in findings] == [
        {"key": "LimitMEMLOCK", "winner": "/etc/systemd/system/containerd.service.d/99-site.conf",
         "wanted": "infinity", "found": "67108864"},
        {"key": "enable_cdi", "winner": "/etc/containerd/conf.d/99-nvidia.toml", "wanted": True, "found": False}]
    assert ctd.containerd_override_checks(facts, {"containerd_rdma_memlock": "64M", "containerd_rdma_cdi": False}) == []


def test_override_checks_leave_drift_of_the_collections_own_files_to_other_checks():
    facts = {"service": "containerd", "version": "1.7.24", "config_path": "/etc/containerd/config.toml",
             "config_files": ["/etc/containerd/config.toml"], "enable_cdi": False, "cdi_spec_dirs": None,
             "unit_files": ["/lib/systemd/system/containerd.service"],
             "runtimes": {"runc": {"runtime_type": ctd.RUNC_TYPE, "base_runtime_spec": None, "base_spec_memlock": None}},
             "key_sources": {"LimitMEMLOCK": {"file": "/lib/systemd/system/containerd.service", "value": "8388608"},
                             "enable_cdi": {"file": "/etc/containerd/config.toml", "value": False, "how": "set"},
                             "runtimes.runc.base_runtime_spec": {"file": None, "value": None, "how": None}}}
    assert ctd.containerd_override_checks(facts, {}) == []
    # a drop-in that sorts before the collection's (not written yet) does not win over it
    facts["unit_files"].append("/etc/systemd/system/containerd.service.d/10-limits.conf")
    facts["key_sources"]["LimitMEMLOCK"] = {"file": "/etc/systemd/system/containerd.service.d/10-limits.conf",
                                            "value": "8388608"}
    assert ctd.containerd_override_checks(facts, {}) == []
    # one that sorts after it does
    facts["key_sources"]["LimitMEMLOCK"]["file"] = "/run/systemd/system/containerd.service.d/zz.conf"
    assert [f["winner"] for f in ctd.containerd_override_checks(facts, {})] == [
        "/run/systemd/system/containerd.service.d/zz.conf"]


def test_override_checks_on_containerd_1x_name_the_file_whose_cri_section_wins():
    facts = {"service": "containerd", "version": "1.7.24", "config_path": "/etc/containerd/config.toml",
             "config_files": ["/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"],
             "enable_cdi": False, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"], "unit_files": [],
             "runtimes": {"runc": {"runtime_type": ctd.RUNC_TYPE, "base_runtime_spec": None,
                                   "base_spec_memlock": None}},
             "key_sources": {"enable_cdi": {"file": "/etc/containerd/conf.d/99-nvidia.toml", "value": None,
                                            "how": "section"},
                             "runtimes.runc.base_runtime_spec": {"file": "/etc/containerd/conf.d/99-nvidia.toml",
                                                                 "value": None, "how": "section"}}}
    findings = ctd.containerd_override_checks(facts, {"containerd_rdma_cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]})
    assert [(f["key"], f["winner"], f["wanted"], f["found"]) for f in findings] == [
        ("enable_cdi", "/etc/containerd/conf.d/99-nvidia.toml", True, False),
        ("runtimes.runc.base_runtime_spec", "/etc/containerd/conf.d/99-nvidia.toml",
         "/etc/containerd/rdma-k8s-node-base-spec.json", None)]
    assert "replaces it whole" in findings[0]["detail"]
