# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``irq`` layer's audit judgement: the module's planner run on the facts (``layers.irq``).

The desired state comes from the role's variables, and the reserved CPUs from the kubelet role's own
``kubelet_topology_reserved_system_cpus`` (``irq_affinity_cpus`` overrides it).  A NIC whose vectors the plan would
move drifts, with the planned ``set_affinity`` actions as the evidence (the same dicts the module's check mode
returns); the boot files and irqbalance's configuration likewise.  Nothing is judged unless ``irq_affinity_manage``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import parse_cpulist
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import compact as _compact
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import observe as _pcie_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import desired_bool

REMEDY = "run the irq_affinity role"


def desired_of(desired):
    """The planner's desired state from the role's variables (None when the layer is not managed)."""
    desired = desired or {}
    if desired.get("irq_affinity_manage") is not True:
        return None
    text = desired.get("irq_affinity_cpus") or desired.get("kubelet_topology_reserved_system_cpus")
    try:
        cpus = parse_cpulist(str(text)) if text not in (None, "") else None
    except ValueError:
        cpus = None
    return {"cpus": cpus, "cpus_text": text, "on_disjoint": desired.get("irq_affinity_on_disjoint") or "fail",
            "devices": None, "boot_unit": desired_bool(desired, "irq_affinity_boot_unit"),
            "irqbalance": desired.get("irq_affinity_irqbalance") or "policy",
            "wait": desired.get("irq_affinity_boot_wait") or _plan.UNIT_WAIT,
            "unit": _observe.UNIT, "script": _observe.SCRIPT, "policy": _observe.POLICY}


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    want = desired_of(desired)
    if want is None:
        return []
    if section is None:
        return [{"id": "irq.facts", "status": "unknown", "detail": "rdma_facts gave no layers.irq (an older collection)"}]
    if want["cpus_text"] not in (None, "") and want["cpus"] is None:
        return [{"id": "irq.affinity", "status": "fail", "subject": "irq_affinity_cpus", "desired": want["cpus_text"],
                 "detail": "not a CPU list: %r" % (want["cpus_text"],)}]
    section = _compact.unpack(section)  # the facts' vector tables (older collections: per-vector dicts, as they are)
    observed = section.get("devices") or {}
    wanted = _pcie_observe.audited_devices(list((desired or {}).get("irq_affinity_devices") or []), observed) or sorted(observed)
    want["devices"] = [bdf for bdf in wanted if bdf in observed] or wanted
    planned = _plan.plan(want, section)
    checks = []
    for bdf in sorted(want["devices"]):
        item = observed.get(bdf) or {}
        subject = "%s (%s)" % (bdf, ", ".join(item.get("rdma_devices") or [])) if item.get("rdma_devices") else bdf
        problems = [p for p in planned["problems"] if p.startswith(bdf)]
        if problems or bdf not in planned["targets"]:
            checks.append({"id": "irq.affinity", "status": "fail" if "error" not in item else "unknown",
                           "subject": subject, "detail": "; ".join(problems) or item.get("error")})
            continue
        work = [s for s in planned["actions"] if s["action"] == "set_affinity" and s["device"] == bdf]
        live = sorted(set(i.get("affinity") for i in (item.get("irqs") or {}).values()))
        persisted = (section.get("unit") or {}).get("values", {}).get(bdf) if want["boot_unit"] else None
        checks.append({"id": "irq.affinity", "status": "drift" if work else "ok", "subject": subject,
                       "desired": planned["targets"][bdf], "live": live, "persisted": persisted,
                       "remedy": REMEDY if work else None, "detail": "planned: %s" % work if work else None})
        for entry in [m for m in planned["managed"] if m["device"] == bdf]:
            checks.append({"id": "irq.managed", "status": "ok", "subject": "%s IRQ %s" % (subject, entry["irq"]),
                           "live": entry["affinity"], "detail": "kernel-managed affinity (%s): reported, not moved"
                           % entry["name"]})
    files = [s for s in planned["actions"] if s["action"] in ("write_script", "write_unit")]
    if files:
        checks.append({"id": "irq.boot_unit", "status": "drift", "subject": _observe.UNIT, "desired": planned["targets"],
                       "persisted": (section.get("unit") or {}).get("values"), "remedy": REMEDY,
                       "detail": "planned: %s" % files})
    balance = [s for s in planned["actions"] if s["action"] in ("write_policy", "edit_irqbalance_env")]
    if balance:
        checks.append({"id": "irq.irqbalance", "status": "drift", "subject": "irqbalance", "remedy": REMEDY,
                       "detail": "planned: %s" % balance})
    for problem in planned["problems"]:
        if problem.startswith("irqbalance") or problem.startswith("cpus:"):
            checks.append({"id": "irq.irqbalance" if problem.startswith("irqbalance") else "irq.affinity",
                           "status": "fail", "subject": problem.split(":")[0], "detail": problem})
    return checks
