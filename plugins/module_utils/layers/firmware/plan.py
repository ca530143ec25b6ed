# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``firmware`` layer's planner, pure: desired (the ``nics`` entries) + observed -> actions, pending changes,
problems.

A ``set`` stages values in the card's Next Boot configuration; they take effect at the next firmware reset
(``mlxfwreset --level 3``) or cold boot, so a parameter whose Current differs from its Next Boot is *pending*.  The
plan compares the desired value with Next Boot (what the card will run after the reset): equal means nothing to
stage, even while it is still pending.  The module applies exactly these actions (check mode lists them), and the
audit runs the same function on the facts: a plan with work is drift; a pending value is reported until a reset.

Entries (each one a dict; every key optional):

* selection: ``devices`` (PCI addresses, netdev names or RDMA device names: their cards) or ``model`` (every card
  whose mlxconfig device type is that model: ``ConnectX-7``, ``ConnectX7`` and ``connectx-7`` are one model);
  neither = every NVIDIA RDMA NIC card;
* ``link_type``: ``IB``/``ETH`` for every port, or a list, one per port (``LINK_TYPE_P<n>``);
* ``sriov_en``, ``num_of_vfs``, ``ats_enabled``, ``max_acc_out_read`` (sets ``ADVANCED_PCI_SETTINGS`` too: the
  firmware lists MAX_ACC_OUT_READ only while it is set), ``roce_cc_prio_mask``, ``cnp_dscp``, ``cnp_802p_prio``
  (every port: ``_P<n>``);
* ``raw``: ``{NAME: value}``, any parameter the card's query lists (its name as the tool prints it, its value as the
  tool takes it: a number or an enum name).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import normalize_bdf
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import mlxconfig

#: the typed options: option -> (mlxconfig name or per-port base, kind, range)
BOOLS = {"sriov_en": "SRIOV_EN", "ats_enabled": "ATS_ENABLED"}
#: field widths from mstflint's parameter database (mlxconfig_host.db): NUM_OF_VFS and MAX_ACC_OUT_READ 16 bits,
#: ROCE_CC_PRIO_MASK 8 (one bit per priority), CNP_DSCP 6 (a DSCP), CNP_802P_PRIO 3 (a PCP)
INTS = {"num_of_vfs": ("NUM_OF_VFS", 65535), "max_acc_out_read": ("MAX_ACC_OUT_READ", 65535)}
PORT_INTS = {"roce_cc_prio_mask": ("ROCE_CC_PRIO_MASK", 255), "cnp_dscp": ("CNP_DSCP", 63),
             "cnp_802p_prio": ("CNP_802P_PRIO", 7)}
SELECTORS = ("devices", "model")
OPTIONS = SELECTORS + ("link_type",) + tuple(BOOLS) + tuple(INTS) + tuple(PORT_INTS) + ("raw",)
LINK_TYPES = {"IB": "InfiniBand", "ETH": "Ethernet"}
#: the parameters this layer sets by name (the inventory check compares them across hosts of one model)
MANAGED = re.compile(r"^(LINK_TYPE_P\d+|SRIOV_EN|NUM_OF_VFS|ATS_ENABLED|ADVANCED_PCI_SETTINGS|MAX_ACC_OUT_READ|"
                     r"ROCE_CC_PRIO_MASK_P\d+|CNP_DSCP_P\d+|CNP_802P_PRIO_P\d+)$")
_RAW_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
_RAW_VALUE = re.compile(r"^[A-Za-z0-9_.+-]+$")
_SHORT_BDF = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_PORT = re.compile(r"_P(\d+)$")


def model_key(text):
    """``ConnectX-7``, ``ConnectX7``, ``connectx 7`` -> ``connectx7`` (mlxconfig prints ``ConnectX7``, ``ConnectX6DX``)."""
    return re.sub(r"[^a-z0-9]", "", str(text or "").lower())


def _int(where, value, top):
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        else:
            raise InputError("%s must be an integer from 0 to %d, got %r" % (where, top, value))
    if not 0 <= value <= top:
        raise InputError("%s must be from 0 to %d, got %d" % (where, top, value))
    return value


def _link_type(where, value):
    values = value if isinstance(value, list) else [value]
    if not values or len(values) > 4:
        raise InputError("%s must be IB or ETH, or a list of one per port, got %r" % (where, value))
    out = []
    for item in values:
        text = str(item).strip().upper() if isinstance(item, str) else None
        if text not in LINK_TYPES:
            raise InputError("%s must be IB or ETH (or a list of them, one per port), got %r" % (where, value))
        out.append(text)
    return out if isinstance(value, list) else out[0]


def _raw_value(where, value):
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        if value < 0:
            raise InputError("%s must not be negative, got %d" % (where, value))
        return str(value)
    if not isinstance(value, str) or not _RAW_VALUE.match(value.strip()):
        raise InputError("%s must be a number or a value name as mlxconfig takes it (letters, digits, _ . + -), got %r"
                         % (where, value))
    return value.strip()


def normalize(nics):
    """The ``nics`` entries checked and normalized (InputError naming ``nics[i].<option>`` and the value)."""
    if nics is None:
        return []
    if not isinstance(nics, list):
        raise InputError("nics must be a list of entries (dicts), got %r" % (nics,))
    out = []
    for index, entry in enumerate(nics):
        where = "nics[%d]" % index
        if not isinstance(entry, dict):
            raise InputError("%s must be a dict, got %r" % (where, entry))
        unknown = sorted(set(entry) - set(OPTIONS))
        if unknown:
            raise InputError("%s has unknown option(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(OPTIONS)))
        given = dict((key, value) for key, value in entry.items() if value is not None)
        item = {"index": index}
        if given.get("devices") and given.get("model"):
            raise InputError("%s: give devices or model, not both" % where)
        if "devices" in given:
            devices = given["devices"]
            if not isinstance(devices, list) or not all(isinstance(d, str) and d.strip() for d in devices):
                raise InputError("%s.devices must be a list of PCI addresses, netdev or RDMA device names, got %r"
                                 % (where, devices))
            item["devices"] = [d.strip() for d in devices]
        if "model" in given:
            if not isinstance(given["model"], str) or not model_key(given["model"]):
                raise InputError("%s.model must be a NIC model such as ConnectX-7, got %r" % (where, given["model"]))
            item["model"] = given["model"]
        if "link_type" in given:
            item["link_type"] = _link_type(where + ".link_type", given["link_type"])
        for key in BOOLS:
            if key in given:
                if not isinstance(given[key], bool):
                    raise InputError("%s.%s must be true or false, got %r" % (where, key, given[key]))
                item[key] = given[key]
        for key, (dummy_name, top) in list(INTS.items()) + list(PORT_INTS.items()):
            if key in given:
                item[key] = _int("%s.%s" % (where, key), given[key], top)
        if "raw" in given:
            if not isinstance(given["raw"], dict):
                raise InputError("%s.raw must be a dict of NAME: value, got %r" % (where, given["raw"]))
            raw = {}
            for name, value in given["raw"].items():
                if not isinstance(name, str) or not _RAW_NAME.match(name):
                    raise InputError("%s.raw: %r is not a firmware parameter name (upper case, as mlxconfig prints it; "
                                     "array elements are not supported)" % (where, name))
                raw[name] = _raw_value("%s.raw.%s" % (where, name), value)
            item["raw"] = raw
        if len(item) == 1 + len([key for key in SELECTORS if key in item]):
            raise InputError("%s sets nothing (give link_type, sriov_en, num_of_vfs, ats_enabled, max_acc_out_read, "
                             "roce_cc_prio_mask, cnp_dscp, cnp_802p_prio or raw)" % where)
        out.append(item)
    return out


def subject(card):
    """``0000:18:00.0 (mlx5_0, mlx5_1)``: the card's first function and its RDMA devices."""
    names = [name for function in sorted(card.get("functions") or {})
             for name in card["functions"][function].get("rdma_devices") or []]
    return "%s (%s)" % (card["device"], ", ".join(names)) if names else card["device"]


def _select(entry, cards, problems):
    """The cards an entry selects."""
    where = "nics[%d]" % entry["index"]
    if "devices" in entry:
        index = {}
        for card_id, card in cards.items():
            for bdf, function in (card.get("functions") or {}).items():
                for name in [bdf] + list(function.get("netdevs") or []) + list(function.get("rdma_devices") or []):
                    index[name] = card_id
        chosen = []
        for name in entry["devices"]:
            text = name.lower()
            bdf = normalize_bdf("0000:" + text if _SHORT_BDF.match(text) else text)
            card_id = index.get(bdf) if bdf else index.get(name)
            if card_id is None:
                problems.append("%s.devices: %r is not the PCI address, netdev or RDMA device of an RDMA NIC on this "
                                "node (known: %s)" % (where, name, ", ".join(sorted(index)) or "none"))
            elif card_id not in chosen:
                chosen.append(card_id)
        return chosen
    if "model" in entry:
        return [card_id for card_id, card in sorted(cards.items())
                if model_key(card.get("device_type")) == model_key(entry["model"])]
    return [card_id for card_id, card in sorted(cards.items()) if is_nvidia(card)]


def is_nvidia(card):
    """A card whose first function is an NVIDIA (Mellanox, PCI vendor 0x15b3) device: one mlxconfig can configure."""
    return ((card.get("functions") or {}).get(card.get("device")) or {}).get("vendor") == "0x15b3"


def _ports(params, base):
    return sorted((name for name in params if name.startswith(base + "_P") and _PORT.search(name)),
                  key=lambda name: int(_PORT.search(name).group(1)))


def card_values(entry, card, problems):
    """``[(NAME, value)]`` the entry wants on this card (values as the tool takes them)."""
    where = "nics[%d]" % entry["index"]
    params = card.get("params") or {}
    out = []
    if "link_type" in entry:
        want = entry["link_type"]
        ports = _ports(params, "LINK_TYPE")
        if ports:
            if isinstance(want, list) and len(want) != len(ports):
                problems.append("%s.link_type gives %d port(s), %s has %d (%s)"
                                % (where, len(want), subject(card), len(ports), ", ".join(ports)))
            else:
                out += [(name, want[i] if isinstance(want, list) else want) for i, name in enumerate(ports)]
        else:
            layers = set(layer for function in (card.get("functions") or {}).values()
                         for layer in function.get("link_layers") or [])
            wanted = set(LINK_TYPES[value] for value in (want if isinstance(want, list) else [want]))
            if not layers or wanted != layers:
                problems.append("%s.link_type: %s has no LINK_TYPE parameter (its ports are fixed: %s), so it cannot be "
                                "set to %s" % (where, subject(card), ", ".join(sorted(layers)) or "unknown", want))
    for key, name in BOOLS.items():
        if key in entry:
            out.append((name, "True" if entry[key] else "False"))
    if "max_acc_out_read" in entry:
        out.append(("ADVANCED_PCI_SETTINGS", "True"))
    for key, (name, dummy_top) in INTS.items():
        if key in entry:
            out.append((name, str(entry[key])))
    for key, (base, dummy_top) in PORT_INTS.items():
        if key in entry:
            ports = _ports(params, base)
            if not ports:
                problems.append("%s.%s: %s has no %s_P<n> parameter" % (where, key, subject(card), base))
            out += [(name, str(entry[key])) for name in ports]
    out += sorted((entry.get("raw") or {}).items())
    return out


def _hidden_ok(name, params):
    """MAX_ACC_OUT_READ is listed only while ADVANCED_PCI_SETTINGS is set in Next Boot (mlxconfig evaluates a
    parameter's dependency on Next Boot): hidden behind an unset ADVANCED_PCI_SETTINGS, it can be staged after it."""
    advanced = params.get("ADVANCED_PCI_SETTINGS")
    return name == "MAX_ACC_OUT_READ" and advanced is not None and not mlxconfig.same("True", advanced[2])


def resolve(entries, observed):
    """``({card: {NAME: (value, entry index)}}, problems, notes)``: what each selected card should have in Next Boot."""
    cards = observed.get("cards") or {}
    wanted, problems, notes = {}, [], []
    tool = observed.get("tool") or {}
    if entries and not tool.get("path") and any(is_nvidia(card) for card in cards.values()):
        problems.append("%s is not installed on the node (install mstflint, or MFT/DOCA for mlxconfig)"
                        % (tool.get("name") or "mlxconfig or mstconfig"))
        return wanted, problems, notes
    for entry in entries:
        chosen = _select(entry, cards, problems)
        if "model" in entry and not chosen:
            notes.append("nics[%d].model %s matches no RDMA NIC on this node (models here: %s)" % (
                entry["index"], entry["model"],
                ", ".join(sorted(set(str(c.get("device_type")) for c in cards.values() if c.get("device_type")))) or "none"))
        for card_id in chosen:
            card = cards[card_id]
            if not card.get("params"):
                problems.append("%s: %s" % (subject(card), card.get("error") or "no firmware parameters were read"))
                continue
            params = card["params"]
            for name, value in card_values(entry, card, problems):
                row = params.get(name)
                if row is None and not _hidden_ok(name, params):
                    problems.append("nics[%d]: %s (%s) has no firmware parameter %s (its %s query does not list it)"
                                    % (entry["index"], subject(card), card.get("device_type"), name,
                                       (observed.get("tool") or {}).get("name") or "mlxconfig"))
                    continue
                if row is not None and mlxconfig.is_array(row[2]):
                    problems.append("nics[%d]: %s is an array parameter (%s); set its elements with mlxconfig itself"
                                    % (entry["index"], name, row[2]))
                    continue
                mine = wanted.setdefault(card_id, {})
                if name in mine and mlxconfig.wanted(mine[name][0]) != mlxconfig.wanted(value) \
                        and mine[name][0].lower() != value.lower():
                    problems.append("nics[%d] and nics[%d] want %s of %s as %s and %s"
                                    % (mine[name][1], entry["index"], name, subject(card), mine[name][0], value))
                    continue
                mine.setdefault(name, (value, entry["index"]))
    return wanted, problems, notes


def _settable(printed):
    """A printed value as the tool takes it back (the number when it has one)."""
    name, number = mlxconfig.shown(printed)
    return str(number) if number is not None else name


def plan(entries, observed, reset=False, level=3):
    """``{"cards", "actions", "problems", "notes", "reset_required"}``.

    ``cards``: per selected card its ``subject``, ``device_type``, ``params`` (``{NAME: {desired, default, current,
    next}}``) and ``pending`` (``{NAME: {current, next}}``: every parameter whose Current will differ from its Next
    Boot after the plan).  ``actions``: ``set`` per card (phase 1; phase 2 for MAX_ACC_OUT_READ behind
    ADVANCED_PCI_SETTINGS), each parameter with ``before`` (Next Boot), ``after`` and ``undo`` (the value to put
    back); then, with ``reset``, ``reset`` per card with pending values (``level`` 3).  ``reset_required``: the cards
    that stay pending (no reset planned).  The module refuses on any problem, before anything is staged.
    """
    cards = observed.get("cards") or {}
    wanted, problems, notes = resolve(entries, observed)
    out_cards, sets, resets, still = {}, [], [], []
    for card_id in sorted(wanted):
        card = cards[card_id]
        params = card["params"]
        report, phase1, phase2 = {}, {}, {}
        for name, (value, dummy_index) in wanted[card_id].items():
            row = params.get(name)
            if row is None:
                report[name] = {"desired": value, "default": None, "current": None, "next": None}
                phase2[name] = {"before": None, "after": value, "undo": None, "current": None}
                continue
            report[name] = {"desired": value, "default": row[0], "current": row[1], "next": row[2]}
            if not mlxconfig.same(value, row[2]):
                phase1[name] = {"before": row[2], "after": value, "undo": _settable(row[2]), "current": row[1]}
        pending = dict((name, {"current": row[1], "next": row[2]}) for name, row in params.items() if row[1] != row[2])
        for name, step in list(phase1.items()) + list(phase2.items()):
            if step["current"] is None or not mlxconfig.same(step["after"], step["current"]):
                pending[name] = {"current": step["current"], "next": step["after"]}
            else:
                pending.pop(name, None)
        if phase1:
            sets.append({"action": "set", "target": card["device"], "phase": 1, "params": phase1})
        if phase2:
            sets.append({"action": "set", "target": card["device"], "phase": 2, "params": phase2})
        if pending and reset:
            resets.append({"action": "reset", "target": card["device"], "level": level, "pending": sorted(pending)})
        elif pending:
            still.append(card["device"])
        out_cards[card_id] = {"device": card["device"], "subject": subject(card), "device_type": card.get("device_type"),
                              "params": report, "pending": pending}
    tool = observed.get("tool") or {}
    if resets and not tool.get("reset_path"):
        problems.append("reset=true needs %s, which is not installed on the node (the staged values would stay pending "
                        "until a reboot)" % (tool.get("reset") or "mlxfwreset or mstfwreset"))
    return {"cards": out_cards, "actions": sets + resets, "problems": problems, "notes": notes, "reset_required": still}
