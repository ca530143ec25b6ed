"""Run a module's main() in-process and capture what it returns or why it fails."""

import pytest

from ansible.module_utils import _internal, basic
from ansible.module_utils.common import warnings
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    """exit_json was called; args[0] holds the result."""


class ModuleFail(Exception):
    """fail_json was called; args[0] holds the failure."""


def _with_warnings(kwargs):
    """Attach the warnings the module emitted, as exit_json would for a real run."""
    messages = list(warnings.get_warning_messages())
    if messages:
        kwargs["warnings"] = messages
    return kwargs


def _exit_json(self, **kwargs):  # pylint: disable=unused-argument
    raise ModuleExit(_with_warnings(kwargs))


def _fail_json(self, **kwargs):  # pylint: disable=unused-argument
    raise ModuleFail(_with_warnings(kwargs))


def run_module(monkeypatch, main, args, check=False, diff=False, expect=ModuleExit):
    """Call ``main()`` with ``args`` (plus check/diff flags) and return the exit or fail payload."""
    # a module runs on the node: once controller code is imported in this process (filter plugin tests),
    # ansible would route warnings to the controller's display instead of the module result
    monkeypatch.setattr(_internal, "is_controller", False)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)
    warnings._global_warnings.clear()  # pylint: disable=protected-access
    full = dict(args)
    full["_ansible_check_mode"] = check
    full["_ansible_diff"] = diff
    with patch_module_args(full):
        with pytest.raises(expect) as info:
            main()
    return info.value.args[0]


def unwrap_node_command(argv, root):
    """``(argv, chrooted)`` of a file tool as HostCommands.run builds it, without its ``timeout``, ``chroot <root>``
    and ``env -i ...`` wrappers, so a test stand-in sees the command itself.  A chroot into any other directory than
    the node's root is a bug of the module and fails the test."""
    argv = [str(a) for a in argv]
    if argv and argv[0].rsplit("/", 1)[-1] == "timeout":
        argv = argv[1:]
        while argv and argv[0].startswith("-"):
            argv = argv[1:]
        argv = argv[1:]  # the duration
    chrooted = bool(argv) and argv[0].rsplit("/", 1)[-1] == "chroot"
    if chrooted:
        assert argv[1] == str(root), "commands must run inside host_root, got chroot %s" % argv[1]
        argv = argv[2:]
    if argv and argv[0].rsplit("/", 1)[-1] == "env" and argv[1:2] == ["-i"]:
        argv = argv[2:]
        while argv and "=" in argv[0] and not argv[0].startswith("/"):
            argv = argv[1:]
    return argv, chrooted


def sh_outside_root(argv, root):
    """Stand-in for ``chroot <root> /bin/sh -c SCRIPT sh F:/node/path ...`` where the test root has no shell: the
    real sh runs here with each ``F:`` file argument mapped under ``root`` (the GRUB defaults sourcing of
    kernel_cmdline; the real chroot runs in the molecule scenarios and the VM)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    args = ["sh", "-c", argv[2], "sh"] + ["F:%s%s" % (root, a[2:]) if a.startswith("F:") else a for a in argv[4:]]
    proc = subprocess.run(args, capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"})
    return proc.returncode, proc.stdout, proc.stderr
