# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``pcie`` layer's audit judgement: the module's planner run on the facts (``layers.pcie``).

A function whose plan has work drifts, with the planned action as the evidence; the boot unit likewise.  Without a
desired size (``pcie_tuning_max_read_request: null``, or a facts-only audit) the layer reports nothing.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import desired_bool

REMEDY = "run the pcie_tuning role"


def desired_of(desired):
    """``(size, devices or None, boot_unit)`` from the role's variables; size None = not managed."""
    desired = desired or {}
    devices = desired.get("pcie_tuning_devices") or None
    return desired.get("pcie_tuning_max_read_request"), devices, desired_bool(desired, "pcie_tuning_boot_unit")


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    size, devices, boot_unit = desired_of(desired)
    if desired is None or size is None:
        return []
    if section is None:
        return [{"id": "pcie.facts", "status": "unknown", "detail": "rdma_facts gave no layers.pcie (an older collection)"}]
    observed_devices = section.get("devices") or {}
    wanted = sorted(_observe.audited_devices(devices, observed_devices)) if devices else sorted(observed_devices)
    planned = _plan.plan(size, wanted, section, boot_unit=boot_unit)
    persisted = (section.get("unit") or {}).get("values") or {}
    work = dict((step["target"], step) for step in planned["actions"] if step["action"] == "set_max_read_request")
    unit_steps = [s for s in planned["actions"] if s["action"] == "write_unit"]
    unit_named = False  # some function's check carries the unit's rewrite as its evidence
    checks = []
    for bdf in wanted:
        item = observed_devices.get(bdf) or {}
        subject = "%s (%s)" % (bdf, ", ".join(item.get("rdma_devices") or [])) if item.get("rdma_devices") else bdf
        if "max_read_request" not in item:
            checks.append({"id": "pcie.max_read_request", "status": "unknown", "subject": subject, "desired": size,
                           "detail": item.get("error") or "not an RDMA NIC's physical function here"})
            continue
        unit_ok = not boot_unit or persisted.get(bdf) == size
        status = "drift" if bdf in work or not unit_ok else "ok"
        unit_named = unit_named or not unit_ok
        checks.append({"id": "pcie.max_read_request", "status": status, "subject": subject, "desired": size,
                       "live": item["max_read_request"], "persisted": persisted.get(bdf) if boot_unit else None,
                       "remedy": REMEDY if status == "drift" else None,
                       # the evidence: the plan's steps for this function, and the boot unit's when it lacks it
                       "detail": "planned: %s" % ([s for s in planned["actions"] if s["target"] in (bdf, None)]
                                                  + (unit_steps if not unit_ok else []))
                       if status == "drift" else None})
    # the unit's rewrite is evidence once: in a function's check when that function's value is missing from it,
    # else here (the unit names another setpci, a function no longer there, ...)
    if unit_steps and not unit_named:
        checks.append({"id": "pcie.boot_unit", "status": "drift", "subject": unit_steps[0]["target"], "desired": size,
                       "persisted": persisted, "remedy": REMEDY, "detail": "planned: %s" % unit_steps})
    for problem in planned["problems"]:
        if "setpci" in problem:
            checks.append({"id": "pcie.boot_unit", "status": "fail", "subject": "setpci", "desired": size,
                           "remedy": "install pciutils on the node", "detail": problem})
    return checks
