"""Driver-stack rules of the simulator: OFED modules on disk vs loaded, module versions, the NVIDIA banner
(open vs proprietary), nvidia_peermem's OFED peer-memory symbols (stub EINVAL, symbol-version mismatch, rebuild),
modules removed from disk, and the kmod messages of the modprobe shim."""

import errno
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

import hwsim
from hwsim.state import ofed_module_version

SHIMS = pathlib.Path(hwsim.__file__).resolve().parent / "shims"

DOCA = "OFED-internal-24.10-1.1.4.0.200"
DOCA_NEW = "OFED-internal-25.10-1.2.8.0"
INBOX_IB = """
name: gpu-ib-inbox
kernel: {release: 6.1.0-28-amd64}
numa: [{id: 0, cpus: '0-7'}]
modules:
  catalogue:
    nvidia_peermem: {built_against_ofed: null}
  loaded: [ib_core, ib_uverbs, mlx5_core, mlx5_ib, ib_ipoib, nvidia]
nvidia_driver: 550.127.05
pci:
  - host_bridge: "0000:00"
    numa_node: 0
    children:
      - nic: "0000:18:00.0"
        firmware: {SRIOV_EN: true, NUM_OF_VFS: 4, LINK_TYPE_P1: IB}
      - gpu: "0000:1b:00.0"
"""


def errno_of(func, *args):
    with pytest.raises(OSError) as info:
        func(*args)
    return info.value.errno


@pytest.fixture
def spec_file(tmp_path):
    def write(text=INBOX_IB, **changes):
        data = yaml.safe_load(text)
        data.update(changes)
        path = tmp_path / f"{data['name']}.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path
    return write


def test_ofed_module_version_keeps_release_and_three_build_numbers():
    assert ofed_module_version("OFED-internal-24.10-1.1.4.0.200") == "24.10-1.1.4"
    assert ofed_module_version("MLNX_OFED_LINUX-5.4-3.1.0.0") == "5.4-3.1.0"
    assert ofed_module_version("OFED-internal-25.10-1.7.1") == "25.10-1.7.1"


def test_nvidia_banner_proprietary_and_open(spec_file):
    proprietary = hwsim.Node(hwsim.load(spec_file()))
    text = proprietary.read("proc/driver/nvidia/version")
    assert text.startswith("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  ")
    opened = hwsim.Node(hwsim.load(spec_file(nvidia_kernel_module="open")))
    assert opened.read("proc/driver/nvidia/version").startswith(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.127.05  Release Build")
    assert opened.read("sys/module/nvidia/version") == "550.127.05\n"
    opened.rmmod("nvidia")
    assert errno_of(opened.read, "proc/driver/nvidia/version") == errno.ENOENT


@pytest.mark.parametrize("changes, message", [
    ({"nvidia_kernel_module": "gpl"}, "must be proprietary or open"),
    ({"ofed": "24.10-1.1.4"}, "is not an `ofed_info -s` version"),
])
def test_spec_validation(spec_file, changes, message):
    with pytest.raises(hwsim.SpecError, match=message):
        hwsim.load(spec_file(**changes))


def test_bad_built_against_is_rejected(spec_file):
    with pytest.raises(hwsim.SpecError, match="built_against_ofed"):
        hwsim.load(spec_file(INBOX_IB.replace("built_against_ofed: null", "built_against_ofed: '5.4'")))


def test_inbox_modules_have_no_version_and_no_ofed_sysfs(spec_file):
    node = hwsim.Node(hwsim.load(spec_file()))
    assert errno_of(node.read, "sys/module/mlx5_core/version") == errno.ENOENT
    node.write("sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", "1")
    assert "sriov" not in node.readdir("sys/bus/pci/devices/0000:18:00.0")


def test_ofed_on_disk_applies_to_modules_loaded_afterwards(spec_file):
    node = hwsim.Node(hwsim.load(spec_file()))
    node.set_ofed(DOCA)
    assert errno_of(node.read, "sys/module/mlx5_core/version") == errno.ENOENT, "loaded modules are still inbox"
    for name in ("ib_ipoib", "mlx5_ib"):
        node.rmmod(name)
    node.modprobe("mlx5_ib")
    assert node.read("sys/module/mlx5_core/version") == "24.10-1.1.4\n"
    assert node.read("sys/module/ib_core/version") == "24.10-1.1.4\n"
    node.write("sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", "1")
    assert node.readdir("sys/bus/pci/devices/0000:18:00.0/sriov") == ["0"]
    node.power_on()
    assert node.read("sys/module/mlx5_core/version") == "24.10-1.1.4\n", "the disk survives a reboot"
    node.set_ofed(None)
    node.power_on()
    assert errno_of(node.read, "sys/module/mlx5_core/version") == errno.ENOENT
    assert errno_of(node.set_ofed, "24.10") == errno.EINVAL


def test_peermem_stub_then_rebuild_then_ofed_upgrade(spec_file):
    node = hwsim.Node(hwsim.load(spec_file()))
    assert errno_of(node.modprobe, "nvidia_peermem") == errno.EINVAL, "built without OFED symbols: stub init"
    node.set_ofed(DOCA)
    assert errno_of(node.modprobe, "nvidia_peermem") == errno.EINVAL, "still the stub: built before OFED"
    assert node.rebuild_module("nvidia_peermem") == DOCA
    assert errno_of(node.modprobe, "nvidia_peermem") == errno.EINVAL, "ib_core running is still the inbox one"
    node.power_on()
    assert node.modprobe("nvidia_peermem") == ["nvidia_peermem"]
    assert node.read("sys/module/nvidia_peermem/parameters/persistent_api_support") == "1\n"
    assert node.read("sys/module/nvidia_peermem/version") == "550.127.05\n"
    node.set_ofed(DOCA_NEW)
    node.power_on()
    assert errno_of(node.modprobe, "nvidia_peermem") == errno.EINVAL, "symbol versions disagree after an upgrade"
    node.rebuild_module("nvidia_peermem")
    node.modprobe("nvidia_peermem")


def test_spec_without_built_against_keeps_loading(make_node):
    node = make_node("roce-cx6dx")
    assert node.modprobe("nvidia_peermem") == ["nvidia_peermem"]


def test_module_removed_from_disk_stays_loaded_until_unloaded(make_node):
    node = make_node("roce-cx6dx")
    node.set_module("nvidia_uvm", absent=True)
    assert "nvidia_uvm" in node.read("proc/modules")
    node.rmmod("nvidia_uvm")
    assert errno_of(node.modprobe, "nvidia_uvm") == errno.ENOENT
    node.set_module("nvidia_uvm", absent=False)
    node.modprobe("nvidia_uvm")
    node.set_module("nvidia_peermem", load_error="ENOENT")
    assert errno_of(node.modprobe, "nvidia_peermem") == errno.ENOENT
    with pytest.raises(ValueError):
        node.set_module("nvidia_peermem", colour="red")
    assert errno_of(lambda: node.set_module("no_such_module", absent=True)) == errno.ENOENT


def test_catalogue_changes_do_not_leak_into_the_spec(spec_file):
    spec = hwsim.load(spec_file())
    node = hwsim.Node(spec)
    node.set_module("nvidia_peermem", absent=True)
    assert spec.modules["nvidia_peermem"].on_disk is True
    assert hwsim.Node(spec).on_disk("nvidia_peermem")


def shim(mount, tool, *args, path=None):
    env = dict(os.environ, HWSIM_ROOT=str(mount.root))
    if path is not None:
        env["PATH"] = path
    # through this interpreter: a PATH without python must still run the shim itself
    return subprocess.run([sys.executable, str(SHIMS / tool), *args], env=env, capture_output=True, text=True,
                          check=False)


@pytest.fixture
def ib_mount(spec_file, tmp_path):
    reason = hwsim.fuse_available()
    if reason:
        pytest.skip(f"FUSE unavailable: {reason}")
    with hwsim.mounted(spec_file(), tmp_path / "mnt") as mount:
        yield mount


def test_modprobe_shim_messages_are_kmods(ib_mount):
    einval = shim(ib_mount, "modprobe", "nvidia_peermem")
    assert einval.returncode == 1
    assert einval.stderr == "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\n"
    assert shim(ib_mount, "modprobe", "mlx5_core").stderr == ""           # already loaded: silent success
    assert shim(ib_mount, "modprobe", "mlx5_core").returncode == 0
    ib_mount.call({"cmd": "module_set", "name": "nvidia_peermem", "absent": True})
    missing = shim(ib_mount, "modprobe", "nvidia_peermem")
    assert missing.stderr == "modprobe: FATAL: Module nvidia_peermem not found in directory /lib/modules/6.1.0-28-amd64\n"
    ib_mount.call({"cmd": "module_set", "name": "nvidia_peermem", "absent": False, "load_error": "ENOENT"})
    symbol = shim(ib_mount, "modprobe", "nvidia_peermem")
    assert symbol.stderr == ("modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module, "
                             "or unknown parameter (see dmesg)\n")


def test_control_commands_for_a_driver_install(ib_mount):
    assert shim(ib_mount, "ofed_info", "-s", path="/nonexistent").returncode == 1
    ib_mount.call({"cmd": "ofed_set", "version": DOCA})
    assert shim(ib_mount, "ofed_info", "-s", path="/nonexistent").stdout == DOCA + ":\n"
    ib_mount.call({"cmd": "reset"})
    assert ib_mount.call({"cmd": "module_rebuild", "name": "nvidia_peermem"}) == {"built_against_ofed": DOCA}
    assert shim(ib_mount, "modprobe", "nvidia_peermem").returncode == 0
    modules = ib_mount.call({"cmd": "modules"})
    assert modules["ofed"] == DOCA and modules["versions"]["mlx5_core"] == "24.10-1.1.4"
    assert (ib_mount.root / "sys/module/nvidia_peermem/version").read_text(encoding="utf-8") == "550.127.05\n"
    bad = ib_mount.ctl({"cmd": "ofed_set", "version": "garbage"})
    assert bad["ok"] is False and bad["errno"] == "EINVAL"


def test_ofed_info_shim_hands_over_to_an_installed_script(ib_mount, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "ofed_info"
    script.write_text('#!/bin/sh\nif [ "X$1" = "X-s" ]; then echo OFED-internal-25.10-1.2.8:; exit 0; fi\n',
                      encoding="utf-8")
    script.chmod(0o755)
    path = "%s:%s:/usr/bin:/bin" % (SHIMS, bindir)
    assert shim(ib_mount, "ofed_info", "-s", path=path).stdout == "OFED-internal-25.10-1.2.8:\n"
