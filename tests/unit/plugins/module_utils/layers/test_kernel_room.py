"""The kernel room: the planner directly, the drop-in's simulated effect against /bin/sh, kernel.config's
ok/drift/fail/unknown, and the audit's evidence equal to kernel_cmdline's check-mode actions on real-world boot
configurations (Debian 12, an Ubuntu cloud image's grub.d drop-ins, RHEL 8 BLS with grubby), ok once applied."""

import json
import pathlib
import subprocess

import pytest

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import role_defaults
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import judge as _judge
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from unit.plugins.modules.harness import ModuleFail, sh_outside_root
from unit.plugins.modules.test_kernel_cmdline import el_node, fake_grubby, node, run  # noqa: F401 pylint: disable=unused-import

CORPUS = pathlib.Path(__file__).resolve().parents[4] / "fixtures" / "realworld"


class Commands:
    """HostCommands for the observer in the facts: the same stand-ins as the module's tests."""

    def __init__(self, root):
        self.root = root

    def find(self, name):
        return "/usr/sbin/" + name if (self.root / "usr/sbin" / name).exists() else None

    def run(self, argv, timeout=None):  # pylint: disable=unused-argument
        if argv[0] == "/bin/sh":
            return sh_outside_root(argv, self.root)
        if argv[0] == "grubby":
            return fake_grubby(self.root, argv[1:])
        raise AssertionError("unexpected command %s" % argv)


def section(root):
    """layers.kernel as the audit receives it (through JSON)."""
    return json.loads(json.dumps(_observe.facts(HostRoot(str(root)), Commands(root))))


def desired(**overrides):
    out = dict(role_defaults())
    out.update(overrides)
    return out


def config_check(root, want):
    facts = {"layers": {"kernel": section(root)}}
    found = [c for c in _audit.audit_host(facts, want, ["kernel"]) if c["id"] == "kernel.config"]
    assert len(found) == 1, found
    return found[0]


def module_args(want):
    return dict((k, v) for k, v in _judge.params_of(want).items() if k != "host_root")


def check_mode(monkeypatch, root, want):
    try:
        return True, run(monkeypatch, root, check=True, **module_args(want))
    except ModuleFail as exc:
        return False, exc.args[0]


# -- the planner directly ---------------------------------------------------------------------------------------------
def observed(defaults='GRUB_CMDLINE_LINUX=""\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n', prefix=("", "quiet"),
             dropin_text=None, later=None, grub_cfg=None):
    files = {}
    for path, text in ((_observe.GRUB_DEFAULTS, defaults), (_observe.DEFAULT_DROPIN, dropin_text),
                       (_observe.KERNEL_CMDLINE_FILE, None)):
        files[path] = _observe.file_state({"path": path, "exists": text is not None, "content": text,
                                           "mode": 0o644 if text is not None else None, "uid": 0, "gid": 0})
    return {"live": ["ro", "quiet"], "cpu_vendor": "GenuineIntel", "bls_entries": False, "defaults_exists": True,
            "tools": {"grubby": False, "update-grub": True, "grub-mkconfig": False}, "files": files,
            "grub_cfg": grub_cfg, "grubby": None,
            "grub": {"dropin": _observe.DEFAULT_DROPIN, "names": [], "before": list(prefix), "prefix": list(prefix),
                     "suffix": {"files": [], "probes": later}}}


def params(**extra):
    out = {"present": ["iommu=pt"], "absent": [], "vendor_iommu": False, "bootloader": "auto",
           "dropin": _observe.DEFAULT_DROPIN, "update": True, "backup": False, "host_root": "/"}
    out.update(extra)
    return out


def test_the_planner_writes_the_drop_in_and_regenerates():
    planned = _plan.plan(params(), observed())
    assert [a["action"] for a in planned["actions"]] == ["create_file", "run"]
    assert planned["observed"]["configured"] == ["iommu=pt", "quiet"] and planned["reboot_required"]
    assert planned["pending"] == {"missing": ["iommu=pt"], "unwanted": []}


def test_nothing_to_do_is_an_empty_plan():
    text = _grub.render_dropin(["iommu=pt"], [])
    planned = _plan.plan(params(), observed(dropin_text=text, prefix=("", "quiet"), grub_cfg=["ro", "iommu=pt", "quiet"]))
    assert planned["actions"] == []


def test_a_stale_grub_cfg_alone_is_a_regeneration():
    text = _grub.render_dropin(["iommu=pt"], [])
    planned = _plan.plan(params(), observed(dropin_text=text, grub_cfg=["ro", "quiet"]))
    assert planned["actions"] == [{"action": "run", "target": "update-grub"}]


def test_a_later_file_that_assigns_is_a_conflict_and_one_that_appends_is_not():
    probes = [list(p) for p in _observe.PROBES]
    overriding = [["ro", p[1]] for p in probes]
    with pytest.raises(ConflictError, match="iommu=pt"):
        _plan.plan(params(), observed(later=overriding))
    appending = [[p[0] + " x=1", p[1]] for p in probes]
    assert _plan.plan(params(), observed(later=appending))["observed"]["configured"] == ["iommu=pt", "x=1", "quiet"]
    computing = [[probes[0][0], probes[0][1]], ["y", probes[1][1]]]
    with pytest.raises(ConflictError, match="cannot be predicted"):
        _plan.plan(params(), observed(later=computing))


def test_refusals_are_the_modules():
    with pytest.raises(InputError, match="vendor_iommu"):
        _plan.plan(params(vendor_iommu=True), dict(observed(), cpu_vendor="SomethingElse"))
    with pytest.raises(InputError, match="dropin"):
        _plan.plan(params(dropin="/etc/grub.cfg"), observed())
    none = dict(observed(), defaults_exists=False)
    with pytest.raises(InputError, match="bootloader=auto"):
        _plan.plan(params(), none)


@pytest.mark.parametrize("values,present,absent", [
    (("console=tty0 quiet", "splash quiet"), ["iommu=pt"], []),
    (("iommu=off ib-core.netns_mode=1  x\ty", "iommu=soft"), ["iommu=pt", "ib_core.netns_mode=0"], ["*_iommu=*"]),
    (("", ""), [], ["quiet"]),
    (("a=1 a=2 b", "c"), [], []),
    (('"quoted=a b" intel_iommu=on', "quiet"), ["pci=realloc"], ["intel_iommu", "q[a-u]iet"]),
])
def test_the_drop_ins_simulated_effect_is_what_sh_does(values, present, absent):
    script = "GRUB_CMDLINE_LINUX='%s'; GRUB_CMDLINE_LINUX_DEFAULT='%s'\n" % values + _grub.render_dropin(present, absent) \
        + 'printf "%s\\n%s\\n" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"'
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True, env={}).stdout
    assert _plan.dropin_effect(list(values), present, absent) == out.split("\n")[:2]


# -- kernel.config ------------------------------------------------------------------------------------------------------
def test_kernel_config_ok_drift_fail_unknown(monkeypatch, node):
    want = desired()
    drift = config_check(node, want)
    assert drift["status"] == "drift" and drift["detail"].startswith("planned: [{'action': 'create_file'")
    run(monkeypatch, node, **module_args(want))
    assert config_check(node, want)["status"] == "ok"
    assert config_check(node, desired(rdma_kernel_vendor_iommu=True, rdma_kernel_bootloader="grub_dropin"))["status"] \
        == "drift"
    refused = config_check(node, desired(rdma_kernel_extra_args=["a;b"]))
    assert refused["status"] == "fail" and "'a;b'" in refused["detail"]
    wrong = config_check(node, desired(rdma_kernel_bootloader="lilo"))
    assert wrong["status"] == "fail" and "bootloader" in wrong["detail"] and "rdma_kernel_X" in wrong["detail"]
    other = config_check(node, desired(rdma_kernel_dropin="/etc/default/grub.d/50-other.cfg"))
    assert other["status"] == "unknown" and "50-other.cfg" in other["detail"]
    (node / "etc/default/grub.d/zz-vendor.cfg").write_text('GRUB_CMDLINE_LINUX="ro"\n')
    conflict = config_check(node, want)
    assert conflict["status"] == "fail" and "zz-vendor.cfg" in conflict["detail"]
    unread = config_check(node, desired(rdma_kernel_bootloader="grubby"))
    assert unread["status"] == "unknown" and "grubby" in unread["detail"]


def test_older_facts_are_judged_as_before_without_kernel_config():
    facts = {"kernel_cmdline": {"args": ["ro", "iommu=pt"]}, "cpu_vendor": "GenuineIntel",
             "persisted": {"kernel_cmdline": {"source": "/boot/grub/grub.cfg", "kernel": "/vmlinuz",
                                              "args": ["ro", "iommu=pt", "quiet"]}}}
    checks = _audit.audit_host(facts, desired(rdma_kernel_absent_args=["quiet"]), ["kernel"])
    assert [(c["id"], c["status"]) for c in checks] == [("kernel.cmdline", "ok"), ("kernel.cmdline_absent", "drift")]
    assert _registry.by_name("kernel").legacy_section(facts)["live"] == ["ro", "iommu=pt"]


# -- the audit's evidence is the module's check mode, on real-world boot configurations ---------------------------------
def _debian(root):
    (root / "etc/default/grub").write_text((CORPUS / "debian12/etc/default/grub").read_text())


def _ubuntu_cloud(root):
    _debian(root)
    for name in ("40-force-partuuid.cfg", "50-cloudimg-settings.cfg"):
        (root / "etc/default/grub.d" / name).write_text((CORPUS / "ubuntu-cloudimg/etc/default/grub.d" / name).read_text())


def _ubuntu_cloud_later(root):
    _ubuntu_cloud(root)
    (root / "etc/default/grub.d/zz-azure.cfg").write_text(
        'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT console=ttyS0,115200n8"\n')


def _rhel(root):
    (root / "usr/sbin/grubby").write_text("#!/bin/sh\nexit 99\n")
    (root / "usr/sbin/grubby").chmod(0o755)
    entries = root / "boot/loader/entries"
    entries.mkdir(parents=True)
    name = "rhel-20190428101407-4.18.0-80.1.2.el8_0.x86_64.conf"
    (entries / name).write_text((CORPUS / "rhel8/boot/loader/entries" / name).read_text())
    (root / "etc/default/grub").write_text((CORPUS / "rhel8/etc/default/grub").read_text())


TREES = {"debian12": _debian, "ubuntu-cloudimg": _ubuntu_cloud, "ubuntu-cloudimg-later": _ubuntu_cloud_later,
         "rhel8-grubby": _rhel}
WANTS = [{}, {"rdma_kernel_absent_args": ["quiet", "console"]}, {"rdma_kernel_extra_args": ["pci=realloc"],
                                                                 "rdma_kernel_vendor_iommu": True},
         {"rdma_kernel_bootloader": "grub_default", "rdma_kernel_absent_args": ["crashkernel"]}]


@pytest.mark.parametrize("want", WANTS, ids=["defaults", "absent", "extra+vendor", "grub_default"])
@pytest.mark.parametrize("tree", sorted(TREES))
def test_the_audit_evidence_is_the_modules_check_mode(monkeypatch, node, tree, want):
    TREES[tree](node)
    want = desired(**want)
    judged = config_check(node, want)
    ok, result = check_mode(monkeypatch, node, want)
    if not ok:
        assert judged["status"] == "fail" and judged["detail"] == result["msg"], (judged, result)
        return
    assert judged["status"] == ("drift" if result["actions"] else "ok"), (judged, result)
    assert judged["detail"] == ("planned: %s" % result["actions"] if result["actions"] else None)
    assert judged["persisted"] == result["observed"]["configured"]
    applied = run(monkeypatch, node, **module_args(want))
    assert applied["changed"] is bool(result["actions"])
    after = config_check(node, want)
    assert after["status"] == "ok", after
