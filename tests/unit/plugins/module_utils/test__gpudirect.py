"""GPUDirect RDMA decisions: the NVIDIA banner (real wordings), DMA-BUF capability, method choice, the modprobe
failure diagnosis (kmod's real message texts), rendered files and the facts view."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _gpudirect
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot

# banners as public documents show them (proprietary 550.54.14 on Debian 12; open 555.42.02 and 560.35.03)
PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n")
OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.42.02  Release Build  (dvs-builder@U16-I3-A03-02-4)"
        "  Mon May 13 17:10:33 UTC 2024\nGCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n")
OPEN_VGPU = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (VirtualGPU)\n"
OPEN_ARM = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.10  Release Build  (dvs-builder@x)\n"


@pytest.mark.parametrize("text, expected", [
    (PROPRIETARY, {"version": "550.54.14", "open": False, "arch": "x86_64"}),
    (OPEN, {"version": "555.42.02", "open": True, "arch": "x86_64"}),
    (OPEN_VGPU, {"version": "560.35.03", "open": True, "arch": "x86_64"}),
    (OPEN_ARM, {"version": "570.86.10", "open": True, "arch": "aarch64"}),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  367.57  Mon Oct  3 20:37:01 PDT 2016\n",
     {"version": "367.57", "open": False, "arch": "x86_64"}),
    ("something else\n", {"version": None, "open": None, "arch": None}),
    (None, None),
])
def test_parse_nvidia_version(text, expected):
    assert _gpudirect.parse_nvidia_version(text) == expected


@pytest.mark.parametrize("release, expected", [
    ("6.1.0-28-amd64", (6, 1, 0)), ("5.12.0", (5, 12, 0)), ("5.4.0-150-generic", (5, 4, 0)),
    ("6.8.0-45-generic", (6, 8, 0)), ("4.18.0-553.el8_10.x86_64", (4, 18, 0)), ("6.18", (6, 18, 0)), ("x", None),
])
def test_kernel_version(release, expected):
    assert _gpudirect.kernel_version(release) == expected


@pytest.mark.parametrize("text, release, capable, words", [
    (OPEN, "6.1.0-28-amd64", True, "open GPU kernel modules 555.42.02"),
    (OPEN, "5.12.0-1", True, "open GPU"),
    (OPEN, "5.11.22", False, "older than 5.12"),
    (OPEN, "4.18.0-553.el8_10.x86_64", False, "older than 5.12"),
    (PROPRIETARY, "6.8.0-45-generic", False, "proprietary kernel module"),
    (None, "6.1.0", False, "not loaded"),
    ("garbled\n", "6.1.0", False, "not recognised"),
    (OPEN, "weird", False, "does not parse"),
])
def test_dmabuf_capable(text, release, capable, words):
    ok, why = _gpudirect.dmabuf_capable(_gpudirect.parse_nvidia_version(text), release)
    assert ok is capable and words in why


@pytest.mark.parametrize("requested, text, ofed, method", [
    ("auto", OPEN, False, "dmabuf"),
    ("auto", OPEN, True, "dmabuf"),
    ("auto", PROPRIETARY, True, "peermem"),
    ("auto", None, True, "peermem"),
    ("peermem", OPEN, False, "peermem"),
    ("dmabuf", OPEN, False, "dmabuf"),
])
def test_choose_method(requested, text, ofed, method):
    assert _gpudirect.choose_method(requested, _gpudirect.parse_nvidia_version(text), "6.1.0-28-amd64", ofed)[0] == method


def test_choose_method_refusals():
    proprietary = _gpudirect.parse_nvidia_version(PROPRIETARY)
    with pytest.raises(ConflictError, match="DMA-BUF GPUDirect RDMA is not possible here: the NVIDIA driver 550.54.14"):
        _gpudirect.choose_method("dmabuf", proprietary, "6.1.0", True)
    with pytest.raises(ConflictError, match="no GPUDirect RDMA path.*inbox ib_core") as info:
        _gpudirect.choose_method("auto", proprietary, "6.1.0", False)
    assert info.value.details == {"dmabuf_capable": False, "ofed": False}
    with pytest.raises(InputError, match="method must be one of"):
        _gpudirect.choose_method("gdrcopy", proprietary, "6.1.0", True)


# kmod's messages, word for word (tools/modprobe.c)
EINVAL = "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\n"
MISSING = "modprobe: FATAL: Module nvidia_peermem not found in directory /lib/modules/6.1.0-28-amd64\n"
SYMBOL = "modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module, or unknown parameter (see dmesg)\n"


@pytest.mark.parametrize("stderr, kind, words", [
    (EINVAL, "einval", ["EINVAL (Invalid argument)", "built before DOCA-OFED", "rebuild the NVIDIA kernel modules",
                        "dkms install nvidia/<version>", "method=dmabuf", "Nothing was persisted"]),
    (MISSING, "missing", ["not installed for the running kernel", "R470", "Nothing was persisted"]),
    (SYMBOL, "unknown_symbol", ["restart openibd", "Nothing was persisted"]),
    ("modprobe: ERROR: could not insert 'nvidia_peermem': Operation not permitted\n", "other",
     ["rc=1", "Operation not permitted"]),
])
def test_diagnose_load(stderr, kind, words):
    diagnosis = _gpudirect.diagnose_load(1, stderr)
    assert diagnosis["kind"] == kind
    for word in words:
        assert word in diagnosis["message"]


def test_diagnose_einval_without_ofed_says_so():
    assert "no MLNX/DOCA-OFED is installed" in _gpudirect.diagnose_load(1, EINVAL, ofed_present=False)["message"]
    assert "no MLNX/DOCA-OFED" not in _gpudirect.diagnose_load(1, EINVAL)["message"]


def test_rendered_files():
    assert _gpudirect.render_modules_load().splitlines()[-1] == "nvidia_peermem"
    assert all(line.startswith("#") for line in _gpudirect.render_modules_load().splitlines()[:-1])
    dropin = _gpudirect.render_openibd_dropin("/usr/sbin/modprobe")
    assert "[Service]\nExecStartPost=-/usr/sbin/modprobe nvidia_peermem\n" in dropin


@pytest.mark.parametrize("method, capable, loaded, active", [
    ("peermem", False, True, "peermem"), ("dmabuf", True, False, "dmabuf"), ("dmabuf", True, True, "peermem"),
    ("peermem", True, False, "none"), ("dmabuf", False, False, "none"),
])
def test_active_path(method, capable, loaded, active):
    assert _gpudirect.active_path(method, capable, loaded) == active


def write(root, path, text):
    local = root / path.lstrip("/")
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(text, encoding="utf-8")


def test_gpudirect_facts(tmp_path):
    write(tmp_path, "/proc/driver/nvidia/version", OPEN)
    write(tmp_path, "/proc/sys/kernel/osrelease", "6.1.0-28-amd64\n")
    write(tmp_path, "/etc/modules-load.d/gpu.conf", "# x\nnvidia-peermem ; legacy\n")
    facts = _gpudirect.gpudirect_facts(HostRoot(str(tmp_path)))
    assert facts == {"active": "dmabuf", "peermem_loaded": False, "peermem_persisted": True, "dmabuf_capable": True,
                     "dmabuf_reason": "open GPU kernel modules 555.42.02 on kernel 6.1.0-28-amd64",
                     "nvidia_driver": {"version": "555.42.02", "open": True}, "kernel_release": "6.1.0-28-amd64",
                     "openibd": False, "openibd_dropins": []}
    (tmp_path / "sys/module/nvidia_peermem").mkdir(parents=True)
    write(tmp_path, "/proc/driver/nvidia/version", PROPRIETARY)
    facts = _gpudirect.gpudirect_facts(HostRoot(str(tmp_path)))
    assert facts["active"] == "peermem" and facts["dmabuf_capable"] is False


def test_gpudirect_facts_without_driver(tmp_path):
    facts = _gpudirect.gpudirect_facts(HostRoot(str(tmp_path)))
    assert facts["active"] == "none" and facts["nvidia_driver"] is None and facts["peermem_persisted"] is False
