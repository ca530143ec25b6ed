"""rdma_audit_gather: the node's facts as JSON text (not ansible_facts), compressed or not, role_vars, the audit
reading every shape."""

import base64
import json
import zlib
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.rdma.k8s_node.plugins.action import rdma_audit_gather as G
from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import rdma_audit_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _audit, _audit_hosts
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry as _layers

FACTS = {"devices": [{"name": "mlx5_0", "netdevs": ["ibp24s0"], "fw_ver": "28.39.1002"}], "gpus": [],
         "problems": [], "layers": {"irq": {"devices": {"0000:18:00.0": {"irqs": {"24": {"affinity": "0-3"}}}}}},
         "text": "caf\u00e9 \u2603 \"quoted\" \\ back"}


def _action(args, task_vars, module=None, fail=None):
    task = mock.MagicMock(args=args, async_val=0, check_mode=False, action="rdma.k8s_node.rdma_audit_gather")
    connection = mock.MagicMock()
    connection._shell.tmpdir = "/tmp/x"  # pylint: disable=protected-access
    action = G.ActionModule(task, connection, mock.MagicMock(), DataLoader(),
                            Templar(loader=DataLoader(), variables=task_vars))
    calls = []

    def execute(module_name, module_args, task_vars):  # pylint: disable=redefined-outer-name
        calls.append((module_name, dict(module_args)))
        if fail:
            raise fail
        return json.loads(json.dumps(module))

    action._execute_module = execute  # pylint: disable=protected-access
    return action, calls


def test_facts_come_back_as_json_text_not_ansible_facts():
    action, calls = _action({"host_root": "/host"}, {},
                            {"changed": False, "ansible_facts": {"rdma": FACTS}, "invocation": {"module_args": {}}})
    result = action.run(task_vars={})
    assert calls == [("rdma.k8s_node.rdma_facts", {"host_root": "/host", "counters_interval": 0.0,
                                                   "facts_json": True})]
    assert "ansible_facts" not in result
    assert json.loads(result["rdma_facts_json"]) == FACTS
    assert result["rdma_audit_desired"] == {} and result["_ansible_no_log"] is True
    assert _audit_hosts.facts_of(result) == (FACTS, None)


def test_the_modules_json_text_is_the_registered_text():
    """rdma_facts prints the facts as rdma_facts_json (facts_json: true): the action keeps the module's text as it
    is, the same text it made from ansible_facts.rdma before (compact, ASCII escapes)."""
    text = json.dumps(FACTS, separators=(",", ":"))
    action, _calls = _action({}, {}, {"changed": False, "rdma_facts_json": text,
                                      "ansible_facts": {"discovered_interpreter_python": "/usr/bin/python3"}})
    result = action.run(task_vars={})
    assert result["rdma_facts_json"] == text == G._ENCODER.encode(FACTS)  # pylint: disable=protected-access
    assert result["ansible_facts"] == {"discovered_interpreter_python": "/usr/bin/python3"}
    assert result["_ansible_no_log"] is True and "failed" not in result
    assert _audit_hosts.facts_of(result) == (FACTS, None)


@pytest.mark.parametrize("text,bad", [
    (r'{"a":["x\\udc80y"]}', False),  # an escaped backslash before "udc80": no surrogate
    (r'{"a":["\ud83d\ude00","caf\u00e9"]}', False),  # a surrogate pair is one character
    (r'{"a":{"b":[1,{"c":"\udc80"}]}}', True),
    (r'{"\uDC80":1}', True),  # in a key, upper-case hex
])
def test_a_string_that_is_not_utf8_fails_the_host_as_ansible_core_did(text, bad):
    """ansible-core's decoder refused a lone surrogate anywhere in a module's result; inside the JSON text it sees
    one string, so the action checks the facts' strings when the text holds a surrogate escape."""
    assert (G.invalid_utf8(text) is not None) is bad
    action, _calls = _action({}, {}, {"changed": False, "rdma_facts_json": text})
    result = action.run(task_vars={})
    if not bad:
        assert result["rdma_facts_json"] == text and not result.get("failed")
        return
    assert result["failed"] is True and "rdma_facts_json" not in result and "_ansible_no_log" not in result
    facts, error = _audit_hosts.facts_of(result)
    assert facts is None and error == ("rdma_facts failed: rdma_facts returned facts with a string that is not "
                                       "valid UTF-8: '\\udc80'")


def test_the_interpreter_discovered_on_the_node_stays_a_fact():
    """ansible-core's _execute_module puts discovered_interpreter_python into the result's ansible_facts: it must
    reach the host's facts (else each later module task on the node discovers the interpreter again)."""
    action, _calls = _action({}, {}, {"changed": False, "ansible_facts": {
        "rdma": FACTS, "discovered_interpreter_python": "/usr/bin/python3"}})
    result = action.run(task_vars={})
    assert result["ansible_facts"] == {"discovered_interpreter_python": "/usr/bin/python3"}
    assert json.loads(result["rdma_facts_json"]) == FACTS


def test_a_failed_module_keeps_its_message_and_has_no_facts():
    action, _calls = _action({}, {}, {"failed": True, "msg": "host_root /nope does not exist"})
    result = action.run(task_vars={})
    assert "rdma_facts_json" not in result and "_ansible_no_log" not in result
    assert _audit_hosts.facts_of(result) == (None, "rdma_facts failed: host_root /nope does not exist")


def test_an_unreachable_node_keeps_its_desired_state():
    task_vars = {"rdma_netns_mode": "exclusive"}
    action, _calls = _action({"desired_vars": ["rdma_netns_mode", "nope"]}, task_vars,
                             fail=AnsibleConnectionFailure("ssh: connection refused"))
    result = action.run(task_vars=task_vars)
    assert result["unreachable"] is True and "rdma_facts_json" not in result
    assert result["rdma_audit_desired"] == {"rdma_netns_mode": "exclusive", "nope": "__unset__"}


@pytest.mark.parametrize("mode,desired_state", [("desired", True), ("facts_only", False)])
def test_role_vars_give_the_options_the_role_passed_as_templates(mode, desired_state):
    task_vars = {"rdma_k8s_node_host_root": "/host",
                 "rdma_audit_host_root": trust_as_template("{{ rdma_k8s_node_host_root | default('/') }}"),
                 "rdma_audit_hw_counter_interval": 2, "rdma_audit_mode": mode}
    # module_defaults' host_root (in the task's args) loses to the role's variable, as "{{ rdma_audit_host_root }}" did
    action, calls = _action({"role_vars": True, "host_root": "/from-module-defaults"}, task_vars,
                            {"ansible_facts": {"rdma": FACTS}})
    result = action.run(task_vars=task_vars)
    assert calls == [("rdma.k8s_node.rdma_facts", {"host_root": "/host", "counters_interval": 2.0,
                                                   "facts_json": True})]
    assert sorted(result["rdma_audit_desired"]) == (sorted(_layers.desired_vars()) if desired_state else [])


def test_role_vars_off_or_undefined_leave_the_options():
    task_vars = {"rdma_audit_host_root": "/ignored", "rdma_audit_mode": "desired"}
    action, calls = _action({"host_root": "/host"}, task_vars, {"ansible_facts": {"rdma": FACTS}})
    assert action.run(task_vars=task_vars)["rdma_audit_desired"] == {}
    action, calls2 = _action({"role_vars": True}, {}, {"ansible_facts": {"rdma": FACTS}})
    action.run(task_vars={})
    assert calls[0][1]["host_root"] == "/host"
    assert calls2[0][1] == {"host_root": "/", "counters_interval": 0.0, "facts_json": True}


def test_a_bad_role_variable_is_named():
    task_vars = {"rdma_audit_hw_counter_interval": "soon"}
    action, _calls = _action({"role_vars": True}, task_vars, {"ansible_facts": {"rdma": FACTS}})
    with pytest.raises(AnsibleActionFail, match="counters_interval.*counters_interval from rdma_audit_hw_counter_interval"):
        action.run(task_vars=task_vars)


@pytest.mark.parametrize("registered,expected", [
    ({"rdma_facts_json": json.dumps(FACTS)}, (FACTS, None)),
    # rdma_facts' own registered result, and rdma_audit_gather's before it returned rdma_facts_json
    ({"changed": False, "ansible_facts": {"rdma": FACTS}}, (FACTS, None)),
    ({"rdma_facts_json": "{not json"}, (None, "rdma_audit_gather returned facts that are not JSON: ")),
    ({"rdma_facts_json": "[1, 2]"}, (None, "rdma_audit_gather returned facts that are not a JSON object: list")),
    ({"rdma_facts_json": 7}, (None, "rdma_audit_gather returned facts that are not a JSON object: NoneType")),
    ({"msg": "no facts"}, (None, "rdma_facts failed: no facts")),
])
def test_facts_of_reads_the_json_text_and_the_old_shape(registered, expected):
    facts, error = _audit_hosts.facts_of(registered)
    assert facts == expected[0]
    assert (error or "").startswith(expected[1] or "") and bool(error) == bool(expected[1])


def test_both_shapes_give_the_same_host_spec():
    defaults = {}
    new = _audit_hosts.host_spec({}, "facts_only", [], defaults, registered={"rdma_facts_json": json.dumps(FACTS)})
    old = _audit_hosts.host_spec({}, "facts_only", [], defaults, registered={"ansible_facts": {"rdma": FACTS}})
    via_vars = _audit_hosts.host_spec({"rdma_audit__facts": {"rdma_facts_json": json.dumps(FACTS)}}, "facts_only", [],
                                      defaults)
    # the text is decoded by the audit itself, one host at a time: the spec carries it, and it decodes to the facts
    assert new == via_vars and new.pop("facts_json") == json.dumps(FACTS) and new["facts"] is None
    assert dict(new, facts=FACTS) == old and old["facts"] == FACTS
    assert _audit.audit({"h": dict(new, facts_json=json.dumps(FACTS))}) == _audit.audit({"h": old})


def test_a_text_that_is_not_facts_is_that_hosts_unknown_in_the_audit():
    for text, why in (("{", "not JSON"), ("[1]", "not a JSON object: list")):
        spec = _audit_hosts.host_spec({}, "facts_only", [], {}, registered={"rdma_facts_json": text})
        host = _audit.audit({"h": spec, "ok": _audit_hosts.host_spec({}, "facts_only", [], {},
                                                                     registered={"ansible_facts": {"rdma": FACTS}})})
        gathered = dict((name, [c["detail"] for c in h["checks"] if c["id"] == "facts.gathered"])
                        for name, h in host["hosts"].items())
        assert host["hosts"]["h"]["status"] == "unknown" and why in gathered["h"][0] and gathered["ok"] == []


def _zipped(text):
    return base64.b64encode(zlib.compress(text.encode())).decode()


def test_compress_asks_the_node_and_keeps_its_compressed_text():
    """compress: rdma_facts compresses its text on the node; the action keeps that text as it is (after checking
    it), the audit and the public filter read it back."""
    text = json.dumps(FACTS, separators=(",", ":"))
    action, calls = _action({"compress": True}, {}, {"changed": False, "rdma_facts_json_zlib": _zipped(text)})
    result = action.run(task_vars={})
    assert calls == [("rdma.k8s_node.rdma_facts", {"host_root": "/", "counters_interval": 0.0, "facts_json": True,
                                                   "compress": True})]
    assert result["rdma_facts_json_zlib"] == _zipped(text) and "rdma_facts_json" not in result
    assert result["_ansible_no_log"] is True and "failed" not in result
    assert _audit_hosts.facts_of(result) == (FACTS, None)
    plain_spec = _audit_hosts.host_spec({}, "facts_only", [], {}, registered={"rdma_facts_json": text})
    zipped_spec = _audit_hosts.host_spec({}, "facts_only", [], {}, registered=result)
    assert zipped_spec.pop("facts_json_zlib") == result["rdma_facts_json_zlib"]
    assert dict(zipped_spec, facts_json=text) == plain_spec
    assert _audit.audit({"h": _audit_hosts.host_spec({}, "facts_only", [], {}, registered=result)}) == \
        _audit.audit({"h": plain_spec})


def test_compress_with_facts_returned_as_facts_compresses_them_here():
    """An rdma_facts that returned ansible_facts.rdma (the shape before facts_json): compressed on the controller."""
    action, _calls = _action({"compress": True}, {}, {"ansible_facts": {"rdma": FACTS}})
    result = action.run(task_vars={})
    assert _facts_text.inflate(result["rdma_facts_json_zlib"]) == (G._ENCODER.encode(FACTS), None)  # pylint: disable=protected-access
    assert "rdma_facts_json" not in result and "ansible_facts" not in result


@pytest.mark.parametrize("blob,why", [
    ("not base64!", "cannot be read"),
    (base64.b64encode(b"plain text").decode(), "cannot be read"),
    (_zipped('{"a":1}')[:-8], "cut short"),
    (base64.b64encode(zlib.compress(b'{"a":1}') + b"more").decode(), "followed by other data"),
    (base64.b64encode(zlib.compress(b'{"a":"\xff"}')).decode(), "cannot be read"),
    (_zipped(r'{"a":"\udc80"}'), "not valid UTF-8: '\\udc80'"),
])
def test_compressed_facts_that_cannot_be_read_fail_that_host(blob, why):
    action, _calls = _action({"compress": True}, {}, {"changed": False, "rdma_facts_json_zlib": blob})
    result = action.run(task_vars={})
    assert result["failed"] is True and "rdma_facts_json_zlib" not in result and "_ansible_no_log" not in result
    assert why in result["msg"] and result["msg"].startswith("rdma_facts returned ")
    facts, error = _audit_hosts.facts_of(result)
    assert facts is None and error == "rdma_facts failed: " + result["msg"]


def test_the_inflate_bounds():
    """At most MAX_TEXT bytes (a text of exactly the limit is read), and past RATIO_FREE at most MAX_RATIO times the
    compressed stream: 2 MiB of zeros is 2 KB compressed."""
    text = "0" * (1024 * 1024)
    blob = _facts_text.deflate(text)
    assert _facts_text.inflate(blob, limit=len(text)) == (text, None)
    assert _facts_text.inflate(blob, limit=len(text) - 1) == (
        None, "compressed facts of more than %d bytes: not read" % (len(text) - 1))
    bomb = base64.b64encode(zlib.compress(b"0" * (2 * 1024 * 1024), 9)).decode()
    sent = len(base64.b64decode(bomb))
    assert _facts_text.inflate(bomb) == (
        None, "compressed facts that inflate more than 50 times (%d bytes sent): not read" % sent)
    # under RATIO_FREE any ratio is read; a real node's facts compress about 8 to 11 times
    assert _facts_text.inflate(blob) == (text, None)
    for limit in (0, -1):
        with pytest.raises(ValueError, match="limit must be a positive number of bytes"):
            _facts_text.inflate(blob, limit=limit)


def test_a_compression_bomb_is_that_hosts_unknown_and_the_filter_says_why():
    bomb = base64.b64encode(zlib.compress(b"[" + b"{}," * (1024 * 1024) + b"{}]", 9)).decode()
    assert len(bomb) < 8192
    spec = _audit_hosts.host_spec({}, "facts_only", [], {}, registered={"changed": False, "rdma_facts_json_zlib": bomb})
    ok = _audit_hosts.host_spec({}, "facts_only", [], {}, registered={"ansible_facts": {"rdma": FACTS}})
    report = _audit.audit({"bomb": spec, "ok": ok})
    gathered = [c["detail"] for c in report["hosts"]["bomb"]["checks"] if c["id"] == "facts.gathered"]
    assert report["hosts"]["bomb"]["status"] == "unknown"
    assert "rdma_audit_gather returned compressed facts that inflate more than 50 times" in gathered[0]
    # the other host is judged as it is alone
    assert report["hosts"]["ok"] == _audit.audit({"ok": ok})["hosts"]["ok"]
    with pytest.raises(AnsibleFilterError, match="rdma_audit_facts: rdma_audit_gather returned compressed facts that "
                                                 "inflate more than 50 times"):
        rdma_audit_facts({"rdma_facts_json_zlib": bomb})


DEEP = '{"a":"\\udc80","b":' + "[" * 100000 + "]" * 100000 + "}"


@pytest.mark.parametrize("compress", [False, True])
def test_facts_nested_too_deeply_make_that_host_unknown(compress):
    """json.loads raises RecursionError (not a ValueError) on deep nesting: neither the gather (whose surrogate check
    decodes the text) nor the audit may raise it; the host is unknown, the others are judged."""
    key = "rdma_facts_json_zlib" if compress else "rdma_facts_json"
    action, _calls = _action({"compress": compress}, {},
                             {"changed": False, key: _zipped(DEEP) if compress else DEEP})
    result = action.run(task_vars={})
    assert not result.get("failed") and result[key]
    spec = _audit_hosts.host_spec({}, "facts_only", [], {}, registered=result)
    ok = _audit_hosts.host_spec({}, "facts_only", [], {}, registered={"ansible_facts": {"rdma": FACTS}})
    report = _audit.audit({"deep": spec, "ok": ok})
    gathered = [c["detail"] for c in report["hosts"]["deep"]["checks"] if c["id"] == "facts.gathered"]
    assert report["hosts"]["deep"]["status"] == "unknown"
    assert gathered == ["rdma_audit_gather returned facts nested too deeply to be decoded"]
    # the other host is judged as it is alone
    assert report["hosts"]["ok"] == _audit.audit({"ok": ok})["hosts"]["ok"]


def test_a_skipped_gather_says_it_was_skipped():
    registered = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
    assert _audit_hosts.facts_of(registered) == (
        None, "rdma_facts was skipped on this host: Conditional result was False")


@pytest.mark.parametrize("registered,expected", [
    ({"rdma_facts_json_zlib": _zipped(json.dumps(FACTS))}, (FACTS, None)),
    ({"rdma_facts_json_zlib": _zipped("[1]")}, (None, "rdma_audit_gather returned facts that are not a JSON object")),
    ({"rdma_facts_json_zlib": 5}, (None, "rdma_audit_gather returned compressed facts that are not a string: int")),
    # the compressed text wins over a plain one (the action returns one of them)
    ({"rdma_facts_json_zlib": _zipped(json.dumps(FACTS)), "rdma_facts_json": "{}"}, (FACTS, None)),
])
def test_facts_of_reads_the_compressed_text(registered, expected):
    facts, error = _audit_hosts.facts_of(registered)
    assert facts == expected[0]
    assert (error or "").startswith(expected[1] or "") and bool(error) == bool(expected[1])
