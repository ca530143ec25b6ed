"""rdma_audit_facts: the facts of one host from its registered gather result, whatever shape it has."""

import base64
import json
import zlib

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.filter.rdma_audit import FilterModule, rdma_audit_facts

FACTS = {"devices": [{"name": "mlx5_0"}], "gpus": [], "problems": [], "text": "caf\u00e9"}
TEXT = json.dumps(FACTS, separators=(",", ":"))


@pytest.mark.parametrize("registered", [
    {"changed": False, "rdma_facts_json_zlib": base64.b64encode(zlib.compress(TEXT.encode())).decode()},
    {"changed": False, "rdma_facts_json": TEXT},
    {"changed": False, "ansible_facts": {"rdma": FACTS}},
])
def test_every_shape_gives_the_facts(registered):
    assert rdma_audit_facts(registered) == FACTS
    assert FilterModule().filters()["rdma_audit_facts"] is rdma_audit_facts


@pytest.mark.parametrize("registered,message", [
    ({"unreachable": True, "msg": "ssh: refused"}, "rdma_audit_facts: unreachable: ssh: refused"),
    ({"failed": True, "msg": "boom"}, "rdma_audit_facts: rdma_facts failed: boom"),
    ("not a result", "rdma_audit_facts: rdma_facts did not run on this host"),
    ({"rdma_facts_json_zlib": "%%%"}, "rdma_audit_facts: rdma_audit_gather returned compressed facts that cannot be read"),
    ({"rdma_facts_json": "[]"}, "rdma_audit_facts: rdma_audit_gather returned facts that are not a JSON object: list"),
])
def test_a_result_without_readable_facts_says_why(registered, message):
    with pytest.raises(AnsibleFilterError) as info:
        rdma_audit_facts(registered)
    assert str(info.value).startswith(message)
