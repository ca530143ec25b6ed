"""The common result shape and the typed errors' fail_json arguments."""

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState, plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action, step_diff


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


def test_add_plan_derives_each_steps_diff_from_the_step():
    """A file step shows its file's diff, a value step its before -> after, a step with neither no diff; the
    actions are the plan's, in its order, and without --diff no diff is made."""
    unit = plan_file(FileState("/etc/systemd/system/x.service", False, None, None, None, None), "[Unit]\n", 0o644, 0, 0)
    steps = [action("set_max_read_request", "0000:17:00.0", before=512, after=4096),
             action("write_unit", "/etc/systemd/system/x.service"),
             action("reload", "systemd"),
             action("set_trust", "eth0", before="pcp", after="dscp")]
    result = Result()
    result.add_plan(steps, [unit], label=lambda step: "%s %s" % (step["target"], step["action"][4:]))
    out = result.as_dict()
    assert out["actions"] == steps and out["changed"] is True
    assert out["diff"][0] == {"before_header": "0000:17:00.0 max_read_request", "before": "512\n",
                              "after_header": "0000:17:00.0 max_read_request", "after": "4096\n"}
    assert out["diff"][1] == unit.diff() and out["diff"][1]["after"] == "[Unit]\n"
    assert out["diff"][2]["before"] == "pcp\n" and len(out["diff"]) == 3  # the reload has no diff
    quiet = Result()
    quiet.add_plan(steps, [unit], with_diff=False)
    assert quiet.as_dict()["actions"] == steps and "diff" not in quiet.as_dict()
    assert step_diff(action("set_pfc", "eth0", before=None, after=[0, 0, 0, 1]))["after"] == "[0, 0, 0, 1]\n"
    assert step_diff(action("set_pfc", "eth0", before=None, after=[3]))["before_header"] == "eth0 set_pfc"
