"""The sriov role's boot unit as rendered for nodes with and without rdma-hw.target, openibd and a kubelet.

The role's own templates and vars, rendered with Jinja2 as Ansible's template module does (trim_blocks) and with the
Ansible filters they use; the unit probe output is ``systemctl show -p Id -p LoadState`` as systemd prints it.
"""

import json
import pathlib
import re

import jinja2
import jinja2.nativetypes
import pytest
import yaml

from ansible.plugins.filter.core import regex_search, to_bool

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "sriov"
DEFAULTS = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
VARS = yaml.safe_load((ROLE / "vars/main.yml").read_text())


def environment(cls=jinja2.Environment):
    env = cls(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    env.filters.update(regex_search=regex_search, bool=to_bool,
                       to_json=lambda value, sort_keys=False: json.dumps(value, sort_keys=sort_keys))
    return env


def var(name, **context):
    """One of the role's vars/main.yml values, templated like Ansible (native types)."""
    return environment(jinja2.nativetypes.NativeEnvironment).from_string(VARS[name]).render(**context)


def probe(**states):
    """``systemctl show -p Id -p LoadState -- rdma-hw.target openibd.service kubelet.service`` output."""
    return "\n\n".join("Id=%s\nLoadState=%s" % (unit, state) for unit, state in states.items()) + "\n"


def node(**states):
    """The vars the templates see on a node whose units are in ``states`` (unit -> LoadState)."""
    context = dict(DEFAULTS, ansible_managed="Ansible managed", sriov__unit_probe={"stdout": probe(**states)})
    context["sriov__boot_units"] = var("sriov__boot_units", **context)
    context["sriov__kubelet_requires"] = to_bool(var("sriov__kubelet_requires", **context))
    return context


def unit(context):
    return environment().from_string((ROLE / "templates/sriov.service.j2").read_text()).render(**context)


def lines(text, key):
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(key + "=")]


BARE = {"rdma-hw.target": "not-found", "openibd.service": "not-found", "kubelet.service": "not-found"}
FULL = {"rdma-hw.target": "loaded", "openibd.service": "loaded", "kubelet.service": "loaded"}


def test_units_found_follow_load_state():
    assert var("sriov__boot_units", sriov__unit_probe={"stdout": probe(**FULL)}) == list(FULL)
    masked = {**FULL, "openibd.service": "masked"}
    assert var("sriov__boot_units", sriov__unit_probe={"stdout": probe(**masked)}) == ["rdma-hw.target", "kubelet.service"]
    assert var("sriov__boot_units", sriov__unit_probe={"stdout": ""}) == [], "no systemd manager: nothing found"


def test_bare_node_no_rdma_core_no_ofed_no_kubelet():
    context = node(**BARE)
    text = unit(context)
    assert lines(text, "Wants") == ["network-pre.target"]
    assert lines(text, "After") == ["systemd-modules-load.service systemd-udev-trigger.service local-fs.target"]
    assert lines(text, "Before") == ["network-pre.target network.target kubelet.service"]
    assert "udev-settle" not in text
    assert context["sriov__kubelet_requires"] is False


def test_rdma_core_node_orders_after_rdma_hw_target():
    text = unit(node(**{**BARE, "rdma-hw.target": "loaded"}))
    assert lines(text, "Wants") == ["network-pre.target", "rdma-hw.target"]
    assert "rdma-hw.target" in lines(text, "After") and "openibd.service" not in lines(text, "After")


def test_doca_ofed_node_orders_after_openibd_and_the_kubelet_requires_the_unit():
    context = node(**FULL)
    text = unit(context)
    assert lines(text, "After") == ["systemd-modules-load.service systemd-udev-trigger.service local-fs.target",
                                    "rdma-hw.target", "openibd.service"]
    assert context["sriov__kubelet_requires"] is True
    dropin = environment().from_string((ROLE / "templates/kubelet-requires-sriov.conf.j2").read_text()).render(**context)
    assert lines(dropin, "Requires") == ["rdma-k8s-node-sriov.service"] and lines(dropin, "After") == ["rdma-k8s-node-sriov.service"]


@pytest.mark.parametrize("setting,installed,expected", [
    ("auto", True, True), ("auto", False, False), (True, False, True), (False, True, False), ("false", True, False)])
def test_kubelet_requirement_default_on_only_when_the_kubelet_is_installed(setting, installed, expected):
    states = {**BARE, "kubelet.service": "loaded" if installed else "not-found"}
    context = dict(node(**states), sriov_boot_kubelet_requires=setting)
    assert to_bool(var("sriov__kubelet_requires", **context)) is expected


def test_exec_start_waits_and_retries_within_the_start_timeout():
    text = unit(node(**BARE))
    assert lines(text, "ExecStart") == [
        "/usr/bin/python3 /usr/local/lib/rdma-k8s-node/sriov_apply.py --state /etc/rdma-k8s-node/sriov.json"
        " --wait-timeout 120 --retries 3 --retry-delay 10"]
    assert "Restart" not in "".join(re.findall(r"^Restart\w*=", text, re.M))
    # the wait, 4 runs of at most 3 x sriov_timeout each, 3 delays and a margin
    assert lines(text, "TimeoutStartSec") == [str(120 + 4 * 3 * 120 + 3 * 10 + 60)]


def test_state_file_lists_the_pfs_to_wait_for():
    """By the name each PF is configured by, with the netdev / RDMA device sriov_vfs observed (none observed: its name)."""
    results = [
        {"item": {"netdev": "ibp24s0", "num_vfs": 4},
         "observed": {"pf": {"pci_address": "0000:18:00.0", "netdev": "ibp24s0", "rdma_device": "mlx5_0"}}},
        {"item": {"pci_address": "0000:86:00.0", "num_vfs": 8},
         "observed": {"pf": {"pci_address": "0000:86:00.0", "netdev": "ens1f0", "rdma_device": None}}},
        {"item": {"rdma_device": "mlx5_3", "num_vfs": 2}},
    ]
    assert var("sriov__wait_pfs", sriov_vfs_result={"results": results}) == [
        {"by": "netdev", "name": "ibp24s0", "pci_address": "0000:18:00.0", "needs": ["netdev", "rdma_device"]},
        {"by": "pci_address", "name": "0000:86:00.0", "pci_address": "0000:86:00.0", "needs": ["netdev"]},
        {"by": "rdma_device", "name": "mlx5_3", "pci_address": None, "needs": ["rdma_device"]}]
