# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``netns`` layer's audit judgement: the module's planner run on the facts (``layers.netns``).

* ``netns.mode`` judges the mode, now and at the next boot: drift when the plan switches the running kernel (or it
  would need a reboot), or when the next boot's mode (the boot configuration's ``ib_core.netns_mode=``, else the last
  modprobe.d setting, else ib_core's default, shared) is not the desired one.  The plan's actions are the evidence
  (``detail``: ``planned: [...]``).  A plan whose only work is to write our file with the mode the node already gets
  (ib_core's default, shared, with no file) is not drift.  ``unknown`` when ib_core is loaded and its parameter could
  not be read.
* ``netns.override`` (fail): the plan's overrides - modprobe.d settings kmod gives ib_core after the role's file, which
  provisioning cannot fix (another tool's file; the module refuses with ``on_conflict=fail``).
* ``netns.shared_device_plugin`` (fail, even without a desired state): the RDMA shared device plugin runs in
  exclusive mode, where it stops seeing devices.

Facts gathered before the layer was a room (no ``layers.netns``) are judged through :func:`section_of`, which takes
the same values from ``netns_mode``, ``persisted`` and ``device_plugins``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import desired_bool
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns.observe import CONF_FILE, SHARED_DEVICE_PLUGIN

REMEDY = "run the rdma_netns role"


def section_of(facts):
    """The ``layers.netns`` section from facts without it (an older collection, or its observer failed): the live
    mode, the persisted mode, the modprobe.d lines and the device plugins ``rdma_facts`` returns at its top level.
    Without the files' text, our file is judged by its ib_core lines."""
    persisted = facts.get("persisted") or {}
    live = facts.get("netns_mode")
    return {"ib_core_loaded": live is not None or bool(facts.get("devices")), "live": live, "cmdline_value": None,
            "cmdline": None, "modprobe": persisted.get("modprobe"), "files": None,
            "persisted": persisted.get("netns_mode") or {},
            "shared_device_plugin": [p for p in facts.get("device_plugins") or [] if p.startswith(SHARED_DEVICE_PLUGIN)]}


def _directives(item):
    return [tuple(entry) for entry in item.get("directives") or []]


def _conf_state(section, conf, want):
    """Our file as a FileState from the facts: its content, mode and owner when it sets ib_core options."""
    listed = dict((item["path"], item) for item in section.get("modprobe") or [])
    files = section.get("files")
    if files is not None and conf in files:
        item = files[conf]
        return FileState(conf, True, item.get("content"), item.get("mode"), item.get("uid"), item.get("gid"),
                         item.get("link"))
    if conf not in listed:
        return FileState(conf)
    rendered = _plan.render_conf(want)
    if files is None and _directives(listed[conf]) == [tuple(e) for e in _modprobe.directives(rendered)]:
        return FileState(conf, True, rendered, _plan.CONF_MODE, 0, 0)  # older facts: the same ib_core lines
    return FileState(conf, True, None)  # there, without the option line ours has


def observed_of(section, conf, want):
    """:func:`observe.observe`'s shape from the facts section, for the planner."""
    return {"ib_core_loaded": bool(section.get("ib_core_loaded")), "live": section.get("live"),
            "cmdline_value": section.get("cmdline_value"), "cmdline": section.get("cmdline"),
            "conf": _conf_state(section, conf, want),
            "modprobe": [(item["path"], _directives(item)) for item in section.get("modprobe") or []
                         if item["path"] != conf],
            "shared_device_plugin": section.get("shared_device_plugin") or []}


def plan_of(section, desired):
    """``(plan, problem)``: the module's plan for this host's desired state, as the role calls the module."""
    want = desired["rdma_netns_mode"]
    conf = desired.get("rdma_netns_conf_file") or CONF_FILE
    try:
        return _plan.plan(want, observed_of(section, conf, want), conf,
                          live=desired_bool(desired, "rdma_netns_live")), None
    except ValueError as exc:
        return None, str(exc)
    except RdmaNodeError as exc:
        return None, exc.msg


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    checks = []
    want = (desired or {}).get("rdma_netns_mode")
    live = section.get("live")
    persisted = (section.get("persisted") or {}).get("effective")
    if want:
        planned, problem = plan_of(section, desired)
        next_boot_ok = (persisted or "shared") == want
        if live is None and section.get("ib_core_loaded"):
            check = {"id": "netns.mode", "status": "unknown", "desired": want, "persisted": persisted,
                     "detail": "ib_core's netns_mode could not be read"}
        elif live is None:
            check = {"id": "netns.mode", "status": "ok" if next_boot_ok else "drift", "desired": want,
                     "persisted": persisted, "remedy": REMEDY, "detail": "ib_core is not loaded"}
        else:
            live_work = planned["live_decision"] != "none" if planned is not None else live != want
            status = "drift" if live_work or not next_boot_ok else "ok"
            remedy = None
            if status == "drift":
                remedy = ("run the rdma_netns role: it switches live when no network namespace exists (no pods), "
                          "else reboot the node, the mode is persisted" if persisted == want
                          else "run the rdma_netns role (rdma_netns_mode=%s)" % want)
            check = {"id": "netns.mode", "status": status, "desired": want, "live": live, "persisted": persisted,
                     "remedy": remedy,
                     "detail": None if persisted is not None else "nothing persisted: ib_core's default is shared"}
        if check["status"] == "drift" and planned is not None:
            check["detail"] = "; ".join(part for part in (check["detail"], "planned: %s" % planned["actions"]) if part)
        checks.append(check)
        if section.get("modprobe") is not None:  # facts of an older collection version have no modprobe.d lines
            checks.extend(_override_checks(planned, problem, want))
    running = section.get("shared_device_plugin") or []
    if (live == "exclusive" or want == "exclusive") and running:
        checks.append({"id": "netns.shared_device_plugin", "status": "fail",
                       "desired": "no RDMA shared device plugin in exclusive mode", "live": running,
                       "remedy": "use the SR-IOV device plugin (one VF per pod) or rdma_netns_mode=shared",
                       "detail": "the RDMA shared device plugin stops seeing devices when the netns mode is exclusive"})
    return checks


def _override_checks(planned, problem, want):
    """``netns.override``: the plan's overrides, settings kmod gives ib_core after the role's file."""
    if planned is None:
        return [{"id": "netns.override", "status": "unknown", "desired": want, "detail": problem}]
    return [{"id": "netns.override", "status": "fail", "subject": item["file"], "desired": want, "live": item["mode"],
             "persisted": "%s:%s netns_mode=%s" % (item["file"], item["line"], item["value"]),
             "remedy": "remove that setting (sriov-network-operator: give its SriovNetworkPoolConfig the same rdmaMode, "
                       "or none), or set rdma_netns_conf_file to a name that sorts after it",
             "detail": _plan.describe_override(item, want)} for item in planned["overrides"]]
