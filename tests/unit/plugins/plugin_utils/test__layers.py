"""The layer registry (module_utils/layers/_registry.py) is the one list of layers: the Python consumers derive from it, and
the YAML and Markdown ones (which cannot import it) are held to it here."""

import pathlib
import re

import yaml

from ansible_collections.rdma.k8s_node.plugins.filter import rdma_audit as audit_filter
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers

REPO = pathlib.Path(__file__).resolve().parents[4]


def _yaml(path):
    return yaml.safe_load((REPO / path).read_text(encoding="utf-8"))


def test_the_audit_derives_its_lists_from_the_registry():
    assert _audit.LAYERS == ("facts",) + _layers.names()
    assert _audit.DESIRED_VARS == _layers.desired_vars()
    # one room per layer: every layer brings its judgement (the audit has none of its own); rdma_facts runs the
    # observers of those that have one
    assert all(callable(layer.judge) for layer in _layers.LAYERS)
    assert not hasattr(_audit, "_JUDGES")
    assert [layer.name for layer in _layers.LAYERS if layer.observe is None] == ["topology"]
    assert _layers.rooms() == tuple(layer for layer in _layers.LAYERS if layer.observe is not None)
    assert all(callable(layer.inventory_judge) for layer in _layers.LAYERS if layer.inventory_judge_ref)
    assert all(callable(layer.legacy_section) for layer in _layers.LAYERS if layer.observe is None)
    assert audit_filter.DEFAULTS_ROLES == _layers.default_roles()
    assert _audit.layer_of("gpudirect.path") == "drivers" and _audit.layer_of("mtu.node") == "topology"
    assert _audit.layer_of("kernel.cmdline") == "kernel"


def test_registry_is_well_formed():
    names = _layers.names()
    assert len(set(names)) == len(names) and _layers.FACTS_LAYER not in names
    prefixes = [p for layer in _layers.LAYERS for p in layer.check_prefixes]
    assert len(set(prefixes)) == len(prefixes) and not set(prefixes) & set(names)
    assert len(_layers.desired_vars()) == sum(len(layer.variables) for layer in _layers.LAYERS), "a variable in two layers"
    assert _layers.by_name("sriov").roles == ("sriov",)


def test_every_layer_variable_is_a_variable_of_its_roles():
    """A layer's desired state is its roles' own variables (same names), each documented in a role argument spec."""
    for layer in _layers.LAYERS:
        roles = layer.roles + (_layers.AUDIT_ROLE,)
        documented = set()
        for role in roles:
            documented |= set(_yaml("roles/%s/meta/argument_specs.yml" % role)["argument_specs"]["main"]["options"])
        # the provision playbook's own switches (rdma_k8s_node_*) are documented there
        playbook_switches = set(re.findall(r"rdma_k8s_node_[a-z_]+", (REPO / "playbooks/provision.yml").read_text()))
        missing = [var for var in layer.variables if var not in documented | playbook_switches]
        assert missing == [], layer.name


def test_rdma_audit_layers_are_checked_against_the_registry():
    """No hand-kept choices in the argument spec: the filter checks each host's list against the registry."""
    spec = _yaml("roles/rdma_audit/meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert "choices" not in spec["rdma_audit_layers"]
    assert ", ".join(_layers.names()) in " ".join(spec["rdma_audit_layers"]["description"])
    assert _audit.host_layers(["pcie", "sriov"]) == (["pcie", "sriov"], [])
    assert "must be a list of" in _audit.host_layers(["gpus"])[1][0]


def test_provision_runs_the_registry_roles_in_order():
    play = [p for p in _yaml("playbooks/provision.yml") if p["name"] == "Provision RDMA GPU nodes"][0]
    roles = []

    def walk(tasks):
        for task in tasks or []:
            if "ansible.builtin.import_role" in task:
                roles.append(task["ansible.builtin.import_role"]["name"].rsplit(".", 1)[-1])
            for nested in ("block", "rescue", "always"):
                walk(task.get(nested))
    walk(play["tasks"])
    # node_reboot is not a layer: it reboots after all of them when one needs it
    assert tuple(r for r in roles if r != "node_reboot") == _layers.provision_roles()
    assert roles.index("node_reboot") > max(roles.index(r) for r in _layers.provision_roles())


def _github_slug(heading):
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_docs_anchors_exist():
    for layer in _layers.LAYERS:
        path, _sep, anchor = layer.docs.partition("#")
        text = (REPO / path).read_text(encoding="utf-8")
        if anchor:
            slugs = [_github_slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)]
            assert anchor in slugs, (layer.name, anchor)


def test_facts_keys_are_rdma_facts_keys():
    source = (REPO / "plugins/modules/rdma_facts.py").read_text(encoding="utf-8")
    returned = source[source.index('RETURN = r"""') + len('RETURN = r"""'):]
    returned = yaml.safe_load(returned[:returned.index('"""')])
    keys = set(returned["ansible_facts"]["contains"]["rdma"]["contains"])
    for layer in _layers.LAYERS:
        assert set(layer.facts_keys) <= keys, (layer.name, set(layer.facts_keys) - keys)


def test_audit_doc_table_puts_every_check_in_its_registry_layer():
    """docs/audit.md's check table: the layer column is what layer_of() (the registry's prefixes) says."""
    rows = re.findall(r"^\| `([a-z_]+)\.[^|]*\| ([a-z]+) \|", (REPO / "docs/audit.md").read_text(encoding="utf-8"), re.M)
    assert len(rows) > 25
    wrong = [(prefix, layer) for prefix, layer in rows if _audit.layer_of(prefix + ".x") != layer]
    assert wrong == []
