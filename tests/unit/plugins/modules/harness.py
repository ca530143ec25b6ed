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
