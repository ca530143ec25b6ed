"""Secure Boot read from efivarfs through a HostRoot: the real variable layout (4 attribute bytes, then the data
byte), mokutil's rules (SetupMode, shim's MokSBStateRT), a node without EFI, and damaged or unreadable files, which
give an unknown state and never a traceback."""

import os

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _ofed, _secureboot
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot

# NV + BS + RT access, as the firmware sets them on SecureBoot / SetupMode
ATTRS = b"\x06\x00\x00\x00"


def efi_node(root, secure_boot=None, setup_mode=b"\x00", mok=None, extra=True):
    efivars = root / "sys" / "firmware" / "efi" / "efivars"
    efivars.mkdir(parents=True)
    if extra:  # a mounted efivarfs always has other variables (BootOrder ...)
        (efivars / ("BootOrder-" + _secureboot.GLOBAL_GUID)).write_bytes(b"\x07\x00\x00\x00\x01\x00")
    if secure_boot is not None:
        (efivars / ("SecureBoot-" + _secureboot.GLOBAL_GUID)).write_bytes(secure_boot)
    if setup_mode is not None:
        data = ATTRS + setup_mode if len(setup_mode) == 1 else setup_mode
        (efivars / ("SetupMode-" + _secureboot.GLOBAL_GUID)).write_bytes(data)
    if mok is not None:
        (efivars / ("MokSBStateRT-" + _secureboot.SHIM_GUID)).write_bytes(mok)
    return HostRoot(str(root))


@pytest.mark.parametrize("data, expected", [
    (b"\x06\x00\x00\x00\x01", 1), (b"\x06\x00\x00\x00\x00", 0), (b"\x06\x00\x00\x00", None), (b"", None),
    (None, None), (b"\x06\x00\x00\x00\x01\x00", 1),
])
def test_efivar_value(data, expected):
    assert _secureboot.efivar_value(data) == expected


def test_enabled(tmp_path):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, ATTRS + b"\x01"))
    assert state["efi"] and state["enabled"] is True and state["setup_mode"] is False
    assert state["source"].endswith("SecureBoot-8be4df61-93ca-11d2-aa0d-e0a9e80b7c1c")
    assert "SecureBoot enabled" in state["reason"]


def test_disabled(tmp_path):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, ATTRS + b"\x00"))
    assert state["efi"] and state["enabled"] is False and state["reason"] == "SecureBoot disabled"


def test_setup_mode_is_not_enforced(tmp_path):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, ATTRS + b"\x01", setup_mode=b"\x01"))
    assert state["enabled"] is False and "Setup Mode" in state["reason"]


def test_shim_validation_disabled(tmp_path):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, ATTRS + b"\x01", mok=ATTRS + b"\x01"))
    assert state["enabled"] is False and state["shim_validation"] is False and "shim" in state["reason"]


def test_no_efi(tmp_path):
    state = _secureboot.secure_boot_state(HostRoot(str(tmp_path)))
    assert state == {"efi": False, "enabled": False, "setup_mode": None, "shim_validation": None, "source": None,
                     "reason": "not booted by UEFI (no /sys/firmware/efi): no Secure Boot"}


def test_efi_without_the_variable_has_no_secure_boot(tmp_path):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, None))
    assert state["efi"] and state["enabled"] is False and "does not support Secure Boot" in state["reason"]


def test_efivarfs_not_mounted_is_unknown(tmp_path):
    (tmp_path / "sys" / "firmware" / "efi" / "efivars").mkdir(parents=True)
    state = _secureboot.secure_boot_state(HostRoot(str(tmp_path)))
    assert state["efi"] and state["enabled"] is None and "not mounted" in state["reason"]


@pytest.mark.parametrize("data", [b"\x06\x00\x00\x00", b"\x06", b""])
def test_short_file_is_unknown(tmp_path, data):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, data))
    assert state["enabled"] is None and "shorter than" in state["reason"]


def test_other_value_is_unknown(tmp_path):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, ATTRS + b"\x02"))
    assert state["enabled"] is None and "neither 0 nor 1" in state["reason"]


def test_setup_mode_unreadable_still_enforced(tmp_path):
    state = _secureboot.secure_boot_state(efi_node(tmp_path, ATTRS + b"\x01", setup_mode=b"\x06\x00"))
    assert state["enabled"] is True and state["setup_mode"] is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file")
def test_unreadable_variable_is_unknown_and_reported(tmp_path):
    host = efi_node(tmp_path, ATTRS + b"\x01")
    path = tmp_path / "sys" / "firmware" / "efi" / "efivars" / ("SecureBoot-" + _secureboot.GLOBAL_GUID)
    path.chmod(0)
    problems = []
    state = _secureboot.secure_boot_state(host, problems)
    assert state["enabled"] is None and problems and problems[0]["path"] == _secureboot.SECURE_BOOT


def test_variable_that_is_a_directory_is_unknown_and_reported(tmp_path):
    host = efi_node(tmp_path, None)
    (tmp_path / "sys" / "firmware" / "efi" / "efivars" / ("SecureBoot-" + _secureboot.GLOBAL_GUID)).mkdir()
    problems = []
    state = _secureboot.secure_boot_state(host, problems)
    assert state["enabled"] is None and "unreadable" in state["reason"]
    assert [p["path"] for p in problems] == [_secureboot.SECURE_BOOT]


def test_ofed_facts_carry_the_state(tmp_path):
    assert _ofed.ofed_facts(efi_node(tmp_path / "efi", ATTRS + b"\x01"))["secure_boot"]["enabled"] is True
    (tmp_path / "bios").mkdir()
    assert _ofed.ofed_facts(HostRoot(str(tmp_path / "bios")))["secure_boot"]["efi"] is False
