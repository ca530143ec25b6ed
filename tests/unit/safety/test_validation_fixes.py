"""Pure tests of the input-validation defects the safety review found and fixed (one test each).

The bad-input matrix (test_bad_inputs.py) proves the same fixes end to end on a node, with zero writes.
"""

import subprocess

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid, rules as _sriov
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel import cmdline as _cmdline, grub as _grub
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as _kubelet
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as _containerd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError


@pytest.mark.parametrize("pattern", [
    "a)touch${IFS}/tmp/pwned;;b",   # closes the case pattern and runs a command when grub-mkconfig sources the drop-in
    "$(reboot)", "`id`", "x|y", "a&b", "a;b", "a<b", "a>b", "'q'", "a\\b", "a{b,c}", "~root", "#x", "=pt",
])
def test_absent_patterns_that_the_shell_would_execute_are_refused(pattern):
    with pytest.raises(InputError, match="^absent: "):
        _cmdline.validate_request([], [pattern])


@pytest.mark.parametrize("pattern", ["iommu", "iommu=pt", "*_iommu=*", "console=tty[0-9]", "ib_core.netns_mode=?",
                                     "[!a]*", "rd.driver.blacklist=nouveau,nvidiafb"])
def test_absent_globs_and_names_still_work(pattern):
    assert _cmdline.validate_request([], [pattern]) == ([], [pattern])


def test_the_dropin_with_every_allowed_pattern_character_sources_without_running_anything(tmp_path):
    absent = ["*_iommu=*", "console=tty[0-9]", "[!a]x?", "a,b:c/d+e@f%g"]
    dropin = tmp_path / "99.cfg"
    dropin.write_text(_grub.render_dropin(["iommu=pt"], absent))
    out = subprocess.run(["/bin/sh", "-c", 'GRUB_CMDLINE_LINUX="intel_iommu=on console=tty0 ro"; . "$1"; '
                          'printf "%s" "$GRUB_CMDLINE_LINUX"', "sh", str(dropin)],
                         capture_output=True, text=True, check=True, cwd=tmp_path, env={})
    assert out.stdout == "ro iommu=pt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["99.cfg"]


@pytest.mark.parametrize("arg", ["iommu=pt\n", "iommu=pt\nGRUB_X=1"])
def test_a_trailing_newline_is_not_a_kernel_argument(arg):
    with pytest.raises(InputError, match="^present: "):
        _cmdline.validate_request([arg], [])


def test_unrewritable_grub_assignments_name_the_file():
    with pytest.raises(ParseError) as info:
        _grub.find_assignment('GRUB_CMDLINE_LINUX="$(cat /x)"\n', "GRUB_CMDLINE_LINUX", "/etc/default/grub")
    assert info.value.msg.startswith("/etc/default/grub: GRUB_CMDLINE_LINUX uses shell expansion")
    with pytest.raises(ParseError, match="^/etc/default/grub: GRUB_CMDLINE_LINUX=a;b is not a simple"):
        _grub.set_assignment("GRUB_CMDLINE_LINUX=a;b\n", "GRUB_CMDLINE_LINUX", "x", "/etc/default/grub")


def test_duplicate_listed_guids_name_the_option():
    with pytest.raises(InputError, match="^guids: VF 0 and VF 1 would both get GUID 02:00:00:00:00:00:00:09"):
        _guid.desired_guids("list", 2, explicit=["02:00:00:00:00:00:00:09", "02-00-00-00-00-00-00-09"])


@pytest.mark.parametrize("text, message", [
    ('[plugins.cri]\nx = 1\n', "/etc/containerd/config.toml: containerd config version 1 is not supported"),
    ("version = 3\n", "/etc/containerd/config.toml: config version 3 needs containerd 2.0"),
])
def test_unsupported_config_versions_name_the_file(text, message):
    files = [("/etc/containerd/config.toml", _toml.parse(text, "config.toml"))]
    with pytest.raises(ConflictError) as info:
        _containerd.choose_files(files, [("cri", None, "enable_cdi", True)], (1, 7, 24))
    assert info.value.msg.startswith(message)


def test_a_mac_with_a_trailing_newline_is_refused():
    with pytest.raises(InputError, match="is not a MAC address"):
        _sriov.validate_vf_attrs({"mac": "02:11:22:33:44:55\n"}, "vfs[0]")


def test_a_cpu_list_with_a_trailing_newline_is_refused():
    with pytest.raises(InputError, match="reserved_system_cpus"):
        _kubelet.parse_cpuset("0-1\n", "reserved_system_cpus")


@pytest.mark.fuse
def test_ib_vf_guids_binds_a_vf_an_interrupted_run_left_without_driver(dgx_bench, monkeypatch):
    """A failed re-bind leaves a VF unbound (no RDMA device, no GUID); a re-run must repair it, not fail waiting."""
    from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids  # pylint: disable=import-outside-toplevel
    bench = dgx_bench
    vf = "0000:18:00.1"
    (bench.root / "sys/bus/pci/drivers/mlx5_core/unbind").write_text(vf)
    args = bench.args(netdev="ibp24s0", scheme="list", guids=["02:00:00:00:00:00:00:01", "02:00:00:00:00:00:00:02"])
    try:
        checked = bench.run_main(ib_vf_guids.main, args, monkeypatch, check=True)
        assert {"action": "bind", "target": vf, "driver": "mlx5_core", "reason": "VF 0 has no driver"} in checked["actions"]
        bench.run_main(ib_vf_guids.main, args, monkeypatch)
        assert bench.vf_view()["0000:18:00.0/0"] == ("mlx5_core", "0200:0000:0000:0001")
    finally:
        if not (bench.root / "sys/bus/pci/devices" / vf / "driver").exists():
            (bench.root / "sys/bus/pci/drivers/mlx5_core/bind").write_text(vf)


def test_kmod_skips_hidden_modprobe_files():
    """libkmod's conf_files_filter_out() ignores dot files: a hidden conf_file would never apply at boot, so the
    planner must not count it (rdma_netns then reports the conflict instead of a false success)."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe  # pylint: disable=import-outside-toplevel
    listing = {"/etc/modprobe.d": [".hidden.conf", "a.conf", "b.txt"]}
    assert _modprobe.config_files(listing) == [("/etc/modprobe.d", "a.conf")]
