"""kernel_cmdline against a node tree: check mode, diff, idempotence, reboot_required, rollback, bad input.

Boot tools are stood in for by small re-implementations of their documented behaviour, written independently
of the module: ``update-grub`` sources the GRUB defaults with /bin/sh and writes ``linux`` lines the way
grub-mkconfig's 10_linux does; ``grubby`` edits BLS entries' ``options`` lines.  Everything else the module runs
(its own sh evaluation) is real.
"""

import pathlib
import stat
import subprocess

import pytest

from ansible.module_utils import basic

from ansible_collections.rdma.k8s_node.plugins.modules import kernel_cmdline
from unit.plugins.modules.harness import ModuleFail, run_module, sh_outside_root, unwrap_node_command

DROPIN = "etc/default/grub.d/99-rdma-k8s-node.cfg"
KERNEL = "/boot/vmlinuz-6.1.0-28-amd64"


def fake_update_grub(root):
    """grub-mkconfig in miniature: source the defaults like it does, write normal + recovery entries."""
    if (root / "FAIL_UPDATE_GRUB").exists():
        return 1, "", "/usr/sbin/grub-probe: error: failed to get canonical path of `overlay'.\n"
    script = ('. ./etc/default/grub; for f in ./etc/default/grub.d/*.cfg; do [ -e "$f" ] && . "$f"; done; '
              'printf "%s\\n%s" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"')
    linux, default = subprocess.run(["/bin/sh", "-c", script], cwd=root, check=True, capture_output=True,
                                    text=True, env={}).stdout.split("\n")
    (root / "boot/grub/grub.cfg").write_text(
        "menuentry 'Debian GNU/Linux' {\n\tlinux\t%s root=UUID=abcd ro %s %s\n}\n"
        "menuentry 'Debian GNU/Linux (recovery mode)' {\n\tlinux\t%s root=UUID=abcd ro single %s\n}\n"
        % (KERNEL, linux, default, KERNEL, linux))
    return 0, "Generating grub configuration file ...\ndone\n", ""


def fake_grubby(root, args):
    """grubby over BLS entries: --info=ALL, --update-kernel=ALL with --args (replacing same names) / --remove-args."""
    entries = sorted((root / "boot/loader/entries").glob("*.conf"))
    if args == ["--info=ALL"]:
        out = []
        for index, entry in enumerate(entries):
            fields = dict(line.split(" ", 1) for line in entry.read_text().splitlines() if " " in line)
            out += ["index=%d" % index, 'kernel="%s"' % fields["linux"], 'args="%s"' % fields["options"]]
        return 0, "\n".join(out) + "\n", ""
    assert args[0] == "--update-kernel=ALL"
    for entry in entries:
        lines = entry.read_text().splitlines()
        for number, line in enumerate(lines):
            if not line.startswith("options "):
                continue
            opts = line.split()[1:]
            for arg in args[1:]:
                option, value = arg.split("=", 1)
                for token in value.split():
                    key = token.split("=", 1)[0]
                    if option == "--remove-args":
                        opts = [o for o in opts if o != token and not ("=" not in token and o.split("=", 1)[0] == key)]
                    else:
                        same = [i for i, o in enumerate(opts) if o.split("=", 1)[0] == key]
                        if same:
                            opts[same[0]] = token
                        else:
                            opts.append(token)
            lines[number] = "options " + " ".join(opts)
        entry.write_text("\n".join(lines) + "\n")
    return 0, "", ""


class NodeRoot(pathlib.PosixPath):
    """The node's root directory, carrying the list of boot-tool calls the module made inside it."""

    calls = None


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A Debian node tree with GRUB defaults and a generated grub.cfg; boot tools intercepted."""
    root = NodeRoot(tmp_path / "node")
    for directory in ("etc/default/grub.d", "proc", "boot/grub", "usr/sbin"):
        (root / directory).mkdir(parents=True)
    (root / "etc/default/grub").write_text(
        'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n')
    (root / "etc/default/grub.d/init-select.cfg").write_text("# a file Debian ships; not ours\n")
    (root / "proc/cmdline").write_text("BOOT_IMAGE=%s root=UUID=abcd ro quiet\n" % KERNEL)
    (root / "proc/cpuinfo").write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n")
    for tool in ("update-grub", "grubby"):
        (root / "usr/sbin" / tool).write_text("#!/bin/sh\nexit 99\n")
        (root / "usr/sbin" / tool).chmod(0o755)
    (root / "usr/sbin/grubby").unlink()
    fake_update_grub(root)
    real_run_command = basic.AnsibleModule.run_command
    calls = []

    def run_command(self, args, *pos, **kwargs):
        argv, chrooted = unwrap_node_command(list(args), root)
        if chrooted and argv[:2] == ["/bin/sh", "-c"]:
            return sh_outside_root(argv, root)
        if chrooted:
            calls.append(argv)
            if argv[0] == "update-grub":
                return fake_update_grub(root)
            if argv[0] == "grubby":
                return fake_grubby(root, argv[1:])
            raise AssertionError("unexpected command in host_root: %s" % argv)
        return real_run_command(self, args, *pos, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    root.calls = calls
    return root


def run(monkeypatch, node, check=False, diff=True, expect=None, **args):
    args.setdefault("host_root", str(node))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, kernel_cmdline.main, args, check=check, diff=diff, **kwargs)


def linux_line(node):
    return next(line for line in (node / "boot/grub/grub.cfg").read_text().splitlines() if "\tlinux\t" in line)


def test_check_mode_predicts_and_touches_nothing(monkeypatch, node):
    before = (node / "boot/grub/grub.cfg").read_text()
    result = run(monkeypatch, node, check=True, present=["iommu=pt"])
    assert result["changed"] is True
    assert result["bootloader"] == "grub_dropin"
    assert [a["action"] for a in result["actions"]] == ["create_file", "run"]
    assert result["actions"][1]["target"] == "update-grub"
    assert "iommu=pt" in result["diff"]["after"] and result["diff"]["before"] == ""
    assert result["observed"]["configured"][-2:] == ["iommu=pt", "quiet"]
    assert result["reboot_required"] is True and result["pending"] == {"missing": ["iommu=pt"], "unwanted": []}
    assert not (node / DROPIN).exists()
    assert (node / "boot/grub/grub.cfg").read_text() == before
    assert node.calls == []


def test_apply_then_idempotent_then_reboot_clears(monkeypatch, node):
    first = run(monkeypatch, node, present=["iommu=pt"], vendor_iommu=True)
    assert first["changed"] is True and first["reboot_required"] is True
    assert stat.S_IMODE((node / DROPIN).stat().st_mode) == 0o644
    assert "iommu=pt intel_iommu=on quiet" in linux_line(node)
    assert node.calls == [["update-grub"]]

    second = run(monkeypatch, node, present=["iommu=pt"], vendor_iommu=True)
    assert second["changed"] is False and second["actions"] == []
    assert second["reboot_required"] is True
    assert node.calls == [["update-grub"]], "a second run must not regenerate"
    check = run(monkeypatch, node, check=True, present=["iommu=pt"], vendor_iommu=True)
    assert check["changed"] is False

    # the node reboots into the generated entry
    (node / "proc/cmdline").write_text("BOOT_IMAGE=%s %s\n" % (KERNEL, linux_line(node).split(KERNEL, 1)[1].strip()))
    third = run(monkeypatch, node, present=["iommu=pt"], vendor_iommu=True)
    assert third["changed"] is False and third["reboot_required"] is False
    assert third["pending"] == {"missing": [], "unwanted": []}


def test_replaces_values_and_removes_from_both_variables(monkeypatch, node):
    (node / "etc/default/grub").write_text(
        'GRUB_CMDLINE_LINUX="iommu=off console=ttyS0"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=off"\n')
    (node / "proc/cmdline").write_text("ro iommu=off console=ttyS0 quiet intel_iommu=off\n")
    result = run(monkeypatch, node, present=["iommu=pt"], absent=["intel_iommu"])
    args = linux_line(node).split()
    assert "iommu=pt" in args and "iommu=off" not in args and "intel_iommu=off" not in args
    assert "console=ttyS0" in args and "quiet" in args
    assert result["pending"] == {"missing": ["iommu=pt"], "unwanted": ["iommu=off", "intel_iommu=off"]}
    # the operator's own file is untouched: the drop-in does the work
    assert "iommu=off" in (node / "etc/default/grub").read_text()


def test_failed_update_restores_the_dropin(monkeypatch, node):
    before = (node / "boot/grub/grub.cfg").read_text()
    (node / "FAIL_UPDATE_GRUB").write_text("")
    failure = run(monkeypatch, node, present=["iommu=pt"], expect=ModuleFail)
    assert "update-grub failed" in failure["msg"] and "restored" in failure["msg"]
    assert "grub-probe" in failure["msg"]
    assert not (node / DROPIN).exists()
    assert (node / "boot/grub/grub.cfg").read_text() == before


def test_failed_update_restores_a_previous_dropin_byte_for_byte(monkeypatch, node):
    run(monkeypatch, node, present=["iommu=pt"])
    old = (node / DROPIN).read_bytes()
    (node / "FAIL_UPDATE_GRUB").write_text("")
    run(monkeypatch, node, present=["iommu=pt", "pci=realloc"], expect=ModuleFail)
    assert (node / DROPIN).read_bytes() == old
    assert sorted(p.name for p in (node / "etc/default/grub.d").iterdir()) == ["99-rdma-k8s-node.cfg", "init-select.cfg"]


def test_stale_grub_cfg_is_regenerated(monkeypatch, node):
    run(monkeypatch, node, present=["iommu=pt"], update=False)
    assert "iommu=pt" not in linux_line(node)
    healed = run(monkeypatch, node, present=["iommu=pt"])
    assert [a["action"] for a in healed["actions"]] == ["run"]
    assert "iommu=pt" in linux_line(node)


def test_later_file_overriding_ours_is_a_conflict(monkeypatch, node):
    (node / "etc/default/grub.d/zz-vendor.cfg").write_text('GRUB_CMDLINE_LINUX="ro"\n')
    failure = run(monkeypatch, node, present=["iommu=pt"], dropin="/etc/default/grub.d/50-rdma.cfg", expect=ModuleFail)
    assert "zz-vendor.cfg" in failure["msg"] and "iommu=pt" in failure["msg"]
    assert not (node / "etc/default/grub.d/50-rdma.cfg").exists()


def test_backup_keeps_previous_dropin(monkeypatch, node):
    """backup_files is ``{edited path: backup path}`` on a run that replaces the drop-in with backup=true, ``{}``
    otherwise: a new file, check mode, a no-op run, backup=false, a regeneration only (RETURN)."""
    created = run(monkeypatch, node, present=["iommu=pt"], backup=True)
    assert created["changed"] is True and created["backup_files"] == {}, "a new file has nothing to back up"
    check = run(monkeypatch, node, check=True, present=["iommu=pt", "pci=realloc"], backup=True)
    assert check["changed"] is True and check["backup_files"] == {}
    again = run(monkeypatch, node, present=["iommu=pt"], backup=True)
    assert again["changed"] is False and again["backup_files"] == {}
    result = run(monkeypatch, node, present=["iommu=pt", "pci=realloc"], backup=True)
    [(edited, backup)] = result["backup_files"].items()
    assert edited == "/etc/default/grub.d/99-rdma-k8s-node.cfg" and backup.startswith(str(node) + edited + ".")
    assert "iommu=pt" in open(backup, encoding="utf-8").read()
    assert "pci=realloc" not in open(backup, encoding="utf-8").read()
    assert not backup.endswith(".cfg"), "a backup must not be sourced by GRUB"
    plain = run(monkeypatch, node, present=["iommu=pt"])
    assert plain["changed"] is True and plain["backup_files"] == {}
    (node / "boot/grub/grub.cfg").write_text((node / "boot/grub/grub.cfg").read_text().replace(" iommu=pt", ""))
    healed = run(monkeypatch, node, present=["iommu=pt"], backup=True)
    assert [a["action"] for a in healed["actions"]] == ["run"] and healed["backup_files"] == {}


def test_grub_default_mode_edits_the_line(monkeypatch, node):
    result = run(monkeypatch, node, bootloader="grub_default", present=["iommu=pt"], absent=["quiet"])
    text = (node / "etc/default/grub").read_text()
    assert 'GRUB_CMDLINE_LINUX="iommu=pt"' in text and 'GRUB_CMDLINE_LINUX_DEFAULT=""' in text
    assert "GRUB_TIMEOUT=5" in text
    assert result["diff"]["before_header"] == "/etc/default/grub (content)"
    assert run(monkeypatch, node, bootloader="grub_default", present=["iommu=pt"], absent=["quiet"])["changed"] is False


def test_grub_default_mode_refuses_shell_expansion(monkeypatch, node):
    (node / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX="$EXTRA ro"\n')
    failure = run(monkeypatch, node, bootloader="grub_default", present=["iommu=pt"], expect=ModuleFail)
    assert "shell expansion" in failure["msg"]


@pytest.fixture
def el_node(node):
    """An EL9-like node: grubby and BLS entries for two kernels plus rescue."""
    (node / "usr/sbin/grubby").write_text("#!/bin/sh\nexit 99\n")
    (node / "usr/sbin/grubby").chmod(0o755)
    entries = node / "boot/loader/entries"
    entries.mkdir(parents=True)
    for name, kernel in (("a-5.14.0-427.el9.x86_64", "5.14.0-427"), ("b-5.14.0-503.el9.x86_64", "5.14.0-503")):
        (entries / (name + ".conf")).write_text(
            "title EL %s\nversion %s\nlinux /vmlinuz-%s\noptions root=/dev/mapper/rl-root ro iommu=off\n"
            % (kernel, kernel, kernel))
    (node / "etc/default/grub").write_text('GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="crashkernel=auto rhgb quiet"\n')
    (node / "etc/kernel").mkdir()
    (node / "etc/kernel/cmdline").write_text("root=/dev/mapper/rl-root ro iommu=off\n")
    return node


def test_grubby_mode(monkeypatch, el_node):
    check = run(monkeypatch, el_node, check=True, present=["iommu=pt", "intel_iommu=on"])
    assert check["bootloader"] == "grubby" and check["changed"] is True
    assert "iommu=off" in (el_node / "etc/kernel/cmdline").read_text()
    assert el_node.calls == [["grubby", "--info=ALL"]]

    result = run(monkeypatch, el_node, present=["iommu=pt", "intel_iommu=on"])
    assert result["changed"] is True and result["reboot_required"] is True
    for entry in (el_node / "boot/loader/entries").glob("*.conf"):
        assert "options root=/dev/mapper/rl-root ro iommu=pt intel_iommu=on\n" in entry.read_text()
    assert 'GRUB_CMDLINE_LINUX="crashkernel=auto rhgb quiet iommu=pt intel_iommu=on"' in (el_node / "etc/default/grub").read_text()
    assert (el_node / "etc/kernel/cmdline").read_text() == "root=/dev/mapper/rl-root ro iommu=pt intel_iommu=on\n"
    assert check["backup_files"] == {} and result["backup_files"] == {}  # backup=false
    again = run(monkeypatch, el_node, present=["iommu=pt", "intel_iommu=on"], backup=True)
    assert again["changed"] is False and again["backup_files"] == {}


def test_grubby_mode_backs_up_the_grub_defaults_and_kernel_cmdline(monkeypatch, el_node):
    result = run(monkeypatch, el_node, present=["iommu=pt"], backup=True)
    assert sorted(result["backup_files"]) == ["/etc/default/grub", "/etc/kernel/cmdline"]
    for edited, backup in result["backup_files"].items():
        assert backup.startswith(str(el_node) + edited + ".")
    assert open(result["backup_files"]["/etc/kernel/cmdline"], encoding="utf-8").read() == (
        "root=/dev/mapper/rl-root ro iommu=off\n")
    assert 'GRUB_CMDLINE_LINUX="crashkernel=auto rhgb quiet"' in open(result["backup_files"]["/etc/default/grub"],
                                                                      encoding="utf-8").read()


@pytest.mark.parametrize("args, message", [
    ({"present": ["iommu pt"]}, "not a kernel argument"),
    ({"present": ["iommu=$(reboot)"]}, "not a kernel argument"),
    ({"present": ["iommu=pt"], "absent": ["iommu"]}, "both wanted"),
    ({"absent": ["a b"]}, "not an argument name"),
    ({"present": ["iommu=pt"], "dropin": "/etc/default/grub.d/rdma.conf"}, "must be a .cfg file"),
    ({"present": ["iommu=pt"], "dropin": "/etc/grub.d/99-rdma.cfg"}, "must be a .cfg file"),
    ({"present": ["iommu=pt"], "bootloader": "lilo"}, "value of bootloader must be one of"),
    ({"present": "iommu=pt", "bogus": 1}, "Unsupported parameters"),
    ({"present": ["iommu=pt"], "host_root": "/nonexistent"}, "does not exist"),
])
def test_bad_input(monkeypatch, node, args, message):
    before = sorted(str(p) for p in node.rglob("*"))
    failure = run(monkeypatch, node, expect=ModuleFail, **args)
    assert message in failure["msg"]
    assert sorted(str(p) for p in node.rglob("*")) == before
    assert node.calls == []


def test_unknown_cpu_vendor(monkeypatch, node):
    (node / "proc/cpuinfo").write_text("processor\t: 0\nvendor_id\t: CentaurHauls\n")
    failure = run(monkeypatch, node, vendor_iommu=True, expect=ModuleFail)
    assert "CentaurHauls" in failure["msg"]


def test_no_bootloader_found(monkeypatch, node):
    (node / "etc/default/grub").unlink()
    failure = run(monkeypatch, node, present=["iommu=pt"], expect=ModuleFail)
    assert "found neither grubby" in failure["msg"]


def test_quoted_values_survive(monkeypatch, node):
    (node / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX="ro"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    (node / "proc/cmdline").write_text('ro dyndbg="file x.c +p" quiet\n')
    result = run(monkeypatch, node, present=["iommu=pt"])
    assert result["pending"]["missing"] == ["iommu=pt"]
    assert result["observed"]["live"] == ["ro", 'dyndbg="file x.c +p"', "quiet"]
