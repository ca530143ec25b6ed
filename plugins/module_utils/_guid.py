# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""InfiniBand VF GUIDs, pure: spellings, validity, the deterministic scheme, the operator's pool file, the plan.

A new mlx5 VF has an all-zero node and port GUID and the subnet manager gives such a port no LID.  A GUID the
collection assigns is never zero and never all-FF (ib-sriov-cni and ib-kubernetes reject both), is the same for
node and port (as sriov-network-operator sets them), and is one of:

* ``scheme: pf_guid`` (default) - ``<prefix>:<fold>:<e0>:<e1>:<e2>:<e3>:<e4>:<vf>``: the PF's firmware node GUID
  is an EUI-64 ``OUI(24 bits) | extension(40 bits)``; the VF GUID keeps the 40-bit extension, an 8-bit fold of the
  OUI (XOR of its three octets) and the VF index, behind a one-octet prefix with the locally-administered bit set
  (default ``0x02``).  See :func:`derive` for the collision argument.
* an explicit ``guids`` list (VF i gets element i);
* sriov-network-operator's pool file (``/etc/sriov-operator/infiniband/guids``), read with the keys its *code*
  uses (``pciAddress``, ``pfGuid``, ``guids``, ``guidsRange: {start, end}``), see :func:`parse_pool`.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError

ZERO = 0
ALL_FF = (1 << 64) - 1
SCHEMES = ("pf_guid", "list", "pool_file")
OPERATOR_POOL_FILE = "/etc/sriov-operator/infiniband/guids"

_OCTETS = re.compile(r"^[0-9a-fA-F]{1,2}([:-][0-9a-fA-F]{1,2}){7}$")
_SYSFS = re.compile(r"^[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){3}$")
_DOTTED = re.compile(r"^[0-9a-fA-F]{4}(\.[0-9a-fA-F]{4}){3}$")
_HEX = re.compile(r"^(0x)?[0-9a-fA-F]{16}$")
#: keys sriov-network-operator's ibPfGUIDJSONConfig decodes (pkg/host/internal/infiniband/ib_guid_config.go @249e200)
POOL_KEYS = ("pciAddress", "pfGuid", "guids", "guidsRange")
#: keys its documentation shows but its code ignores, and the key an older release decoded
_DOC_KEYS = {"pci_address": "pciAddress", "pf_guid": "pfGuid", "rangeStart": "guidsRange.start",
             "rangeEnd": "guidsRange.end"}


def parse_guid(text, what="GUID"):
    """A GUID as an int from any common spelling: ``02:aa:..`` (8 octets, ``:`` or ``-``), ``02aa:bbcc:..`` (sysfs),
    ``02aa.bbcc.ddee.ff00`` (Go net.ParseMAC), or 16 hex digits.  InputError naming ``what`` otherwise."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise InputError("%s must be a string like 02:00:00:00:00:00:00:01, got %r" % (what, text))
    value = text.strip()
    if _OCTETS.match(value):
        return int("".join(octet.zfill(2) for octet in re.split(r"[:-]", value)), 16)
    if _SYSFS.match(value) or _DOTTED.match(value):
        return int(re.sub(r"[:.]", "", value), 16)
    if _HEX.match(value):
        return int(value, 16)
    raise InputError("%s %r is not a GUID (8 octets such as 02:00:00:00:00:00:00:01)" % (what, text))


def format_guid(value):
    """``02:00:00:00:00:00:00:01``: the spelling ``ip link`` prints and the OFED sysfs files take."""
    raw = "%016x" % value
    return ":".join(raw[i:i + 2] for i in range(0, 16, 2))


def assignable(value, what="GUID"):
    """``value`` when a VF may carry it; InputError for zero (the SM gives no LID) and all-FF (reserved/invalid)."""
    if value == ZERO:
        raise InputError("%s is all zero: the subnet manager gives such a port no LID" % what)
    if value == ALL_FF:
        raise InputError("%s is all FF, which InfiniBand tools treat as invalid" % what)
    return value


def parse_prefix(text):
    """The one-octet prefix of the ``pf_guid`` scheme: locally administered (bit 0x02 set), not 0xFF."""
    value = text if isinstance(text, int) and not isinstance(text, bool) else None
    if value is None and isinstance(text, str) and re.match(r"^(0x)?[0-9a-fA-F]{1,2}$", text.strip()):
        value = int(text.strip(), 16)
    if value is None or not 0 <= value <= 0xFF:
        raise InputError("guid_prefix must be one octet in hex (for example 02), got %r" % (text,))
    if not value & 0x02 or value == 0xFF:
        raise InputError("guid_prefix %02x must have the locally-administered bit (0x02) set and not be ff, so VF GUIDs "
                         "can never equal a vendor-burned GUID" % value)
    return value


def derive(pf_node_guid, vf_index, prefix=0x02):
    """The ``pf_guid`` scheme: ``prefix | fold(OUI) | extension(40 bits) | vf_index``.

    Collision argument.  Two VF GUIDs are equal only if prefix, OUI fold, 40-bit extension and VF index are all
    equal.  Vendor GUIDs are EUI-64s: the IEEE assigns the OUI, the vendor makes each extension unique under it,
    so two different PFs under one OUI always differ in the extension, and two VFs of one PF differ in the index:
    no collision within one OUI.  Across OUIs a collision needs equal extensions *and* equal 8-bit folds; that is
    possible in principle, so the role also checks uniqueness across the inventory before writing.  The prefix has
    the locally-administered bit set, which no vendor-burned (universally administered) GUID has, so a VF GUID
    never equals any PF or switch GUID in the fabric; it is never zero (prefix != 0) and never all-FF (prefix !=
    0xFF).  Stability: every input is burned into the NIC firmware or fixed by the VF's position, so runs and
    reboots give the same value; a replaced NIC gives new GUIDs, as its own GUIDs are new too.
    """
    if not 0 <= vf_index <= 0xFF:
        raise InputError("VF index %d does not fit the pf_guid scheme (one octet); use guids or a pool file" % vf_index)
    if pf_node_guid is None or pf_node_guid in (ZERO, ALL_FF):
        raise InputError("the PF's node GUID is %s, so the pf_guid scheme has nothing stable to derive from"
                         % ("unknown (no readable node_guid)" if pf_node_guid is None else format_guid(pf_node_guid)))
    oui = pf_node_guid >> 40
    fold = (oui >> 16) ^ ((oui >> 8) & 0xFF) ^ (oui & 0xFF)
    extension = pf_node_guid & ((1 << 40) - 1)
    return (prefix << 56) | (fold << 48) | (extension << 8) | vf_index


# -- sriov-network-operator pool file -----------------------------------------------------------------------------
def parse_pool(text, source=OPERATOR_POOL_FILE):
    """The operator's pool file: a JSON list; per entry ``pciAddress`` *or* ``pfGuid``, and ``guids`` *or*
    ``guidsRange {start, end}`` (end inclusive, not below start).  Returns ``[{"pci_address"|"pf_guid", "guids"|
    "range": (start, end)}]``.  Keys the operator's code ignores (``pci_address``/``pf_guid`` from its docs,
    ``rangeStart``/``rangeEnd`` of an older release) are errors: the operator would not use such an entry."""
    data = _load_json(text, source)
    if not isinstance(data, list):
        raise ParseError("%s must hold a JSON list of PF entries" % source)
    entries = []
    for number, raw in enumerate(data):
        where = "%s entry %d" % (source, number)
        if not isinstance(raw, dict):
            raise ParseError("%s is not a JSON object" % where)
        for key in raw:
            if key in _DOC_KEYS:
                raise ParseError("%s uses %r, which sriov-network-operator's code does not read (its docs disagree with "
                                 "it); write %r" % (where, key, _DOC_KEYS[key]))
            if key not in POOL_KEYS:
                raise ParseError("%s has unknown key %r; known: %s" % (where, key, ", ".join(POOL_KEYS)))
        entry = {}
        if bool(raw.get("pciAddress")) == bool(raw.get("pfGuid")):
            raise ParseError("%s needs exactly one of pciAddress and pfGuid" % where)
        if raw.get("pciAddress"):
            entry["pci_address"] = str(raw["pciAddress"]).lower()
        else:
            entry["pf_guid"] = raw["pfGuid"]
        has_range = raw.get("guidsRange") is not None
        if bool(raw.get("guids")) == has_range:
            raise ParseError("%s needs exactly one of guids and guidsRange" % where)
        if has_range:
            span = raw["guidsRange"]
            if not isinstance(span, dict) or not span.get("start") or not span.get("end"):
                raise ParseError("%s guidsRange needs both start and end" % where)
            start = _pool_guid(span["start"], where + " guidsRange.start")
            end = _pool_guid(span["end"], where + " guidsRange.end")
            if end < start:
                raise ParseError("%s guidsRange end is below its start" % where)
            entry["range"] = (start, end)
        else:
            if not isinstance(raw["guids"], list):
                raise ParseError("%s guids must be a list" % where)
            entry["guids"] = [_pool_guid(item, "%s guids[%d]" % (where, idx)) for idx, item in enumerate(raw["guids"])]
        entries.append(entry)
    return entries


def _load_json(text, source):
    """``json.loads`` with everything it raises on hostile text (RecursionError when nested too deep, ValueError for
    an integer of more than 4,300 digits) as a ParseError naming ``source``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError("%s is not valid JSON: %s" % (source, exc)) from exc


def _pool_guid(text, where):
    try:
        return parse_guid(text, where)
    except InputError as exc:
        raise ParseError(exc.msg) from exc


def pool_entry_for(entries, pci_address, pf_guids, source=OPERATOR_POOL_FILE):
    """The entry for a PF, matched by PCI address or by one of ``pf_guids`` (the PF's GUID spellings).  The operator
    compares ``pfGuid`` with the PF netdev's hardware address string, so both the 8-octet node GUID and the 20-byte
    IPoIB address are accepted here.  ParseError when no entry matches."""
    wanted = set(guid.lower() for guid in pf_guids)
    for entry in entries:
        if entry.get("pci_address") == pci_address.lower():
            return entry
        if "pf_guid" in entry and str(entry["pf_guid"]).lower() in wanted:
            return entry
    raise ParseError("%s has no entry for PF %s (by pciAddress or pfGuid)" % (source, pci_address))


def pool_guids(entry, count, source=OPERATOR_POOL_FILE):
    """VF i's GUID from a pool entry (list element i, or start + i within the range), for i < count."""
    out = []
    for index in range(count):
        if "guids" in entry:
            if index >= len(entry["guids"]):
                raise ParseError("%s lists %d GUIDs for %s but it has %d VFs" % (
                    source, len(entry["guids"]), entry.get("pci_address") or entry.get("pf_guid"), count))
            out.append(entry["guids"][index])
        else:
            start, end = entry["range"]
            if start + index > end:
                raise ParseError("%s guidsRange for %s holds %d GUIDs but it has %d VFs" % (
                    source, entry.get("pci_address") or entry.get("pf_guid"), end - start + 1, count))
            out.append(start + index)
    return out


def render_pool(existing, pci_address, guids):
    """Pool file text with this PF's entry (``pciAddress`` + ``guids``) replaced or added; other entries kept as
    they are.  ``existing`` is the current text or None."""
    data = _load_json(existing, OPERATOR_POOL_FILE) if existing and existing.strip() else []
    if not isinstance(data, list):
        raise ParseError("%s must hold a JSON list of PF entries" % OPERATOR_POOL_FILE)
    mine = {"pciAddress": pci_address, "guids": [format_guid(guid) for guid in guids]}
    wanted = pci_address.lower()
    kept = [entry for entry in data if not (isinstance(entry, dict) and str(entry.get("pciAddress", "")).lower() == wanted)]
    kept.append(mine)
    kept.sort(key=lambda entry: str(entry.get("pciAddress") or entry.get("pfGuid") or "") if isinstance(entry, dict) else "")
    return json.dumps(kept, indent=2, sort_keys=True) + "\n"


# -- the plan -----------------------------------------------------------------------------------------------------
def desired_guids(scheme, count, pf_node_guid=None, prefix=0x02, explicit=None, pool_entry=None):
    """The GUID of each of ``count`` VFs, validated: assignable and unique among themselves."""
    if scheme == "pf_guid":
        values = [derive(pf_node_guid, index, prefix) for index in range(count)]
    elif scheme == "list":
        explicit = list(explicit or [])
        if len(explicit) < count:
            raise InputError("guids lists %d GUIDs but the PF has %d VFs" % (len(explicit), count))
        values = [parse_guid(text, "guids[%d]" % index) for index, text in enumerate(explicit)][:count]
    elif scheme == "pool_file":
        values = pool_guids(pool_entry, count)
    else:
        raise InputError("unknown GUID scheme %r" % (scheme,))
    for index, value in enumerate(values):
        assignable(value, "the GUID for VF %d (%s)" % (index, format_guid(value)))
    source = {"list": "guids: ", "pool_file": "the pool file: "}.get(scheme, "")
    seen = {}
    for index, value in enumerate(values):
        if value in seen:
            raise InputError("%sVF %d and VF %d would both get GUID %s" % (source, seen[value], index, format_guid(value)))
        seen[value] = index
    return values


def plan(desired, observed, taken=None):
    """Pure planner.  ``desired``: GUID per VF index.  ``observed``: per VF index ``{admin_node, admin_port,
    node, port}`` (admin = what the PF driver holds; node/port = what the bound VF shows, None when unknown).
    ``taken``: ``{guid: "where"}`` for GUIDs used by other VFs of this host that this plan does not manage.

    Returns ``[{"vf": i, "guid": g, "set": bool, "rebind": bool, "reason": text}]`` for VFs needing work; a GUID
    already used elsewhere is a ConflictError before any write.
    """
    taken = dict(taken or {})
    for index, value in enumerate(desired):
        if value in taken:
            raise ConflictError("GUID %s wanted for VF %d is already used by %s" % (format_guid(value), index, taken[value]),
                                {"guid": format_guid(value), "used_by": taken[value]})
    steps = []
    for index, value in enumerate(desired):
        seen = observed.get(index, {})
        admin_ok = seen.get("admin_node") == value and seen.get("admin_port") == value
        live = [seen.get(key) for key in ("node", "port") if seen.get(key) is not None]
        live_ok = all(item == value for item in live)
        if admin_ok and live_ok:
            continue
        if not admin_ok:
            reason = "zero GUID" if not seen.get("admin_node") and not seen.get("admin_port") else "GUID differs"
        else:
            reason = "set but not yet effective (VF not re-bound)"
        steps.append({"vf": index, "guid": value, "set": not admin_ok, "rebind": True, "reason": reason})
    return steps
