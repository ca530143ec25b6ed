"""PCI configuration space: the sysfs `config` file, link attributes read from it, ACS, the degraded archetype and the
setpci shim (issue 22 item 2, issue 19 item 4)."""

import ast
import errno
import json
import os
import stat
import subprocess
import sys

import pytest

import hwsim
from hwsim import control, pciconf
from conftest import SHIMS
from hwsim_helpers import errno_of

NIC, GPU, DSP, USP, ROOT = "0000:18:00.0", "0000:1b:00.0", "0000:17:00.0", "0000:16:00.0", "0000:15:01.0"


def word(data, offset):
    """16-bit little-endian register."""
    return int.from_bytes(data[offset:offset + 2], "little")


def exp(data, reg):
    """A PCI Express capability register, found by walking the list as lspci does."""
    caps = {cap_id: pos for kind, cap_id, pos in pciconf.walk_capabilities(data) if kind == "cap"}
    return word(data, caps[pciconf.PCI_CAP_ID_EXP] + reg)


@pytest.fixture
def dgx(make_node):
    """dgx-h100 on a fake clock."""
    return make_node("dgx-h100")


def test_every_function_has_config_of_the_kernel_size_and_mode(dgx):
    for bdf, dev in dgx.devices.items():
        canon, entry = dgx.lookup(f"sys/bus/pci/devices/{bdf}/config")
        assert canon.endswith(f"{bdf}/config")
        assert entry.size == 4096 and entry.mode == 0o644 and entry.binary
        data = dgx.pci_config(bdf)
        assert len(data) == 4096
        assert word(data, 0) == int(dgx.read(f"sys/bus/pci/devices/{bdf}/vendor"), 16)
        assert word(data, 2) == int(dgx.read(f"sys/bus/pci/devices/{bdf}/device"), 16)
        assert int.from_bytes(data[9:12], "little") == int(dgx.read(f"sys/bus/pci/devices/{bdf}/class"), 16)
        assert data[0x0E] & 0x7F == (1 if dev.kind == "bridge" else 0)
        assert word(data, 6) & pciconf.PCI_STATUS_CAP_LIST


def test_capability_list_walk_like_lspci(dgx):
    endpoint = pciconf.walk_capabilities(dgx.pci_config(NIC))
    assert endpoint == [("cap", 0x01, 0x40), ("cap", 0x10, 0x60)]
    assert dgx.pci_config(NIC)[0x34] == 0x40
    switch_port = pciconf.walk_capabilities(dgx.pci_config(DSP))
    assert switch_port == [("cap", 0x01, 0x40), ("cap", 0x10, 0x60), ("cap", 0x0D, 0xA0), ("ecap", 0x0D, 0x100)]
    assert [c[1] for c in pciconf.walk_capabilities(dgx.pci_config(ROOT))] == [0x01, 0x10, 0x0D]
    assert pciconf.walk_capabilities(dgx.pci_config(USP))[-1][0] == "cap"  # no ACS on an upstream port
    types = {bdf: (exp(dgx.pci_config(bdf), pciconf.PCI_EXP_FLAGS) >> 4) & 0xF for bdf in (ROOT, USP, DSP, NIC, GPU)}
    assert types == {ROOT: 4, USP: 5, DSP: 6, NIC: 0, GPU: 0}


def test_device_control_power_on_values(dgx):
    data = dgx.pci_config(NIC)
    devctl = exp(data, pciconf.PCI_EXP_DEVCTL)
    assert (devctl >> 12) & 7 == 2  # MaxReadReq 512 bytes
    assert (devctl >> 5) & 7 == 1  # MaxPayload 256 bytes
    assert exp(data, pciconf.PCI_EXP_DEVCAP) & 7 == 2  # MaxPayload supported 512 bytes


def test_bridge_bus_numbers(dgx):
    data = dgx.pci_config(ROOT)
    assert (data[0x18], data[0x19], data[0x1A]) == (0x15, 0x16, 0x1B)
    assert tuple(dgx.pci_config(DSP)[0x18:0x1B]) == (0x17, 0x18, 0x18)


def test_reads_at_any_offset_and_size(dgx):
    full = dgx.pci_config(NIC)
    assert dgx.pci_config(NIC, 0x6A, 2) == full[0x6A:0x6C]
    assert dgx.pci_config(NIC, 4095, 8) == full[4095:]
    assert dgx.pci_config(NIC, 4096, 8) == b""


def test_writes_apply_to_writable_bits_only(dgx):
    devctl_at = 0x60 + pciconf.PCI_EXP_DEVCTL
    assert dgx.pci_config_write(NIC, devctl_at, (0x5930).to_bytes(2, "little")) == 2
    assert word(dgx.pci_config(NIC), devctl_at) == 0x5930
    assert dgx.read(f"sys/bus/pci/devices/{NIC}/current_link_width") == "16\n"
    before = dgx.pci_config(NIC)
    dgx.pci_config_write(NIC, 0, b"\x00" * 0x40)  # IDs, status, class, header, cap pointer: read-only
    after = dgx.pci_config(NIC)
    assert after[0:4] == before[0:4] and after[6:0x40] == before[6:0x40]
    assert word(after, 4) == 0  # Command is RW
    dgx.pci_config_write(NIC, 0x60, b"\xff" * 0x3C)
    data = dgx.pci_config(NIC)
    assert data[0x60:0x62] == before[0x60:0x62]  # capability id/next
    assert word(data, 0x60 + pciconf.PCI_EXP_LNKSTA) == word(before, 0x60 + pciconf.PCI_EXP_LNKSTA)
    assert word(data, devctl_at) == 0x7FFF


def test_write_past_the_end_and_straddling(dgx):
    path = f"sys/bus/pci/devices/{NIC}/config"
    assert errno_of(dgx.pwrite, path, b"\x00", 4096) == errno.EFBIG
    assert dgx.pwrite(path, b"\x00" * 8, 4092) == 4


def test_power_on_resets_config(dgx):
    dgx.pci_config_write(NIC, 0x68, (0x5930).to_bytes(2, "little"))
    dgx.power_on()
    assert word(dgx.pci_config(NIC), 0x68) == 0x2930


def test_link_attributes_come_from_link_registers(dgx):
    for bdf in (ROOT, USP, DSP, NIC, GPU):
        base = f"sys/bus/pci/devices/{bdf}"
        data = dgx.pci_config(bdf)
        status = exp(data, pciconf.PCI_EXP_LNKSTA)
        assert dgx.read(f"{base}/current_link_speed") == pciconf.SPEEDS[status & 0xF] + "\n"
        assert dgx.read(f"{base}/current_link_width") == f"{(status >> 4) & 0x3F}\n"
        assert dgx.read(f"{base}/max_link_speed") == "32.0 GT/s PCIe\n"
        assert dgx.read(f"{base}/max_link_width") == "16\n"


def test_degraded_archetype(make_node):
    node = make_node("dgx-h100-degraded")
    base = f"sys/bus/pci/devices/{NIC}"
    assert node.read(f"{base}/current_link_width") == "8\n"
    assert node.read(f"{base}/max_link_width") == "16\n"
    assert node.read(f"{base}/current_link_speed") == "32.0 GT/s PCIe\n"
    for bdf in (NIC, DSP):
        assert (exp(node.pci_config(bdf), pciconf.PCI_EXP_LNKSTA) >> 4) & 0x3F == 8
    assert node.read("sys/bus/pci/devices/0000:40:00.0/current_link_width") == "16\n"
    acs = {bdf: word(node.pci_config(bdf), 0x106) for bdf in ("0000:3f:00.0", "0000:3f:02.0", DSP)}
    assert acs == {"0000:3f:00.0": 0x1D, "0000:3f:02.0": 0x1D, DSP: 0}
    node.write(f"{base}/sriov_numvfs", "1")
    assert node.read("sys/bus/pci/devices/0000:18:00.1/current_link_width") == "8\n"


def test_acs_control_is_writable_within_the_capability(dgx):
    data = dgx.pci_config(DSP)
    assert word(data, 0x104) == 0x5F and word(data, 0x106) == 0
    dgx.pci_config_write(DSP, 0x106, b"\xff\xff")
    assert word(dgx.pci_config(DSP), 0x106) == 0x5F
    dgx.pci_config_write(DSP, 0x104, b"\x00\x00")
    assert word(dgx.pci_config(DSP), 0x104) == 0x5F
    assert word(dgx.pci_config(ROOT), 0x104) == 0x1F


def test_link_retrain_changes_both_ends(dgx):
    result = dgx.pci_link_set(DSP, speed="16.0 GT/s", width=4)
    assert result["devices"] == [DSP, NIC]
    assert dgx.read(f"sys/bus/pci/devices/{NIC}/current_link_speed") == "16.0 GT/s PCIe\n"
    assert dgx.read(f"sys/bus/pci/devices/{DSP}/current_link_width") == "4\n"


def test_vf_config(dgx):
    dgx.write(f"sys/bus/pci/devices/{NIC}/sriov_numvfs", "1")
    data = dgx.pci_config("0000:18:00.1")
    assert word(data, 0) == 0xFFFF and word(data, 2) == 0xFFFF  # SR-IOV: VF Vendor/Device ID read FFFFh
    assert dgx.read("sys/bus/pci/devices/0000:18:00.1/vendor") == "0x15b3\n"


def test_spec_errors():
    base = {"numa": [{"id": 0, "cpus": "0-3"}]}
    bad = [{"nic": "0000:01:00.0", "link": {"current_width": 3}}, {"nic": "0000:01:00.0", "link": {"current_speed": 7}},
           {"nic": "0000:01:00.0", "link": {"lanes": 4}}, {"nic": "0000:01:00.0", "acs": {"control": ["RR"]}},
           {"bridge": "0000:00:01.0", "acs": {"control": ["XX"]}}]
    for device in bad:
        with pytest.raises(hwsim.SpecError):
            hwsim.spec.parse({**base, "pci": [{"host_bridge": "0000:00", "numa_node": 0, "children": [device]}]})


def test_control_commands(dgx):
    reply = json.loads(control.handle(dgx, json.dumps({"cmd": "pci_config", "bdf": NIC, "offset": 0x68, "size": 2})))
    assert reply == {"ok": True, "result": {"data": "3029"}}
    reply = json.loads(control.handle(dgx, json.dumps({"cmd": "pci_config", "bdf": NIC, "offset": 0x68, "data": "3050"})))
    assert reply["result"] == {"written": 2}
    reply = json.loads(control.handle(dgx, json.dumps({"cmd": "pci_config", "bdf": NIC, "offset": 4096, "data": "00"})))
    assert reply["errno"] == "EFBIG"
    reply = json.loads(control.handle(dgx, json.dumps({"cmd": "pci_link_set", "bdf": NIC, "width": 8})))
    assert reply["result"]["width"] == 8
    assert json.loads(control.handle(dgx, json.dumps({"cmd": "pci_config", "bdf": "0000:00:00.0"})))["errno"] == "ENODEV"


def test_rendered_config_is_binary(tmp_path):
    hwsim.render("dgx-h100", tmp_path)
    path = tmp_path / "sys/bus/pci/devices" / NIC / "config"
    assert len(path.read_bytes()) == 4096 and stat.S_IMODE(os.stat(path).st_mode) == 0o644


# ------------------------------------------------------------------------------------------------ setpci shim
def setpci(root, *args):
    """Run the shim against a simulated root."""
    return subprocess.run([str(SHIMS / "setpci"), *args], env=dict(os.environ, HWSIM_ROOT=str(root)),
                          capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def dgx_mount_pci(dgx_mount):
    """The FUSE-mounted dgx-h100, freshly powered on."""
    dgx_mount.call({"cmd": "fault_clear"})
    dgx_mount.call({"cmd": "reset"})
    return dgx_mount


def test_setpci_read_and_masked_write_through_fuse(dgx_mount_pci):
    mnt = dgx_mount_pci
    root = mnt.root
    assert setpci(root, "-s", NIC, "CAP_EXP+8.w").stdout == "2930\n"
    assert setpci(root, "-s", "18:00.0", "CAP_EXP+12.w").stdout == "1105\n"  # Link Status: 32 GT/s x16, SLC
    write = setpci(root, "-s", NIC, "CAP_EXP+8.w=5000:7000")
    assert write.returncode == 0 and write.stdout == ""
    assert setpci(root, "-s", NIC, "CAP_EXP+8.w").stdout == "5930\n"
    assert mnt.call({"cmd": "pci_config", "bdf": NIC, "offset": 0x68, "size": 2})["data"] == "3059"
    assert setpci(root, "-s", DSP, "ECAP_ACS+6.w=1d").returncode == 0
    assert setpci(root, "-s", DSP, "ECAP_ACS+6.w").stdout == "001d\n"
    with open(root / "sys/bus/pci/devices" / NIC / "config", "rb") as handle:
        assert len(handle.read()) == 4096
    assert os.stat(root / "sys/bus/pci/devices" / NIC / "config").st_size == 4096
    mnt.call({"cmd": "reset"})


def test_setpci_errors(tmp_path):
    hwsim.render("dgx-h100", tmp_path)
    unknown = setpci(tmp_path, "-s", NIC, "CAP_FOO.w")
    assert unknown.returncode == 1
    assert unknown.stderr == 'setpci: Unknown register "CAP_FOO".\nTry `setpci --help\' for more information.\n'
    missing = setpci(tmp_path, "-s", NIC, "ECAP_ACS+6.w")
    assert missing.returncode == 1 and missing.stderr == (
        f"setpci: {NIC}: Instance #0 of Extended capability 000d not found - there are no capabilities with that id.\n")
    assert setpci(tmp_path, "-s", NIC, "3.w").stderr.startswith("setpci: Unaligned register address 03.")
    assert setpci(tmp_path, "-s", NIC, "CAP_EXP+8").stderr.startswith("setpci: Missing width.")
    assert setpci(tmp_path, "-s", NIC, "CAP_EXP+8.w=").stderr.startswith("setpci: Missing value.")
    assert setpci(tmp_path, "CAP_EXP+8.w").stderr.startswith("setpci: Filter specification expected.")
    nothing = setpci(tmp_path, "-s", "77:00.0", "COMMAND")
    assert nothing.returncode == 0 and nothing.stderr == "setpci: Warning: No devices selected for operation group 1.\n"
    assert setpci(tmp_path, "-s", NIC, "VENDOR_ID.w").stdout == "15b3\n"
    assert setpci(tmp_path, "-s", NIC, "0.l").stdout == "102115b3\n"
    assert setpci(tmp_path, "-s", NIC, "CAP10.b").stdout == "10\n"


def test_setpci_shim_is_executable_stdlib_only_python():
    shim = SHIMS / "setpci"
    assert os.access(shim, os.X_OK)
    text = shim.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env python\n")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            assert all(alias.name.split(".")[0] in sys.stdlib_module_names for alias in node.names)
        if isinstance(node, ast.ImportFrom):
            assert str(node.module).split(".", maxsplit=1)[0] in sys.stdlib_module_names
