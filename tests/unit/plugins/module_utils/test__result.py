"""The common result shape and the typed errors' fail_json arguments."""

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action


def test_empty_result_is_unchanged():
    out = Result().as_dict()
    assert out == {"changed": False, "actions": [], "reboot_required": False, "restart_required": [], "observed": {}}


def test_actions_drive_changed_and_diff_shape():
    res = Result()
    res.add(action("write_file", "/etc/a"), {"before": "", "after": "x"})
    res.need_restart("containerd")
    res.need_restart("containerd")
    out = res.as_dict()
    assert out["changed"] is True
    assert out["actions"] == [{"action": "write_file", "target": "/etc/a"}]
    assert out["diff"] == {"before": "", "after": "x"}
    assert out["restart_required"] == ["containerd"]
    res.add(action("write_file", "/etc/b"), {"before": "y", "after": ""})
    assert isinstance(res.as_dict()["diff"], list)
    assert "diff" not in res.as_dict(with_diff=False)


def test_error_fail_kwargs_keep_message_and_partial_result():
    plain = RdmaNodeError("boom", {"path": "/x"}).to_fail_kwargs()
    assert plain == {"msg": "boom", "details": {"path": "/x"}}
    partial = ApplyError("failed", {"rolled_back": ["/a"]}, result={"changed": False, "msg": "ignored"}).to_fail_kwargs()
    assert partial["msg"] == "failed" and partial["changed"] is False and partial["details"]["rolled_back"] == ["/a"]
