"""RoCE QoS in the simulator (tests/hwsim/qos.py): the mlx5 DCB rules, the OFED ECN and traffic-class files, the
rdma_cm configfs groups, what a driver reload or power-on resets, and the mlnx_qos/dcb shims against real outputs."""

import errno
import os
import pathlib
import subprocess

import pytest

from conftest import SHIMS
from hwsim_helpers import errno_of

REAL = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "realworld" / "mlnx_qos"
ETH = "enp41s0f0np0"  # dgx-h100: ConnectX-7 storage port (Ethernet), mlx5_1, OFED driver
ECN = f"sys/class/net/{ETH}/ecn"


def test_probe_state_follows_the_firmware(make_node):
    node = make_node("dgx-h100")
    assert node.read(f"{ECN}/roce_np/enable/3") == "1\n" and node.read(f"{ECN}/roce_np/cnp_dscp") == "48\n"
    node.fw_set("0000:29:00.0", {"ROCE_CC_PRIO_MASK_P1": "8", "CNP_DSCP_P1": "40"})
    node.power_on()
    assert [node.read(f"{ECN}/roce_rp/enable/{p}") for p in range(8)] == ["0\n"] * 3 + ["1\n"] + ["0\n"] * 4
    assert node.read(f"{ECN}/roce_np/cnp_dscp") == "40\n"
    assert node.read(f"{ECN}/roce_np/cnp_802p_prio") == "6\n"


def test_ecn_and_cnp_stores(make_node):
    node = make_node("dgx-h100")
    assert errno_of(node.write, f"{ECN}/roce_np/enable/3", "1") == errno.EPERM  # en_ecn.c: enabling an enabled one
    node.write(f"{ECN}/roce_np/enable/3", "0\n")
    node.write(f"{ECN}/roce_np/enable/3", "1\n")
    assert errno_of(node.write, f"{ECN}/roce_np/enable/3", "yes") == errno.EINVAL
    assert errno_of(node.write, f"{ECN}/roce_np/cnp_dscp", "64") == errno.EINVAL
    assert errno_of(node.write, f"{ECN}/roce_np/cnp_802p_prio", "8") == errno.EINVAL
    node.write(f"{ECN}/roce_np/cnp_802p_prio", "5")
    assert node.read(f"{ECN}/roce_np/cnp_802p_prio") == "5\n"


def test_no_ofed_sysfs_with_the_inbox_driver(make_node):
    node = make_node("roce-cx6dx")
    assert "ecn" not in node.readdir("sys/class/net/ens1f0np0")
    assert "tc" not in node.readdir("sys/class/infiniband/mlx5_0")
    assert node.dcb_show("ens1f0np0")["trust"] == "pcp"


def test_traffic_class(make_node):
    node = make_node("dgx-h100")
    path = "sys/class/infiniband/mlx5_1/tc/1/traffic_class"
    assert node.read(path) == ""
    node.write(path, "tclass=0x68\n")
    assert node.read(path) == "Global tclass=104\n"
    assert errno_of(node.write, path, "256") == errno.EINVAL
    assert errno_of(node.write, path, "dst_ip=1.2.3.4,tclass=8") == errno.EINVAL  # rule forms: not modelled
    node.write(path, "-1")
    assert node.read(path) == ""


def test_dcb_rules_of_mlx5(make_node):
    node = make_node("dgx-h100")
    assert errno_of(node.dcb_app, ETH, "add", [[1, 0x8906, 3]]) == errno.EINVAL  # only DSCP entries on mlx5
    assert errno_of(node.dcb_app, ETH, "add", [[5, 64, 3]]) == errno.EINVAL
    assert errno_of(node.dcb_show, "ibp24s0") == errno.EOPNOTSUPP and errno_of(node.dcb_show, "eth9") == errno.ENODEV
    node.dcb_app(ETH, "add", [[5, 26, 3]])
    node.dcb_app(ETH, "add", [[5, 26, 5]])  # the old mapping of DSCP 26 is replaced
    assert node.dcb_show(ETH)["apps"] == [[5, 26, 5]] and node.dcb_show(ETH)["trust"] == "dscp"
    assert errno_of(node.dcb_app, ETH, "del", [[5, 26, 3]]) == errno.ENOENT
    node.dcb_app(ETH, "del", [[5, 26, 5]])
    assert node.dcb_show(ETH)["trust"] == "pcp"  # the last DSCP entry gone: back to PCP
    node.dcb_set_pfc(ETH, 8)
    assert node.dcb_show(ETH)["dcbx_host"] is True


def test_configfs_groups_and_what_a_reload_resets(make_node):
    node = make_node("dgx-h100")
    base = "sys/kernel/config/rdma_cm"
    assert node.readdir(base) == []
    assert errno_of(node.mkdir, f"{base}/mlx5_99") == errno.ENODEV
    assert errno_of(node.mkdir, "sys/class/net/x") == errno.EPERM
    node.mkdir(f"{base}/mlx5_1")
    assert errno_of(node.mkdir, f"{base}/mlx5_1") == errno.EEXIST
    tos = f"{base}/mlx5_1/ports/1/default_roce_tos"
    assert node.read(tos) == "0\n" and node.read(f"{base}/mlx5_1/ports/1/default_roce_mode") == "RoCE v2\n"
    assert errno_of(node.write, tos, "256") == errno.ERANGE and errno_of(node.write, tos, "x") == errno.EINVAL
    node.write(tos, "104")
    node.dcb_app(ETH, "add", [[5, 26, 3]])
    node.write("sys/class/infiniband/mlx5_1/tc/1/traffic_class", "104")
    # a driver reload (openibd restart): the device registers again and the RDMA-CM default is 0 again; the DCB
    # state and the traffic class belong to the probed device and are gone too
    node.rmmod("mlx5_ib")
    assert errno_of(node.read, tos) == errno.ENODEV  # the group outlives its device: cma_configfs_params_get()
    node.modprobe("mlx5_ib")
    assert node.read(tos) == "0\n" and node.read("sys/class/infiniband/mlx5_1/tc/1/traffic_class") == ""
    node.rmdir(f"{base}/mlx5_1")
    assert node.readdir(base) == [] and errno_of(node.rmdir, f"{base}/mlx5_1") == errno.ENOENT
    node.mkdir(f"{base}/mlx5_1")
    node.power_on()
    assert node.readdir(base) == [] and node.dcb_show(ETH)["apps"] == []


def sh(dgx, tool, *args):
    env = dict(os.environ, HWSIM_ROOT=str(dgx.root))
    return subprocess.run([str(SHIMS / tool), *args], env=env, capture_output=True, text=True, check=False)


def test_mlnx_qos_shim_prints_what_the_real_tool_prints(dgx):
    assert sh(dgx, "mlnx_qos", "-i", ETH, "--pfc", "0,0,0,1,0,0,0,0").returncode == 0
    done = sh(dgx, "mlnx_qos", "-i", ETH, "--trust", "dscp")
    assert done.returncode == 0, done.stdout
    lines = [line for line in done.stdout.splitlines() if line != "Buffers commands are not supported on your system"]
    real = (REAL / "netarbiter-trust-dscp.txt").read_text(encoding="utf-8").splitlines()
    assert [line.expandtabs(8) for line in lines] == real
    assert sh(dgx, "mlnx_qos", "-i", ETH, "--trust", "dscp", "--dscp2prio", "set,26,3").stdout == \
        "trust and dscp2prio commands cannot be used at the same time.\n"
    assert sh(dgx, "mlnx_qos", "-i", ETH, "--trust", "dcsp").stdout == "Invalid trust state command. Refer to the help.\n"
    assert sh(dgx, "mlnx_qos", "-i", ETH, "--pfc", "0,0,1").stdout == "pfc list must have 8 items\n"
    assert sh(dgx, "mlnx_qos", "-i", ETH, "--dscp2prio", "set,70,3").stdout == "Invalid dscp2prio command. Refer to the help.\n"
    ib = sh(dgx, "mlnx_qos", "-i", "ibp24s0")
    assert ib.returncode == 1 and ib.stdout.splitlines()[-1] == "ETS features are not supported on your system"
    assert sh(dgx, "mlnx_qos").stdout.startswith("Interface name is required")


def test_dcb_shim(dgx):
    assert sh(dgx, "dcb", "pfc", "show", "dev", ETH).stdout == (
        "pfc-cap 8 macsec-bypass off delay 7 \nprio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:off 7:off \n")
    assert sh(dgx, "dcb", "pfc", "set", "dev", ETH, "prio-pfc", "all:off", "3:on").returncode == 0
    assert sh(dgx, "dcb", "pfc", "show", "dev", ETH, "prio-pfc").stdout.split()[4] == "3:on"
    assert sh(dgx, "dcb", "app", "show", "dev", ETH, "dscp-prio").stdout == ""
    assert sh(dgx, "dcb", "app", "replace", "dev", ETH, "dscp-prio", "26:3", "CS6:6").returncode == 0
    assert sh(dgx, "dcb", "app", "show", "dev", ETH, "dscp-prio").stdout == "dscp-prio AF31:3 CS6:6 \n"
    assert sh(dgx, "dcb", "-N", "app", "show", "dev", ETH).stdout == "dscp-prio 26:3 48:6 \n"
    assert dgx.call({"cmd": "dcb_show", "dev": ETH})["trust"] == "dscp"
    bad = sh(dgx, "dcb", "app", "add", "dev", ETH, "dscp-prio", "26:9")
    assert bad.returncode == 1 and bad.stderr == "In DSCP:PRIO mapping, PRIO is expected to be 0..7\n"
    ib = sh(dgx, "dcb", "pfc", "show", "dev", "ibp24s0")
    assert ib.returncode == 1 and ib.stderr == "Attribute read: Operation not supported\n"


@pytest.mark.parametrize("missing", ["eth9"])
def test_dcb_shim_unknown_device(dgx, missing):
    done = sh(dgx, "dcb", "app", "show", "dev", missing)
    assert done.returncode == 1 and done.stderr == "Attribute read: No such device\n"
