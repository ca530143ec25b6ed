"""_persisted: what the next boot gets, read from files (GRUB/BLS, modprobe.d, sysctl.d, modules-load.d, sriov)."""

import json
import os
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _persisted as P
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot

# Debian's grub.cfg shape (grub-mkconfig 2.06): the default entry's linux line first, recovery later.
DEBIAN_GRUB_CFG = """\
### BEGIN /etc/grub.d/10_linux ###
menuentry 'Debian GNU/Linux' --class debian --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-x' {
\tload_video
\tinsmod gzio
\techo\t'Loading Linux 6.1.0-28-amd64 ...'
\tlinux\t/boot/vmlinuz-6.1.0-28-amd64 root=UUID=2f1c ro  quiet iommu=pt intel_iommu=on
\techo\t'Loading initial ramdisk ...'
\tinitrd\t/boot/initrd.img-6.1.0-28-amd64
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-x' {
\tmenuentry 'Debian GNU/Linux, with Linux 6.1.0-28-amd64 (recovery mode)' {
\t\tlinux\t/boot/vmlinuz-6.1.0-28-amd64 root=UUID=2f1c ro single
\t}
}
"""

# EL 8 shape: grub.cfg says blscfg, the entry holds $kernelopts, grubenv holds the value.
EL_GRUB_CFG = "set default_kernelopts=\"root=/dev/mapper/rhel-root ro\"\ninsmod blscfg\nblscfg\n"
EL_ENTRY = """title Red Hat Enterprise Linux (4.18.0-513.el8.x86_64) 8.9 (Ootpa)
version 4.18.0-513.el8.x86_64
linux /vmlinuz-4.18.0-513.el8.x86_64
initrd /initramfs-4.18.0-513.el8.x86_64.img $tuned_initrd
options $kernelopts $tuned_params
id rhel-20231020-4.18.0-513.el8.x86_64
grub_users $grub_users
grub_arg --unrestricted
grub_class rhel
"""
EL_OLD_ENTRY = EL_ENTRY.replace("513", "477")
EL_GRUBENV = ("# GRUB Environment Block\nsaved_entry=rhel-4.18.0-513\n"
              "kernelopts=root=/dev/mapper/rhel-root ro crashkernel=auto iommu=pt ib_core.netns_mode=0\n"
              "tuned_params=\n" + "#" * 200 + "\n")

# Debian's /usr/lib/sysctl.d/50-default.conf (systemd 252) lines that matter here.
SYSTEMD_DEFAULT = """\
# Source route verification
net.ipv4.conf.default.rp_filter = 2
net.ipv4.conf.*.rp_filter = 2
-net.ipv4.conf.all.rp_filter
"""


def write(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as handle:
        handle.write(text)


@pytest.fixture
def node(tmp_path):
    write(tmp_path, "/proc/sys/kernel/osrelease", "6.1.0-28-amd64\n")
    return tmp_path


def facts(root, interfaces=("ibp24s0",)):
    return P.persisted_facts(HostRoot(str(root)), list(interfaces))


def test_empty_node_has_nothing_persisted_and_no_problem(node):
    out = facts(node)
    assert out["kernel_cmdline"] is None
    assert out["netns_mode"] == {"modprobe": None, "modprobe_file": None, "cmdline": None, "effective": None}
    assert out["sysctl"] == {"all": {}, "default": {}, "ibp24s0": {}}
    assert out["modules_load"] == [] and out["sriov"] is None and out["problems"] == []


def test_debian_grub_cfg_default_entry_is_the_first_linux_line(node):
    write(node, "/boot/grub/grub.cfg", DEBIAN_GRUB_CFG)
    boot = facts(node)["kernel_cmdline"]
    assert boot["source"] == "/boot/grub/grub.cfg"
    assert boot["kernel"] == "/boot/vmlinuz-6.1.0-28-amd64"
    assert boot["args"] == ["root=UUID=2f1c", "ro", "quiet", "iommu=pt", "intel_iommu=on"]


def test_el_bls_entry_of_the_running_kernel_with_kernelopts_expanded(node):
    write(node, "/proc/sys/kernel/osrelease", "4.18.0-513.el8.x86_64\n")
    write(node, "/boot/grub2/grub.cfg", EL_GRUB_CFG)
    write(node, "/boot/loader/entries/rhel-4.18.0-477.el8.x86_64.conf", EL_OLD_ENTRY)
    write(node, "/boot/loader/entries/rhel-4.18.0-513.el8.x86_64.conf", EL_ENTRY)
    write(node, "/boot/grub2/grubenv", EL_GRUBENV)
    out = facts(node)
    assert out["kernel_cmdline"]["source"] == "/boot/loader/entries/rhel-4.18.0-513.el8.x86_64.conf"
    assert out["kernel_cmdline"]["args"] == ["root=/dev/mapper/rhel-root", "ro", "crashkernel=auto", "iommu=pt",
                                             "ib_core.netns_mode=0"]
    # the boot command line's ib_core option counts as persisted netns mode
    assert out["netns_mode"]["cmdline"] == "exclusive" and out["netns_mode"]["effective"] == "exclusive"


def test_bls_entry_with_literal_options_el9():
    entry = P.parse_bls_entry("title x\noptions root=/dev/sda1 ro\noptions iommu=pt\n# options nope\n")
    assert entry["options"] == "root=/dev/sda1 ro iommu=pt"
    assert P.expand_grub_vars(["$kernelopts", "${extra}", "quiet"], {"kernelopts": "ro a=1", "extra": "b"}) == \
        ["ro", "a=1", "b", "quiet"]


def test_modprobe_d_order_and_cmdline_precedence(node):
    write(node, "/lib/modprobe.d/50-ib.conf", "options ib_core netns_mode=1\n")
    write(node, "/etc/modprobe.d/rdma-k8s-node-ib_core.conf", "# ours\noptions ib_core netns_mode=0\n")
    out = facts(node)["netns_mode"]
    assert out == {"modprobe": "exclusive", "modprobe_file": "/etc/modprobe.d/rdma-k8s-node-ib_core.conf",
                   "cmdline": None, "effective": "exclusive"}
    # the same file name in /etc hides the one in /lib (kmod's rule)
    write(node, "/etc/modprobe.d/50-ib.conf", "options ib_core netns_mode=Y\n")
    write(node, "/etc/modprobe.d/rdma-k8s-node-ib_core.conf", "")
    assert facts(node)["netns_mode"]["modprobe"] == "shared"
    write(node, "/boot/grub/grub.cfg", DEBIAN_GRUB_CFG.replace("iommu=pt", "ib_core.netns_mode=0 iommu=pt"))
    out = facts(node)["netns_mode"]
    assert out["modprobe"] == "shared" and out["cmdline"] == "exclusive" and out["effective"] == "exclusive"


def test_malformed_modprobe_value_is_a_problem_not_a_guess(node):
    write(node, "/etc/modprobe.d/x.conf", "options ib_core netns_mode=maybe\n")
    out = facts(node)
    assert out["netns_mode"]["modprobe"] is None
    assert out["problems"] and out["problems"][0]["path"] == "/etc/modprobe.d/x.conf"


def test_sysctl_d_order_globs_and_negative_matches_as_systemd_sysctl_applies_them(node):
    write(node, "/usr/lib/sysctl.d/50-default.conf", SYSTEMD_DEFAULT)
    write(node, "/etc/sysctl.d/90-rdma-k8s-node.conf",
          "net.ipv4.conf.all.arp_ignore = 1\nnet/ipv4/conf/ibp24s0/arp_ignore = 2\n; comment\n")
    write(node, "/etc/sysctl.conf", "net.ipv4.conf.all.arp_announce=2\n")
    out = facts(node)["sysctl"]
    # '-net.ipv4.conf.all.rp_filter' keeps the glob off 'all' (systemd-sysctl leaves the kernel's value), and
    # systemd-sysctl (>= 207) reads /etc/sysctl.conf only through a sysctl.d link: none here
    assert out["all"] == {"arp_ignore": {"value": 1, "file": "/etc/sysctl.d/90-rdma-k8s-node.conf"}}
    assert out["default"]["rp_filter"] == {"value": 2, "file": "/usr/lib/sysctl.d/50-default.conf"}
    assert out["ibp24s0"]["rp_filter"]["value"] == 2  # from the glob
    assert out["ibp24s0"]["arp_ignore"] == {"value": 2, "file": "/etc/sysctl.d/90-rdma-k8s-node.conf"}
    # Debian's procps link: /etc/sysctl.conf is read at 99-sysctl.conf's place
    os.symlink("../sysctl.conf", os.path.join(str(node), "etc/sysctl.d/99-sysctl.conf"))
    assert facts(node)["sysctl"]["all"]["arp_announce"] == {"value": 2, "file": "/etc/sysctl.d/99-sysctl.conf"}
    assert facts(node)["sysctl_files"]["files"][-1]["link"] == "../sysctl.conf"
    # a file in /etc with the same name masks the vendor one entirely
    write(node, "/etc/sysctl.d/50-default.conf", "")
    assert "rp_filter" not in facts(node)["sysctl"]["default"]


def test_sysctl_slash_keys_keep_dots_of_vlan_interfaces():
    files = [("/etc/sysctl.d/a.conf", "net/ipv4/conf/eth0.100/rp_filter = 0\nnet.ipv4.conf.eth0.rp_filter = 1\n")]
    out = P.persisted_sysctl(files, ["eth0.100", "eth0"])
    assert out["eth0.100"]["rp_filter"]["value"] == 0 and out["eth0"]["rp_filter"]["value"] == 1


def test_modules_load_d_and_etc_modules(node):
    write(node, "/etc/modules-load.d/nvidia-peermem.conf", "# GPUDirect\nnvidia-peermem\n")
    write(node, "/usr/lib/modules-load.d/rdma.conf", "ib_umad ; trailing\n")
    write(node, "/etc/modules", "# /etc/modules\nloop\n")
    assert facts(node)["modules_load"] == ["ib_umad", "loop", "nvidia_peermem"]


def test_sriov_state_file_summary(node):
    state = {"version": 1, "sriov_vfs": [{"pci_address": "0000:18:00.0", "netdev": None, "rdma_device": None,
                                          "num_vfs": 8}],
             "ib_vf_guids": [{"pci_address": "0000:18:00.0"}]}
    write(node, P.SRIOV_STATE, json.dumps(state))
    out = facts(node)["sriov"]
    assert out["pfs"] == [{"netdev": None, "rdma_device": None, "pci_address": "0000:18:00.0", "num_vfs": 8}]
    assert out["guid_pfs"] == ["0000:18:00.0"] and out["state_file"] == P.SRIOV_STATE


@pytest.mark.parametrize("text", ["{not json", "[]", '{"sriov_vfs": "x"}'])
def test_broken_sriov_state_file_is_a_problem(node, text):
    write(node, P.SRIOV_STATE, text)
    out = facts(node)
    assert out["sriov"] is None
    assert [p["path"] for p in out["problems"]] == [P.SRIOV_STATE]


# -- found by the fuzz suite (tests/unit/fuzz/test_persisted.py) ---------------------------------------------------
def test_bls_line_with_a_long_blank_run_is_linear():
    """``(.*?)\\s*$`` backtracked quadratically: 20,000 blanks inside an options line took 2.5 s."""
    start = time.monotonic()
    assert P.parse_bls_entry("options a" + " " * 200_000 + "b \t\n")["options"] == "a" + " " * 200_000 + "b"
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("data, pfs", [
    ({"sriov_vfs": [], "ib_vf_guids": [{"pci_address": "b"}, {"pci_address": None}, {}, {"pci_address": "a"}]},
     ["a", "b", None, None]),
    ({"sriov_vfs": [], "ib_vf_guids": [{"pci_address": "a"}, {"pci_address": 1}]}, [1, "a"]),
])
def test_sriov_state_with_odd_guid_entries(data, pfs):
    """sorted() of None next to a string (an entry without pci_address) raised TypeError."""
    assert P.sriov_state_summary(data)["guid_pfs"] == pfs
    with pytest.raises(ValueError, match="ib_vf_guids must be a list"):
        P.sriov_state_summary({"sriov_vfs": [], "ib_vf_guids": 5})
