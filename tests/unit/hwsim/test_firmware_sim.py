"""The simulated NIC firmware (hwsim/nvconfig.py, Node.fw_set/fw_reset) and the mlxconfig/mstconfig/mlxfwreset shims:
per-model parameter sets, values refused as mlxconfig refuses them, MAX_ACC_OUT_READ behind ADVANCED_PCI_SETTINGS
(evaluated on Next Boot), a level-3 firmware reset that makes Next Boot Current for one card and restarts its driver,
and output lines laid out as the real tools print them (tests/fixtures/realworld/mlxconfig)."""

import errno
import os
import pathlib
import subprocess

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import config
from conftest import SHIMS
from hwsim import nvconfig

REAL = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "realworld" / "mlxconfig"


def errno_of(call, *args):
    with pytest.raises(OSError) as info:
        call(*args)
    return info.value.errno, info.value.filename


def test_models_have_their_own_parameters(make_node):
    node = make_node("dgx-h100")
    cx7 = node.fw_params(node.card_by_bdf("0000:18:00.0"))
    dual = node.fw_params(node.card_by_bdf("0000:29:00.0"))
    assert "LINK_TYPE_P1" in cx7 and "LINK_TYPE_P2" not in cx7 and "PROG_PARSE_GRAPH" in cx7 and "DPA_AUTHENTICATION" in cx7
    assert ["LINK_TYPE_P1", "LINK_TYPE_P2"] == [name for name in dual if name.startswith("LINK_TYPE")]
    roce = make_node("roce-cx6dx")
    cx6dx = roce.fw_params(roce.card_by_bdf("0000:01:00.1"))
    assert not [name for name in cx6dx if name.startswith("LINK_TYPE")] and "PROG_PARSE_GRAPH" not in cx6dx
    assert "ROCE_CC_LEGACY_DCQCN" in cx6dx and "CNP_DSCP_P2" in cx6dx
    assert errno_of(roce.fw_set, "0000:01:00.0", {"LINK_TYPE_P1": "IB"}) == (errno.EINVAL, "Unknown Parameter: LINK_TYPE_P1")
    assert errno_of(roce.fw_set, "0000:01:00.0", {"PROG_PARSE_GRAPH": "1"}) == (
        errno.EINVAL, "Unknown Parameter: PROG_PARSE_GRAPH")
    defaults = nvconfig.defaults(cx6dx)
    assert (defaults["ROCE_CC_PRIO_MASK_P1"], defaults["CNP_DSCP_P1"], defaults["CNP_802P_PRIO_P1"]) == (255, 48, 6)
    assert defaults["ATS_ENABLED"] is False and defaults["ROCE_CONTROL"] == "ROCE_ENABLE"


@pytest.mark.parametrize("name, raw, parsed, shown", [
    ("SRIOV_EN", "1", True, "True(1)"), ("SRIOV_EN", "false", False, "False(0)"), ("LINK_TYPE_P1", "eth", "ETH", "ETH(2)"),
    ("LINK_TYPE_P1", "1", "IB", "IB(1)"), ("CNP_DSCP_P1", "0x30", 48, "48"),
    ("ROCE_CONTROL", "roce_disable", "ROCE_DISABLE", "ROCE_DISABLE(1)"),
])
def test_values_as_mlxconfig_takes_and_prints_them(name, raw, parsed, shown):
    param = nvconfig.catalogue("connectx-7", 1, True)[name]
    assert param.parse(raw) == parsed and param.show(parsed) == shown


@pytest.mark.parametrize("name, raw, message", [
    ("CNP_DSCP_P1", "64", "The value 64 is not valid,  as its size is 6 bits"),
    ("CNP_802P_PRIO_P1", "8", "The value 8 is not valid,  as its size is 3 bits"),
    ("ROCE_CC_PRIO_MASK_P1", "x", "Cannot parse the value"), ("LINK_TYPE_P1", "3", "Unknown value 3"),
    ("SRIOV_EN", "yes", "Unknown value yes"), ("NUM_OF_VFS", "128", "The value 128 is above the maximum 127 of NUM_OF_VFS"),
])
def test_values_refused(make_node, name, raw, message):
    node = make_node("dgx-h100")
    assert errno_of(node.fw_set, "0000:18:00.0", {name: raw}) == (errno.EINVAL, message)


def test_max_acc_out_read_appears_once_advanced_pci_settings_is_staged(make_node):
    node = make_node("dgx-h100")
    card = node.card_by_bdf("0000:18:00.0")
    params = node.fw_params(card)
    assert "MAX_ACC_OUT_READ" not in nvconfig.listed(params, card.fw_next)
    assert errno_of(node.fw_set, "0000:18:00.0", {"MAX_ACC_OUT_READ": "44"})[1] == "Unknown Parameter: MAX_ACC_OUT_READ"
    # validating both in one call still refuses: the listing is the one before the call
    assert errno_of(node.fw_set, "0000:18:00.0", {"ADVANCED_PCI_SETTINGS": "1", "MAX_ACC_OUT_READ": "44"})[0] == errno.EINVAL
    node.fw_set("0000:18:00.0", {"ADVANCED_PCI_SETTINGS": "True"})
    assert "MAX_ACC_OUT_READ" in nvconfig.listed(params, card.fw_next)
    assert node.fw_set("0000:18:00.0", {"MAX_ACC_OUT_READ": "44"}) == {"MAX_ACC_OUT_READ": (0, 44)}
    assert card.fw_current["ADVANCED_PCI_SETTINGS"] is False and card.fw_next["MAX_ACC_OUT_READ"] == 44


def test_fw_reset_makes_next_current_for_that_card_only_and_restarts_its_driver(make_node):
    node = make_node("dgx-h100")
    node.modprobe("mlx5_ib")
    node.write("sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", "2")
    node.advance()
    assert "0000:18:00.2" in node.devices
    cap, devctl, size = config.read_request(node.pci_config("0000:18:00.0"))
    assert size == 512
    node.pci_config_write("0000:18:00.0", cap + config.EXP_DEVCTL, config.with_size(devctl, 4096).to_bytes(2, "little"))
    assert config.read_request(node.pci_config("0000:18:00.0"))[2] == 4096
    node.fw_set("0000:18:00.0", {"NUM_OF_VFS": "8", "CNP_DSCP_P1": "26"})
    node.fw_set("0000:40:00.0", {"NUM_OF_VFS": "4"})
    result = node.fw_reset("0000:18:00.0")
    assert result == {"functions": ["0000:18:00.0"], "applied": {"NUM_OF_VFS": [16, 8], "CNP_DSCP_P1": [48, 26]}}
    assert node.read("sys/bus/pci/devices/0000:18:00.0/sriov_totalvfs") == "8\n"
    assert node.read("sys/bus/pci/devices/0000:18:00.0/sriov_numvfs") == "0\n" and "0000:18:00.2" not in node.devices
    # PCI reset: configuration space back at its reset values (MaxReadReq 512)
    assert config.read_request(node.pci_config("0000:18:00.0"))[2] == 512
    # the driver probed again: netdev and RDMA device are back
    assert "ibp24s0" in node.readdir("sys/class/net") and node.ibdevs
    # the other card keeps its staged value pending
    assert node.read("sys/bus/pci/devices/0000:40:00.0/sriov_totalvfs") == "16\n"
    assert node.card_by_bdf("0000:40:00.0").fw_next["NUM_OF_VFS"] == 4
    assert errno_of(node.fw_reset, "0000:18:00.0", 4)[0] == errno.EINVAL
    assert errno_of(node.fw_reset, "0000:1b:00.0")[0] == errno.ENODEV


def run(mount, tool, *args, stdin=None):
    env = dict(os.environ, HWSIM_ROOT=str(mount.root))
    return subprocess.run([str(SHIMS / tool), *args], env=env, capture_output=True, text=True, input=stdin, check=False)


def _line(path, prefix):
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith(prefix)][0]


def test_layouts_are_the_real_tools(dgx):
    """Header lines byte for byte as the real outputs; parameter lines with the same columns."""
    query = run(dgx, "mlxconfig", "-d", "0000:18:00.0", "q").stdout.splitlines()
    assert _line(REAL / "connectx7-q-next-boot.txt", "Configurations:") in query
    assert "        LINK_TYPE_P1                                IB(1)               " in query
    assert "Device type:        ConnectX7           " in query
    extended = run(dgx, "mstconfig", "-e", "-d", "0000:18:00.0", "q").stdout.splitlines()
    assert _line(REAL / "connectx6lx-e-q.txt", "Configurations:") in extended
    assert "         PROG_PARSE_GRAPH                    False(0)        False(0)        False(0)        " in extended
    refused = run(dgx, "mstconfig", "-d", "0000:18:00.0", "-y", "set", "BOGUS=1")
    assert refused.returncode == 1
    real = (REAL / "connectx6dx-set-unknown-parameter.txt").read_text(encoding="utf-8").splitlines()
    assert refused.stdout.splitlines()[-2:] == [real[-2], "-E- Unknown Parameter: BOGUS"]
    staged = run(dgx, "mlxconfig", "-d", "0000:18:00.0", "-y", "set", "CNP_DSCP_P1=26")
    sample = (REAL / "connectx6-set-boot-options.txt").read_text(encoding="utf-8").splitlines()
    assert staged.returncode == 0 and staged.stdout.splitlines()[-6:] == [
        sample[-9], "        CNP_DSCP_P1                                 48                   26                  "] + sample[-4:]


def test_mlxfwreset_applies_the_staged_values(dgx):
    assert run(dgx, "mlxconfig", "-d", "0000:29:00.0", "-y", "set", "LINK_TYPE_P2=IB").returncode == 0
    assert "enp41s0f1np1" in os.listdir(dgx.root / "sys/class/net")
    asked = run(dgx, "mlxfwreset", "-d", "0000:29:00.1", "reset", stdin="n\n")
    assert asked.returncode == 1 and "Continue with reset?[y/N] " in asked.stdout
    done = run(dgx, "mstfwreset", "-d", "0000:29:00.1", "--level", "3", "-y", "reset")
    assert done.returncode == 0 and done.stdout.splitlines() == [
        "", "Requested reset level for device, 0000:29:00.1:", "", "3: Driver restart and PCI reset",
        "Continue with reset?[y/N] y", "-I- Sending Reset Command To Fw             -Done",
        "-I- Stopping Driver                         -Done", "-I- Resetting PCI                           -Done",
        "-I- Starting Driver                         -Done", "-I- Restarting MST                          -Skipped",
        "-I- FW was loaded successfully."]
    assert (dgx.root / "sys/bus/pci/devices/0000:29:00.1/class").read_text(encoding="utf-8") == "0x020700\n"
    assert "enp41s0f1np1" not in os.listdir(dgx.root / "sys/class/net")
    query = run(dgx, "mlxconfig", "-e", "-d", "0000:29:00.0", "q").stdout
    assert "        LINK_TYPE_P2                                IB(1)                IB(1)                IB(1)" in query
    assert "*       LINK_TYPE_P1                                IB(1)                ETH(2)               ETH(2)" in query
    assert run(dgx, "mlxfwreset", "-d", "0000:29:00.0", "-l", "0", "-y", "reset").returncode == 1
    assert run(dgx, "mlxfwreset", "-d", "0000:1b:00.0", "-y", "reset").returncode == 1
