"""The rooms' shared helpers: role_params (remembered per spec, prefix and value; a fresh copy and the same refusal
every time), the registry's resolved judges, and the audit's collector of a room's checks."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import layers as L
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit

SPEC = {"name": {"type": "str", "default": "x"}, "count": {"type": "int"},
        "options": {"type": "dict"}, "items": {"type": "list", "elements": "str"},
        "mode": {"type": "str", "choices": ["a", "b"]}}


def test_role_params_copies_tuples_inside_raw_values():
    first = L.role_params({"v": {"type": "raw"}}, {"v": ({"k": [1]},)}, "p_")
    first["v"][0]["k"].append(2)
    assert L.role_params({"v": {"type": "raw"}}, {"v": ({"k": [1]},)}, "p_") == {"v": ({"k": [1]},)}


def test_role_params_returns_a_fresh_copy_every_time():
    first = L.role_params(SPEC, {"count": "3", "options": {"k": [1]}, "items": [1, "b"], "mode": None}, "p_")
    assert first == {"name": "x", "count": 3, "options": {"k": [1]}, "items": ["1", "b"], "mode": None}
    first["options"]["k"].append(2)
    first["items"].clear()
    again = L.role_params(SPEC, {"count": "3", "options": {"k": [1]}, "items": [1, "b"], "mode": None}, "p_")
    assert again == {"name": "x", "count": 3, "options": {"k": [1]}, "items": ["1", "b"], "mode": None}


def test_role_params_tells_values_of_other_types_apart():
    """``1``, ``True`` and ``"1"`` are equal or hash alike in Python; the module converts them differently."""
    assert L.role_params({"v": {"type": "str"}}, {"v": 1}, "p_") == {"v": "1"}
    assert L.role_params({"v": {"type": "str"}}, {"v": True}, "p_") == {"v": "True"}
    raw = {"v": {"type": "raw"}}
    assert [type(L.role_params(raw, {"v": value}, "p_")["v"]) for value in (1, True, 1.0, "1")] == [int, bool, float, str]


def test_role_params_refuses_the_same_value_every_time():
    messages = []
    while len(messages) < 3:
        with pytest.raises(InputError, match=r"option X is the variable p_X\).*mode") as raised:
            L.role_params(SPEC, {"mode": "c"}, "p_")
        messages.append(str(raised.value))
    assert len(set(messages)) == 1
    # another prefix names its own variables
    with pytest.raises(InputError, match=r"variable q_X"):
        L.role_params(SPEC, {"mode": "c"}, "q_")


def test_role_params_depends_on_the_spec():
    assert L.role_params({"v": {"type": "str"}}, {"v": 2}, "p_") == {"v": "2"}
    assert L.role_params({"v": {"type": "int"}}, {"v": 2}, "p_") == {"v": 2}
    with pytest.raises(InputError):
        L.role_params({"v": {"type": "int", "choices": [1]}}, {"v": 2}, "p_")


def test_role_params_validates_values_it_cannot_remember():
    class Odd(object):  # pylint: disable=too-few-public-methods
        pass

    odd = Odd()
    assert isinstance(L.role_params({"v": {"type": "raw"}}, {"v": odd}, "p_")["v"], Odd)
    assert L.role_params({"v": {"type": "dict"}}, {"v": {1: "a", "b": "c"}}, "p_") == {"v": {1: "a", "b": "c"}}
    with pytest.raises(L._Unfrozen):  # pylint: disable=protected-access
        L._frozen({"v": odd})  # pylint: disable=protected-access


def test_a_rooms_judge_is_imported_once(monkeypatch):
    layer = next(layer for layer in _registry.LAYERS if layer.name == "kubelet")
    judge = layer.judge
    assert judge.__module__.endswith("layers.kubelet.judge")
    assert _registry._RESOLVED[layer.judge_ref] is judge  # pylint: disable=protected-access
    imported = []
    monkeypatch.setattr(_registry.importlib, "import_module", imported.append)
    assert layer.judge is judge and not imported  # no import machinery per host and layer


def test_the_audits_collector_keeps_the_order_and_refuses_what_add_refuses():
    checks = _audit._Checks({"sysctl", "facts"})  # pylint: disable=protected-access
    checks.extend([L.check("sysctl.arp", "drift", "all", 1, 0, remedy="fix"),
                   {"id": "sysctl.arp", "status": "ok", "remedy": "not shown"},
                   L.check("kubelet.policy", "drift")])  # another layer: left out
    assert checks.items == [
        {"id": "sysctl.arp", "layer": "sysctl", "subject": "all", "status": "drift", "desired": 1, "live": 0,
         "persisted": None, "remedy": "fix", "detail": None},
        {"id": "sysctl.arp", "layer": "sysctl", "subject": None, "status": "ok", "desired": None, "live": None,
         "persisted": None, "remedy": None, "detail": None}]
    assert list(checks.items[0]) == list(_added()[0])  # the key order of add()
    with pytest.raises(ValueError, match="unknown status 'bad'"):
        checks.extend([L.check("sysctl.arp", "bad")])
    with pytest.raises(TypeError, match=r"unknown keys: \['extra'\]"):
        checks.extend([dict(L.check("sysctl.arp", "ok"), extra=1)])
    with pytest.raises(TypeError, match=r"unknown keys"):  # as add() did, whatever its layer
        checks.extend([dict(L.check("kubelet.policy", "ok"), extra=1)])


def _added():
    checks = _audit._Checks({"sysctl"})  # pylint: disable=protected-access
    checks.add("sysctl.arp", "drift", desired=1, live=0, remedy="fix", subject="all")
    return checks.items
