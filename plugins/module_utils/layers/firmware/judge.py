# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``firmware`` layer's audit judgement, pure: the module's planner run on the facts (``layers.firmware``).

* ``firmware.params[<card>]`` per card ``nic_firmware_nics`` selects: ``drift`` when Next Boot differs from the
  desired value of a parameter (the planned ``set`` is the evidence), ``fail`` for what provisioning cannot do (a
  parameter the card does not have, no mlxconfig/mstconfig on the node), ``ok`` otherwise; ``live`` is Current,
  ``persisted`` Next Boot;
* ``firmware.pending[<card>]`` per queried card, also in facts-only mode: ``drift`` while a parameter's Current
  differs from its Next Boot (staged, waiting for a firmware reset or a cold boot), ``ok`` otherwise;
* ``firmware.options``: ``nic_firmware_nics`` is not valid, or selects a device this host does not have;
* across the inventory (:func:`inventory_judge`): ``firmware.inventory[<model>]``, one configuration of the
  parameters this layer manages (Current) per NIC model.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import check as _check
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import plan as _plan
# the inventory checks of both rooms name hosts the same way (bounded: the detail is repeated on every host)
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.health.judge import host_list

REMEDY = "run the nic_firmware role"
#: a problem about one card starts with its subject (``0000:18:00.0 (mlx5_0)``), after ``nics[i]: `` or not
_CARD = re.compile(r"^(?:nics\[\d+\][.a-z_]*: )?([0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7](?: \([^)]*\))?)")
REMEDY_RESET = ("reset the card's firmware: mlxfwreset (mstfwreset) -d %s --level 3 -y reset on a drained node (the "
                "nic_firmware role does it with nic_firmware_reset: true), or power-cycle the node")


def pending_checks(section):
    """``firmware.pending`` of every card whose parameters were read."""
    checks = []
    for card_id in sorted((section or {}).get("cards") or {}):
        card = section["cards"][card_id]
        params = card.get("params")
        if not params:
            continue
        pending = dict((name, row) for name, row in params.items() if row[1] != row[2])
        checks.append(_check(
            "firmware.pending", "drift" if pending else "ok", _plan.subject(card), "Current = Next Boot",
            dict((name, row[1]) for name, row in sorted(pending.items())) or None,
            persisted=dict((name, row[2]) for name, row in sorted(pending.items())) or None,
            remedy=REMEDY_RESET % card["device"],
            detail="staged for the next firmware reset or cold boot: %s" % ", ".join(
                "%s %s -> %s" % (name, row[1], row[2]) for name, row in sorted(pending.items())) if pending else None))
    return checks


def judge(section, desired):
    """The checks of the layer (see the module docstring); ``desired`` None is a facts-only audit."""
    nics = (desired or {}).get("nic_firmware_nics") or []
    if section is None:
        if nics:
            return [_check("firmware.facts", "unknown", detail="rdma_facts gave no layers.firmware (an older collection)")]
        return []
    checks = []
    if nics:
        try:
            entries = _plan.normalize(nics)
        except InputError as exc:
            return [_check("firmware.options", "fail", "nic_firmware_nics", remedy="fix nic_firmware_nics of this host "
                           "(roles/nic_firmware/meta/argument_specs.yml)", detail=exc.msg)] + pending_checks(section)
        planned = _plan.plan(entries, section)
        by_card = {}
        for step in planned["actions"]:
            by_card.setdefault(step["target"], []).append(step)
        for card_id, card in sorted(planned["cards"].items()):
            steps = by_card.get(card["device"]) or []
            wanted = dict((name, row["desired"]) for name, row in card["params"].items())
            checks.append(_check(
                "firmware.params", "drift" if steps else "ok", card["subject"], wanted,
                dict((name, row["current"]) for name, row in card["params"].items()),
                persisted=dict((name, row["next"]) for name, row in card["params"].items()), remedy=REMEDY,
                detail="planned: %s" % steps if steps else None))
        for problem in planned["problems"]:
            card = _CARD.match(problem)
            if "not installed" in problem:
                checks.append(_check("firmware.tool", "fail", "mlxconfig", remedy="install mstflint (or MFT/DOCA for "
                                     "mlxconfig) on the node", detail=problem))
            else:
                checks.append(_check("firmware.params" if card else "firmware.options", "fail",
                                     card.group(1) if card else "nic_firmware_nics",
                                     remedy="fix nic_firmware_nics for this host's NICs", detail=problem))
    return checks + pending_checks(section)


def _signature(card):
    return tuple(sorted((name, row[1]) for name, row in (card.get("params") or {}).items() if _plan.MANAGED.match(name)))


def _compared(card):
    """Whether a card takes part in the comparison across the inventory: its parameters were read, it names its
    model, and its managed parameters' current values are texts (what rdma_facts parses from mlxconfig). Signatures
    of several hosts are sorted together: one host's value of another type must not fail every host's report."""
    if not (card.get("params") and isinstance(card.get("device_type"), str) and card["device_type"]):
        return False
    try:
        return all(isinstance(value, str) for dummy, value in _signature(card))
    except (TypeError, IndexError, AttributeError):
        return False


def inventory_judge(hosts):
    """``{host: [checks]}``: ``firmware.inventory[<model>]`` on every host with a card of that model whose parameters
    were read; ``drift`` on the hosts whose managed parameters (Current) differ from the model's most common
    configuration, ``ok`` when every card of the model agrees.  Pure."""
    seen = {}
    for name, section in hosts.items():
        for card in ((section or {}).get("cards") or {}).values():
            if _compared(card):
                seen.setdefault(card["device_type"], {}).setdefault(_signature(card), []).append(name)
    out = dict((name, []) for name in hosts)
    common_hosts = {}
    for model, configs in seen.items():  # once per model: named on every drifting host, in full it grew with N^2
        common = max(sorted(configs), key=lambda sig: len(configs[sig]))
        common_hosts[model] = host_list(set(configs[common]))
    for name, section in sorted(hosts.items()):
        mine = {}
        for card in ((section or {}).get("cards") or {}).values():
            if _compared(card):
                mine.setdefault(card["device_type"], []).append(card)
        for model in sorted(mine):
            configs = seen[model]
            common = max(sorted(configs), key=lambda sig: len(configs[sig]))
            odd = {}
            for card in mine[model]:
                differs = dict((param, value) for param, value in _signature(card) if dict(common).get(param) != value)
                if differs:
                    odd[_plan.subject(card)] = differs
            if len(configs) == 1 or not odd:
                out[name].append(_check("firmware.inventory", "ok", model, dict(common)))
                continue
            out[name].append(_check(
                "firmware.inventory", "drift", model, dict(common), odd, persisted=None,
                remedy="give every %s the same nic_firmware_nics settings (the inventory's most common ones are the desired "
                "column) and run the nic_firmware role" % model,
                detail="%s runs %d configurations across the inventory; hosts with the most common one: %s"
                % (model, len(configs), common_hosts[model])))
    return out
