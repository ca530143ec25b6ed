"""Simulator extensions for issue 3: the OFED-only VF GUID sysfs, devlink eswitch mode, rtnetlink VF faults.

OFED sysfs follows mlnx-ofa_kernel drivers/net/ethernet/mellanox/mlx5/core/sriov_sysfs.c (node/port: sscanf of
8 "%02x:" octets else EINVAL, shown as "%02x:...\\n"; policy: Down|Up|Follow else EINVAL).  Eswitch per iproute2
devlink/devlink.c pr_out_eswitch(); mlx5 has no eswitch on an InfiniBand port (EOPNOTSUPP).
"""

import dataclasses
import errno
import json
import os
import subprocess

import pytest
from hwsim_helpers import errno_of

import hwsim
from conftest import SHIMS

IB_PF = "sys/bus/pci/devices/0000:18:00.0"
NUMVFS = f"{IB_PF}/sriov_numvfs"


def test_ofed_sriov_dir_only_with_ofed_and_vfs(make_node):
    node = make_node("dgx-h100")
    assert "sriov" not in node.readdir(IB_PF)
    node.write(NUMVFS, "2")
    assert node.readdir(f"{IB_PF}/sriov") == ["0", "1"]
    assert node.readdir(f"{IB_PF}/sriov/1") == ["node", "policy", "port"]
    assert node.read(f"{IB_PF}/sriov/0/node") == "00:00:00:00:00:00:00:00\n"
    assert node.read(f"{IB_PF}/sriov/0/policy") == "Down\n"


def test_inbox_node_has_no_ofed_sriov_dir(clock):
    spec = hwsim.load("dgx-h100")
    inbox = hwsim.Node(dataclasses.replace(spec, ofed=None), clock=clock, sleep=lambda seconds: None)
    inbox.write(NUMVFS, "2")
    assert "sriov" not in inbox.readdir(IB_PF)
    assert "virtfn1" in inbox.readdir(IB_PF)


def test_ofed_node_store_sets_admin_guid_seen_by_netlink(make_node):
    node = make_node("dgx-h100")
    node.write(NUMVFS, "2")
    node.write(f"{IB_PF}/sriov/1/node", "02:11:22:33:44:55:66:77\n")
    node.write(f"{IB_PF}/sriov/1/port", "2:11:22:33:44:55:66:78")
    node.write(f"{IB_PF}/sriov/1/policy", "Follow\n")
    admin = node.pf_by_bdf("0000:18:00.0").admin[1]
    assert (admin.node_guid, admin.port_guid, admin.link_state) == (0x0211223344556677, 0x0211223344556678, "auto")
    assert node.read(f"{IB_PF}/sriov/1/port") == "02:11:22:33:44:55:66:78\n"
    assert node.read(f"{IB_PF}/sriov/1/policy") == "Follow\n"


@pytest.mark.parametrize("attr, value", [
    ("node", "02:11:22:33:44:55:66"), ("node", "0211:2233:4455:6677"), ("port", "zz:11:22:33:44:55:66:77"),
    ("policy", "follow"), ("policy", "Auto"),
])
def test_ofed_store_rejects_bad_values(make_node, attr, value):
    node = make_node("dgx-h100")
    node.write(NUMVFS, "1")
    assert errno_of(node.write, f"{IB_PF}/sriov/0/{attr}", value) == errno.EINVAL


def test_ofed_sysfs_gone_with_the_vfs(make_node):
    node = make_node("dgx-h100")
    node.write(NUMVFS, "1")
    node.write(NUMVFS, "0")
    assert "sriov" not in node.readdir(IB_PF)


def test_eswitch_mode_ethernet_only_and_reset_at_power_on(make_node):
    node = make_node("roce-cx6dx")
    assert node.eswitch_pf("0000:01:00.0").eswitch == "legacy"
    node.eswitch_set("0000:01:00.0", "switchdev")
    assert node.eswitch_pf("0000:01:00.0").eswitch == "switchdev"
    assert node.eswitch_pf("0000:01:00.1").eswitch == "legacy"
    assert errno_of(node.eswitch_set, "0000:01:00.0", "bogus") == errno.EINVAL
    node.power_on()
    assert node.eswitch_pf("0000:01:00.0").eswitch == "legacy"
    ib = make_node("dgx-h100")
    assert errno_of(ib.eswitch_pf, "0000:18:00.0") == errno.EOPNOTSUPP
    assert errno_of(ib.eswitch_pf, "0000:99:00.0") == errno.ENODEV


def test_rtnl_vf_fault_injection(make_node):
    node = make_node("dgx-h100")
    node.write(NUMVFS, "2")
    node.faults.add("rtnl/ibp24s0/vf/1", op="write", errno_="ENOSPC", count=1)
    node.set_vf("ibp24s0", 0, node_guid="02:00:00:00:00:00:00:01")
    assert errno_of(node.set_vf, "ibp24s0", 1, node_guid="02:00:00:00:00:00:00:02") == errno.ENOSPC
    node.set_vf("ibp24s0", 1, node_guid="02:00:00:00:00:00:00:02")
    assert node.pf_by_bdf("0000:18:00.0").admin[1].node_guid == 2 + (2 << 56)


def _devlink(mount, *args):
    env = dict(os.environ, HWSIM_ROOT=str(mount.root))
    return subprocess.run([str(SHIMS / "devlink"), *args], env=env, capture_output=True, text=True, check=False)


def test_devlink_shim(dgx):
    ib = _devlink(dgx, "dev", "eswitch", "show", "pci/0000:18:00.0")
    assert ib.returncode == 1 and ib.stderr == "kernel answers: Operation not supported\n"
    eth = "pci/0000:29:00.0"
    assert _devlink(dgx, "dev", "eswitch", "show", eth).stdout == f"{eth}: mode legacy inline-mode none encap-mode basic\n"
    assert _devlink(dgx, "dev", "eswitch", "set", eth, "mode", "switchdev").returncode == 0
    shown = json.loads(_devlink(dgx, "-j", "dev", "eswitch", "show", eth).stdout)
    assert shown == {"dev": {eth: {"mode": "switchdev", "inline-mode": "none", "encap-mode": "basic"}}}
    assert _devlink(dgx, "dev", "eswitch", "set", eth, "mode", "nope").returncode == 1
