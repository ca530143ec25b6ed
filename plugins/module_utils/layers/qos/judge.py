# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``qos`` layer's audit judgement: the module's planner run on the facts (``layers.qos``), and one DSCP and
priority across the inventory (one fabric).

Per RoCE port and setting (``qos.trust``, ``qos.dscp2prio``, ``qos.pfc``, ``qos.ecn``, ``qos.cnp``, ``qos.roce_tos``,
``qos.traffic_class``) a check is ``drift`` exactly when the plan has that action for the port, with the planned
actions as the evidence (what ``roce_qos`` in check mode lists); ``qos.boot_unit`` likewise for the boot files.  A node
without RoCE ports gets no check; unless ``roce_qos_manage`` is true (opt-in) the layer says nothing.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import check as _check
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import plan as _plan

REMEDY = "run the roce_qos role"
#: check id -> the plan action that fixes it, and the port field its live value comes from
SETTINGS = (("qos.trust", "set_trust", "trust"), ("qos.dscp2prio", "set_dscp2prio", "dscp2prio"),
            ("qos.pfc", "set_pfc", "pfc"), ("qos.ecn", "set_ecn", "ecn"), ("qos.cnp", "set_cnp", "cnp"),
            ("qos.roce_tos", "set_roce_tos", "roce_tos"), ("qos.traffic_class", "set_traffic_class", "traffic_class"))


def _wanted(check_id, desired, item):
    """What the setting should read on a port (for the report's desired column)."""
    prio, tos = int(desired["priority"]), _plan.tos_of(desired["dscp"])
    return {"qos.trust": "dscp", "qos.dscp2prio": dict((str(d), p) for d, p in _plan.entries_of(desired)),
            "qos.pfc": [1 if i == prio else 0 for i in range(8)],
            "qos.ecn": {"roce_np": {prio: 1}, "roce_rp": {prio: 1}},
            "qos.cnp": {"cnp_dscp": int(desired["cnp_dscp"]), "cnp_802p_prio": int(desired["cnp_priority"])},
            "qos.roce_tos": tos, "qos.traffic_class": tos}[check_id] if item is not None else None


def _applies(check_id, item, desired):
    if check_id == "qos.ecn":
        return desired.get("ecn", True) and (item.get("ecn") or {}).get("roce_np") is not None
    if check_id == "qos.cnp":
        return item.get("cnp") is not None
    if check_id == "qos.traffic_class":
        return item.get("traffic_class") is not None
    return True


def judge(section, variables):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    desired = _plan.desired_of(variables) if variables is not None else None
    if desired is None:
        return []
    if section is None:
        return [_check("qos.facts", "unknown", detail="rdma_facts gave no layers.qos (an older collection)")]
    planned = _plan.plan(desired, section)
    if planned["skip"]:
        return []
    ports = section.get("ports") or {}
    wanted = sorted(n for n in ports if not desired.get("interfaces") or n in desired["interfaces"])
    checks = [_check("qos.facts", "fail", detail=problem, remedy="fix the node, then run the roce_qos role")
              for problem in planned["problems"]]
    for ifname in wanted:
        item = ports[ifname]
        subject = "%s (%s port %s)" % (ifname, item.get("rdma_device"), item.get("port"))
        if item.get("error") or item.get("sysfs_error"):
            checks.append(_check("qos.port", "unknown", subject, detail=item.get("error") or item.get("sysfs_error")))
            continue
        for check_id, action, field in SETTINGS:
            if not _applies(check_id, item, desired):
                continue
            steps = [s for s in planned["actions"] if s["action"] == action and s["target"] == ifname]
            checks.append(_check(check_id, "drift" if steps else "ok", subject, _wanted(check_id, desired, item),
                                 item.get(field), persisted=None, remedy=REMEDY, detail="planned: %s" % steps if steps else None))
    files = [s for s in planned["actions"] if s["action"] in ("write_script", "write_unit")]
    if desired.get("boot_unit", True) and planned["script"] is not None:
        unit = section.get("unit") or {}
        checks.append(_check("qos.boot_unit", "drift" if files else "ok", unit.get("path"), "installed, current",
                             None, persisted="present" if unit.get("exists") else "absent", remedy=REMEDY,
                             detail="planned: %s" % files if files else None))
    return checks


def signature(section):
    """A host's live fabric settings: ``{"trust", "roce_tos", "pfc"}`` per RoCE port read without error."""
    out = {}
    for ifname, item in sorted(((section or {}).get("ports") or {}).items()):
        if item.get("error") or "pfc" not in item:
            continue
        out[ifname] = (item.get("trust"), item.get("roce_tos") if item.get("roce_tos_group") else 0,
                       tuple(item.get("pfc") or ()))
    return out


def _describe(sig):
    trust, tos, pfc = sig
    prios = [str(i) for i, on in enumerate(pfc) if on]
    return "trust %s, RoCE ToS %s (DSCP %s), PFC on priority %s" % (trust, tos, tos >> 2 if tos is not None else None,
                                                                    ",".join(prios) or "none")


def inventory_judge(hosts):
    """``{host: [checks]}``: ``qos.inventory`` on every host with RoCE ports: one fabric needs one trust, one RoCE
    DSCP and one lossless priority on every port of every host.  The most common setting is the reference; the
    hosts (and ports) that differ drift.  Pure."""
    counts, per_host = {}, {}
    for name, section in hosts.items():
        sigs = signature(section)
        per_host[name] = sigs
        for sig in sigs.values():
            counts[sig] = counts.get(sig, 0) + 1
    out = dict((name, []) for name in hosts)
    if not counts:
        return out
    common = max(sorted(counts, key=repr), key=lambda sig: counts[sig])
    for name in sorted(hosts):
        sigs = per_host[name]
        if not sigs:
            continue
        odd = dict((ifname, _describe(sig)) for ifname, sig in sigs.items() if sig != common)
        if len(counts) == 1 or not odd:
            out[name].append(_check("qos.inventory", "ok", "RoCE fabric", _describe(common)))
            continue
        out[name].append(_check(
            "qos.inventory", "drift", "RoCE fabric", _describe(common), odd, persisted=None,
            remedy="give every host the same roce_qos_priority and roce_qos_dscp and run the roce_qos role",
            detail="the inventory's RoCE ports run %d different settings; %d port(s) have the most common one"
            % (len(counts), counts[common])))
    return out
