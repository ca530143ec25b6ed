"""Every role's defaults pass the role's own argument check, as Ansible runs it when the role starts.

A default the check refuses fails the role for everyone who does not set the variable (a ``null`` default of an
option with ``choices`` did exactly that to kubelet_topology, and with it to provision.yml on every node).
"""

import pathlib

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

ROLES = pathlib.Path(__file__).resolve().parents[3] / "roles"


def roles_with_specs():
    return sorted(p.parent.parent.name for p in ROLES.glob("*/meta/argument_specs.yml"))


@pytest.mark.parametrize("role", roles_with_specs())
def test_defaults_pass_the_roles_argument_spec(role):
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    defaults_file = ROLES / role / "defaults" / "main.yml"
    defaults = yaml.safe_load(defaults_file.read_text()) or {} if defaults_file.exists() else {}
    # templated defaults are rendered per host at run time: their type is checked there
    given = dict((k, v) for k, v in defaults.items() if not (isinstance(v, str) and "{{" in v))
    result = ArgumentSpecValidator(spec.get("options", {})).validate(given, validate_role_argument_spec=True)
    assert result.error_messages == []
    undocumented = sorted(set(defaults) - set(spec.get("options", {})))
    assert undocumented == [], "defaults without an argument spec entry"


def test_every_role_has_an_argument_spec():
    assert sorted(p.name for p in ROLES.iterdir() if (p / "tasks").is_dir()) == roles_with_specs()
