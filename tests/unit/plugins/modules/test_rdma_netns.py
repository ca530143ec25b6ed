"""rdma_netns on a simulated node: persistence, the live switch and the kernel's EBUSY refusal, reboot."""

import os
import pathlib

import pytest
import yaml

import hwsim

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import initramfs
from ansible_collections.rdma.k8s_node.plugins.modules import rdma_netns
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.simnode import sim_node

CONF = "modprobe.d/rdma-k8s-node-ib_core.conf"


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        yield node


def run(monkeypatch, node, check=False, expect=None, **args):
    args.setdefault("host_root", str(node.root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, rdma_netns.main, args, check=check, diff=True, **kwargs)


def live_mode(node):
    return (node.root / "sys/module/ib_core/parameters/netns_mode").read_text().strip()


def test_check_mode_predicts_without_writing(monkeypatch, dgx):
    result = run(monkeypatch, dgx, check=True, mode="exclusive")
    assert result["changed"] is True
    assert [a["action"] for a in result["actions"]] == ["create_file", "run"]
    assert result["actions"][1]["target"] == "rdma system set netns exclusive"
    assert result["observed"]["live"] == "shared" and result["observed"]["persisted"] == "exclusive"
    assert "options ib_core netns_mode=0" in result["diff"]["after"]
    assert result["live_switch"] == "skipped"
    assert not (dgx.etc / CONF).exists()
    assert live_mode(dgx) == "Y"


def test_quiet_node_switches_live_and_persists(monkeypatch, dgx):
    result = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert result["live_switch"] == "switched" and result["reboot_required"] is False
    assert live_mode(dgx) == "N"
    assert (dgx.etc / CONF).read_text().endswith("options ib_core netns_mode=0\n")
    again = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert again["changed"] is False and again["live_switch"] == "not_needed"
    dgx.reboot()
    assert live_mode(dgx) == "N", "the persisted option must survive a power cycle"


def test_busy_node_persists_and_asks_for_reboot(monkeypatch, dgx):
    dgx.call({"cmd": "netns_add", "name": "cni-1234"})
    result = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert result["changed"] is True
    assert result["live_switch"] == "refused_busy" and result["reboot_required"] is True
    assert any("non-init network namespaces" in w for w in result.get("warnings", []))
    assert live_mode(dgx) == "Y"
    # a re-run does not loop on the refused switch: it tries once per run and keeps reporting
    again = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert again["reboot_required"] is True and [a["action"] for a in again["actions"]] == ["run"]
    dgx.reboot()
    after = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert after["changed"] is False and after["reboot_required"] is False
    assert after["observed"]["live"] == "exclusive"


def test_live_false_only_reports(monkeypatch, dgx):
    result = run(monkeypatch, dgx, mode="exclusive", live=False, initramfs="never")
    assert result["reboot_required"] is True and result["live_switch"] == "skipped"
    assert live_mode(dgx) == "Y"


def test_backup_files_map_the_edited_file_to_its_copy(monkeypatch, dgx):
    """backup_files is ``{edited path: backup path}``, as every module of the collection returns it (RETURN)."""
    created = run(monkeypatch, dgx, mode="shared", initramfs="never", backup=True)
    assert created["changed"] is True and created["backup_files"] == {}, "a new file has nothing to back up"
    assert run(monkeypatch, dgx, mode="exclusive", initramfs="never")["backup_files"] == {}  # backup=false
    check = run(monkeypatch, dgx, check=True, mode="shared", initramfs="never", backup=True)
    assert check["changed"] is True and check["backup_files"] == {}
    result = run(monkeypatch, dgx, mode="shared", initramfs="never", backup=True)
    [(edited, copy)] = result["backup_files"].items()
    assert edited == "/etc/" + CONF and copy.startswith(str(dgx.root) + edited + ".")
    assert pathlib.Path(copy).read_text().endswith("options ib_core netns_mode=0\n")
    again = run(monkeypatch, dgx, mode="shared", initramfs="never", backup=True)
    assert again["changed"] is False and again["backup_files"] == {}


def test_later_file_overriding_is_a_conflict(monkeypatch, dgx):
    (dgx.etc / "modprobe.d/sriov_network_operator_modules_config.conf").write_text("options ib_core netns_mode=1\n")
    failure = run(monkeypatch, dgx, mode="exclusive", expect=ModuleFail)
    assert "sriov_network_operator_modules_config.conf" in failure["msg"]
    assert failure["changed"] is False and failure["backup_files"] == {}
    assert not (dgx.etc / CONF).exists()


def test_earlier_file_is_overridden_by_ours(monkeypatch, dgx):
    (dgx.etc / "modprobe.d/00-old.conf").write_text("options ib_core netns_mode=1\n")
    result = run(monkeypatch, dgx, mode="exclusive", initramfs="never")
    assert result["observed"]["persisted_by"] == "/etc/" + CONF


def test_cmdline_conflict_is_warned(monkeypatch, tmp_path):
    spec = yaml.safe_load(pathlib.Path(hwsim.load("dgx-h100").path).read_text())
    spec["kernel"]["cmdline"] += " ib_core.netns_mode=1"
    spec_file = tmp_path / "booted-shared.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    with sim_node(spec_file, tmp_path, monkeypatch) as node:
        result = run(monkeypatch, node, mode="exclusive", initramfs="never", live=False)
        assert result["observed"]["cmdline"] == "shared"
        assert any("kernel_cmdline" in w for w in result.get("warnings", []))


def test_no_ib_core_loaded_persists_only(monkeypatch, tmp_path):
    with sim_node("no-rdma", tmp_path, monkeypatch) as node:
        result = run(monkeypatch, node, mode="exclusive", initramfs="never")
        assert result["observed"]["ib_core_loaded"] is False and result["observed"]["live"] is None
        assert [a["action"] for a in result["actions"]] == ["create_file"]
        assert result["reboot_required"] is False


@pytest.mark.parametrize("args, message", [
    ({"mode": "private"}, "value of mode must be one of"),
    ({}, "missing required arguments: mode"),
    ({"mode": "exclusive", "conf_file": "/etc/modprobe.d/ib_core"}, "must be a .conf file"),
    ({"mode": "exclusive", "conf_file": "/lib/modprobe.d/x.conf"}, "must be a .conf file"),
    ({"mode": "exclusive", "initramfs": "sometimes"}, "value of initramfs must be one of"),
    ({"mode": "exclusive", "host_root": "/nonexistent"}, "does not exist"),
])
def test_bad_input(monkeypatch, dgx, args, message):
    failure = run(monkeypatch, dgx, expect=ModuleFail, **args)
    assert message in failure["msg"]
    assert not (dgx.etc / CONF).exists()
    assert live_mode(dgx) == "Y"


def test_failed_initramfs_update_reverts_the_file(monkeypatch, dgx):
    (dgx.etc / CONF).write_text("options ib_core netns_mode=1\n")
    before = (dgx.etc / CONF).read_bytes()
    monkeypatch.setattr(rdma_netns, "initramfs_argv", lambda host, commands: ["false"])
    monkeypatch.setattr(rdma_netns.HostCommands, "run", lambda self, argv, data=None: (1, "", "dracut: cannot write"))
    failure = run(monkeypatch, dgx, mode="exclusive", initramfs="always", expect=ModuleFail)
    assert "dracut: cannot write" in failure["msg"] and "restored" in failure["msg"]
    assert (dgx.etc / CONF).read_bytes() == before
    assert live_mode(dgx) == "Y", "no live switch after a failed persistent step"


# -- the initramfs probe: cpio member names read in-process -------------------------------------------------------
def newc(entries, trailer=True):
    """A newc cpio archive of ``[(name, data)]`` as mkinitramfs/dracut write it."""
    out = b""
    for ino, (name, data) in enumerate(list(entries) + ([("TRAILER!!!", b"")] if trailer else []), 1):
        raw_name = name.encode() + b"\0"
        fields = [ino, 0o100644, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw_name), 0]
        header = b"070701" + b"".join(b"%08X" % value for value in fields) + raw_name
        out += header + b"\0" * (-len(header) % 4) + data + b"\0" * (-len(data) % 4)
    return out


MODULES = "usr/lib/modules/6.1.0-50-amd64/"
MAIN = [("usr", b""), ("init", b"#!/bin/sh\n"),
        # modules.dep names ib_core.ko inside a file's content: only member names may count
        (MODULES + "modules.dep", b"kernel/drivers/infiniband/core/ib_core.ko: kernel/net/core/x.ko\n" * 300),
        (MODULES + "kernel/drivers/block/virtio_blk.ko", bytes(range(256)) * 40)]
WITH_IB_CORE = MAIN + [(MODULES + "kernel/drivers/infiniband/core/ib_core.ko", b"\x7fELF" + b"\0" * 5000)]
EARLY = newc([("kernel", b""), ("kernel/x86/microcode/GenuineIntel.bin", b"\x01" * 1000)])


def members(entries):
    return [name for name, dummy in entries]


def padded(archive, boundary=512):
    return archive + b"\0" * (-len(archive) % boundary)


def compress(method, data):
    import bz2
    import gzip
    import lzma
    if method == "gzip":
        return gzip.compress(data)
    if method == "bzip2":
        return bz2.compress(data)
    if method == "xz":
        return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32)
    if method == "lzma":
        return lzma.compress(data, format=lzma.FORMAT_ALONE)
    raise AssertionError(method)


def names_of(image, chunk=1 << 20, decompress=None):
    import io

    def no_external(method, data):
        raise AssertionError("no external decompressor expected for %s" % method)
    return [n.decode() for n in initramfs.initramfs_names(io.BytesIO(image).read, decompress or no_external, chunk)]


@pytest.mark.parametrize("chunk", [1, 7, 113, 4096, 1 << 20])
def test_cpio_names_in_any_piece_size(chunk):
    assert names_of(newc(MAIN), chunk) == members(MAIN)
    assert names_of(padded(EARLY) + compress("gzip", newc(WITH_IB_CORE)), chunk) == \
        ["kernel", "kernel/x86/microcode/GenuineIntel.bin"] + members(WITH_IB_CORE)


@pytest.mark.parametrize("method", ["gzip", "bzip2", "xz", "lzma"])
def test_compressed_main_archive_after_an_early_one(method):
    image = padded(EARLY) + compress(method, newc(WITH_IB_CORE))
    assert names_of(image)[2:] == members(WITH_IB_CORE)


def test_several_archives_in_one_stream_and_several_streams():
    # one compressed stream holding two archives (NUL padding between), then another gzip member, then raw
    stream = compress("gzip", padded(newc(MAIN[:2])) + newc(MAIN[2:]))
    image = stream + compress("xz", newc([("extra", b"1")])) + b"\0" * 8 + newc([("late", b"")])
    assert names_of(image, chunk=64) == members(MAIN) + ["extra", "late"]


def test_external_decompressor_gets_the_rest_of_the_image():
    seen = {}

    def fake_zstd(method, data):
        seen[method] = data
        return newc(WITH_IB_CORE)
    main = b"\x28\xb5\x2f\xfd" + b"compressed"
    assert names_of(padded(EARLY) + main, chunk=5, decompress=fake_zstd)[-1].endswith("/ib_core.ko")
    assert seen == {"zstd": main}


@pytest.mark.skipif(not rdma_netns.os.path.exists("/usr/bin/zstd"), reason="zstd is not installed")
def test_real_zstd_through_run_command(tmp_path):
    import subprocess
    main = subprocess.run(["/usr/bin/zstd", "-q", "-c"], input=newc(WITH_IB_CORE), capture_output=True,
                          check=True).stdout

    class Module:
        def get_bin_path(self, name, required=False):  # pylint: disable=unused-argument
            return "/usr/bin/" + name

        def run_command(self, argv, data=None, binary_data=False, encoding="utf-8", check_rc=False):  # pylint: disable=unused-argument
            done = subprocess.run(argv, input=data, capture_output=True, check=False)
            return done.returncode, done.stdout, done.stderr

    decompress = initramfs.external_decompressor(Module(), None)
    assert names_of(padded(EARLY) + main, decompress=decompress)[-1].endswith("/ib_core.ko")
    with pytest.raises(initramfs.InitramfsFormatError, match="zstd failed"):
        names_of(main[:-9], decompress=decompress)


@pytest.mark.parametrize("image, message", [
    (b"MZ\x90\x00 not an initramfs", "neither cpio nor compressed"),
    (newc(MAIN)[:-200], "ends inside"),
    (newc(MAIN, trailer=False), "ends inside"),
    (compress("gzip", newc(MAIN))[:-30], "ends inside a gzip stream"),
    (compress("gzip", newc(MAIN)[:-120]), "ends inside a cpio archive"),
    (newc(MAIN)[:116] + b"070707" + newc(MAIN)[122:], "no cpio header"),   # 116: the second header (odc magic)
    (newc(MAIN)[:116 + 54] + b"0000zzzz" + newc(MAIN)[116 + 62:], "non-hex sizes"),
])
def test_malformed_images_are_errors(image, message):
    with pytest.raises(initramfs.InitramfsFormatError, match=message):
        names_of(image, chunk=50)


def test_probe_reads_a_real_initrd_when_one_was_built():
    built = sorted(pathlib.Path(os.environ.get("RDMA_MACHINE_CACHE", "/var/cache/rdma-k8s-node")).glob("vm/*/initrd.img"))
    if not built:
        pytest.skip("no VM image built (scripts/build-vm)")
    with open(built[-1], "rb") as raw:
        names = [n.decode() for n in initramfs.initramfs_names(raw.read, lambda method, data: pytest.skip(method))]
    assert "init" in names and any(n.endswith("/modules.dep") for n in names)
    assert sum(n.endswith(".ko") for n in names) > 5, names


def boot_image(node, members):
    release = (node.root / "proc/sys/kernel/osrelease").read_text().strip()
    (node.root / "boot").mkdir(exist_ok=True)
    (node.root / "boot" / ("initrd.img-%s" % release)).write_bytes(padded(EARLY) + compress("gzip", newc(members)))
    tool = node.root / "usr/sbin/update-initramfs"
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    return release


@pytest.mark.parametrize("members, regenerates", [(WITH_IB_CORE, True), (MAIN, False)])
def test_auto_regenerates_only_an_initramfs_with_ib_core(monkeypatch, dgx, members, regenerates):
    release = boot_image(dgx, members)
    result = run(monkeypatch, dgx, check=True, mode="exclusive", live=False)
    targets = [a["target"] for a in result["actions"] if a["action"] == "run"]
    assert targets == (["update-initramfs -u -k %s" % release] if regenerates else [])
    assert "warnings" not in result


def test_unreadable_initramfs_counts_as_holding_ib_core(monkeypatch, dgx):
    release = boot_image(dgx, MAIN)
    (dgx.root / "boot" / ("initrd.img-%s" % release)).write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 64)
    real = rdma_netns.AnsibleModule.get_bin_path
    monkeypatch.setattr(rdma_netns.AnsibleModule, "get_bin_path",  # zstd neither here nor in the node's root
                        lambda self, name, *args, **kwargs: None if name == "zstd" else real(self, name, *args, **kwargs))
    result = run(monkeypatch, dgx, check=True, mode="exclusive", live=False)
    assert [a["target"] for a in result["actions"] if a["action"] == "run"] == ["update-initramfs -u -k %s" % release]
    assert any("zstd is not installed" in w and "assuming ib_core" in w for w in result["warnings"])
