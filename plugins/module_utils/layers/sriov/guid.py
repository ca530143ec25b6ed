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

import codecs
import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov.rules import OPERATOR_POOL_FILE

ZERO = 0
ALL_FF = (1 << 64) - 1
SCHEMES = ("pf_guid", "list", "pool_file")

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
# Read in the operator's code (k8snetworkplumbingwg/sriov-network-operator @249e200, pkg/host/internal/infiniband/):
# guid.go ParseGUID is Go's net.ParseMAC (src/net/mac.go) and then exactly 8 octets; ib_guid_config.go decodes the file
# with encoding/json into []ibPfGUIDJSONConfig (keys matched without regard to case, unknown keys ignored, a value of
# the wrong JSON type fails the whole file), then checks each entry in order and fails the whole file on the first bad
# one; a pfGuid is resolved to a PCI address by comparing it with every link's hardware address string; the entries
# go into a map by PCI address, so a later entry for the same PF replaces an earlier one (its docs say "the first one
# shall be taken"; the code keeps the last).  infiniband.go falls back to random GUIDs only when the file does not
# exist: any other failure stops the operator's host helpers.
_HEXDIGITS = frozenset(b"0123456789abcdefABCDEF")
#: the struct's JSON names (ib_guid_config.go) and the field each maps to
_POOL_FIELDS = {"pciaddress": "pciAddress", "pfguid": "pfGuid", "guids": "guids", "guidsrange": "guidsRange"}
_RANGE_FIELDS = {"start": "start", "end": "end"}


def _go_fold(key):
    """``key`` as encoding/json compares field names (``bytes.EqualFold``): ASCII case folded, and the two non-ASCII
    letters whose simple case folding reaches an ASCII one (KELVIN SIGN, LATIN SMALL LETTER LONG S)."""
    return "".join("k" if char == "\u212a" else "s" if char == "\u017f" else char.lower() if char.isascii() else char
                   for char in key)


def parse_mac(text, bare_hex=False):
    """Go's ``net.ParseMAC`` on ``text``'s UTF-8 bytes: ``xx:xx:..``/``xx-xx-..`` (one separator throughout) or
    ``xxxx.xxxx...``, 6, 8 or 20 octets, two hex digits each; the octets as bytes, or None where Go returns an
    error.  ``bare_hex``: also the form Go 1.26 added (12, 16 or 40 hex digits without separators); the operator's
    releases up to v1.6.0 are built with Go 1.23 (its Dockerfiles: ``golang:1.23``), which refuses it."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else b""
    if len(data) < (12 if bare_hex else 14):
        return None
    out = bytearray()
    if bare_hex and len(data) in (12, 16, 40) and all(c in _HEXDIGITS for c in data):
        return bytes(int(data[i:i + 2], 16) for i in range(0, len(data), 2))
    if data[2:3] in (b":", b"-"):
        sep = data[2]
        if (len(data) + 1) % 3:
            return None
        count = (len(data) + 1) // 3
        if count not in (6, 8, 20):
            return None
        for index in range(count):
            pair = data[3 * index:3 * index + 2]
            if not all(c in _HEXDIGITS for c in pair) or (index < count - 1 and data[3 * index + 2] != sep):
                return None
            out.append(int(pair, 16))
    elif data[4:5] == b".":
        if (len(data) + 1) % 5:
            return None
        count = 2 * (len(data) + 1) // 5
        if count not in (6, 8, 20):
            return None
        for index in range(0, count, 2):
            group = data[5 * (index // 2):5 * (index // 2) + 4]
            if not all(c in _HEXDIGITS for c in group) or (index < count - 2 and data[5 * (index // 2) + 4] != 0x2E):
                return None
            out.extend((int(group[:2], 16), int(group[2:], 16)))
    else:
        return None
    return bytes(out)


def parse_go_guid(text, what="GUID", bare_hex=False):
    """A GUID exactly as sriov-network-operator's ``ParseGUID`` accepts it (``net.ParseMAC``, then 8 octets): the
    value as an int, or a ParseError naming ``what`` for anything the operator refuses (``bare_hex``: as an operator
    built with Go 1.26 or later, see :func:`parse_mac`)."""
    octets = parse_mac(text, bare_hex) if isinstance(text, str) else None
    if octets is None or len(octets) != 8:
        raise ParseError("%s %r is not a GUID sriov-network-operator accepts (Go's net.ParseMAC of 8 octets: "
                         "02:00:00:00:00:00:00:01, 02-00-..-01 or 0200.0000.0000.0001)" % (what, text))
    return int.from_bytes(octets, "big")


class _Number:  # pylint: disable=too-few-public-methods
    """A JSON number, not converted: Go decodes (or skips) numbers of any length, Python refuses ints of more than
    4,300 digits; a number is never a value the operator reads from this file."""

    def __init__(self, text):
        self.text = text


def _go_text_errors(error):
    """The decode error handler of :func:`go_text`: one U+FFFD per invalid byte."""
    return "\ufffd" * (error.end - error.start), error.end


codecs.register_error("rdma_k8s_node_go_utf8", _go_text_errors)
_SURROGATE = re.compile("[\ud800-\udfff]")


def go_text(data):
    """File bytes as Go's ``encoding/json`` sees the strings in them: each byte of an invalid UTF-8 sequence is one
    U+FFFD (``utf8.DecodeRune``), where Python's ``replace`` gives one per maximal invalid subpart."""
    return data.decode("utf-8", "rdma_k8s_node_go_utf8") if isinstance(data, bytes) else data


def _go_string(value, where):
    """A Go string field: None (JSON null) leaves it as it is; any other non-string fails the whole file.  A lone
    surrogate escape (``\\ud800``) is U+FFFD, as Go decodes it."""
    if value is not None and not isinstance(value, str):
        raise ParseError("%s must be a JSON string: the operator cannot decode the file (json: cannot unmarshal %s)"
                         % (where, "number" if isinstance(value, _Number) else type(value).__name__))
    return _SURROGATE.sub("\ufffd", value) if value else value


def _decode_object(pairs, fields, where):
    """A JSON object decoded into a Go struct: keys matched case-insensitively, the last one wins, unknown keys
    ignored; returns ``({field: value}, ignored keys, folded duplicates)``."""
    out, ignored, seen, duplicates = {}, [], set(), []
    for key, value in pairs:
        field = fields.get(_go_fold(key))
        if field is None:
            ignored.append(key)
            continue
        if field in seen:
            duplicates.append(key)
        seen.add(field)
        out[field] = value
    return out, ignored, duplicates


def _pairs_hook(pairs):
    return _Pairs(pairs)


class _Pairs(list):
    """A JSON object's ``(key, value)`` pairs in document order (duplicates kept, as Go's decoder sees them)."""


def _reject_constant(name):
    raise ValueError("%s is not JSON (Go's decoder refuses it)" % name)


def decode_pool(text, source=OPERATOR_POOL_FILE):
    """The pool file decoded as the operator's ``readJSONConfig`` decodes it: ``[{"pciAddress", "pfGuid", "guids",
    "guidsRange": {"start", "end"}, "ignored": [...], "duplicates": [...]}]`` (absent values None), or a ParseError
    for what makes ``json.Unmarshal`` fail (the operator then fails the whole file).  ``text`` may be the file's
    bytes (decoded by :func:`go_text`)."""
    try:
        data = json.loads(go_text(text), object_pairs_hook=_pairs_hook, parse_constant=_reject_constant,
                          parse_int=_Number)
    except (ValueError, RecursionError) as exc:
        raise ParseError("%s is not valid JSON: %s" % (source, exc)) from exc
    if data is None:
        return []
    if not isinstance(data, list) or isinstance(data, _Pairs):
        raise ParseError("%s must hold a JSON list of PF entries" % source)
    entries = []
    for number, raw in enumerate(data):
        where = "%s entry %d" % (source, number)
        if raw is None:
            raw = _Pairs()
        if not isinstance(raw, _Pairs):
            raise ParseError("%s is not a JSON object" % where)
        fields, ignored, duplicates = _decode_object(raw, _POOL_FIELDS, where)
        entry = {"pciAddress": None, "pfGuid": None, "guids": None, "guidsRange": None, "ignored": ignored,
                 "duplicates": duplicates}
        for name in ("pciAddress", "pfGuid"):
            if name in fields:
                value = _go_string(fields[name], "%s %s" % (where, name))
                entry[name] = value if value is not None else entry[name]
        if "guids" in fields:
            guids = fields["guids"]
            if guids is not None and (not isinstance(guids, list) or isinstance(guids, _Pairs)):
                raise ParseError("%s guids must be a JSON list of strings" % where)
            entry["guids"] = None if guids is None else [
                _go_string(item, "%s guids[%d]" % (where, index)) or "" for index, item in enumerate(guids)]
        if "guidsRange" in fields:
            span = fields["guidsRange"]
            if span is not None and not isinstance(span, _Pairs):
                raise ParseError("%s guidsRange must be a JSON object" % where)
            if span is None:
                entry["guidsRange"] = None
            else:
                bounds, dummy_ignored, dummy_dups = _decode_object(span, _RANGE_FIELDS, where + " guidsRange")
                entry["guidsRange"] = dict((name, _go_string(bounds.get(name), "%s guidsRange.%s" % (where, name)) or "")
                                           for name in ("start", "end"))
        entries.append(entry)
    return entries


def _hint(entry):
    keys = [key for key in entry["ignored"] if key in _DOC_KEYS]
    return (" (it has %s, which the operator's code does not read: its docs disagree with it; write %s)" % (
        ", ".join(repr(k) for k in keys), ", ".join(repr(_DOC_KEYS[k]) for k in keys))) if keys else ""


def parse_pool(text, source=OPERATOR_POOL_FILE, links=None, bare_hex=False):
    """The operator's pool file, checked as ``getIbGUIDConfig`` checks it, in its order: per entry ``pciAddress`` *or*
    ``pfGuid`` (resolved to the PCI address of the first of ``links`` whose hardware address string equals it, when
    ``links`` = ``[(netdev, address, pci_address or None)]`` is given), then ``guids`` *or* a complete ``guidsRange``
    (end not below start), every GUID as :func:`parse_go_guid`.  Returns ``[{"pci_address"|"pf_guid", "guids"|"range":
    (start, end), "ignored": [keys]}]``; a ParseError names the first entry the operator refuses (it then refuses the
    whole file).  A ``pfGuid`` that is a link address as Go prints it (6 or 20 octets, lowercase, colons) but of no
    link present now is kept with ``"unresolved": True``: the link may come later (at boot), and the operator resolves
    it when it starts.  The documented snake_case keys are ignored by the code, as any unknown key; the error says so.
    ``text`` may be the file's bytes (:func:`go_text`); ``bare_hex``: GUIDs as an operator built with Go 1.26 reads
    them (:func:`parse_mac`; checked against the operator's own code built so, tests/unit/plugins/modules/
    test_ib_vf_guids_operator_real.py)."""
    entries = []
    for number, raw in enumerate(decode_pool(text, source)):
        where = "%s entry %d" % (source, number)
        if raw["pciAddress"] and raw["pfGuid"]:
            raise ParseError("%s has both pciAddress and pfGuid: sriov-network-operator needs exactly one of pciAddress "
                             "and pfGuid" % where)
        if not raw["pciAddress"] and not raw["pfGuid"]:
            raise ParseError("%s has neither pciAddress nor pfGuid: sriov-network-operator needs exactly one of pciAddress "
                             "and pfGuid%s" % (where, _hint(raw)))
        entry = {"ignored": raw["ignored"]}
        if raw["pciAddress"]:
            entry["pci_address"] = raw["pciAddress"]
        else:
            entry["pf_guid"] = raw["pfGuid"]
            if links is not None:
                match = [pci for dummy, address, pci in links if address == raw["pfGuid"]]
                octets = parse_mac(raw["pfGuid"])
                if not match and octets is not None and len(octets) in (6, 20) and raw["pfGuid"] == raw["pfGuid"].lower() \
                        and ":" in raw["pfGuid"]:
                    # the address of a link that is not there now (ib_ipoib not loaded yet at boot?): the operator
                    # resolves it when it starts, so this is reported, not refused
                    entry["unresolved"] = True
                elif not match:
                    raise ParseError("%s pfGuid %r matches no network interface's hardware address on this node and "
                                     "cannot be one (the operator compares it with each link's address as Go prints "
                                     "it, lowercase, e.g. an IPoIB netdev's 20 octets): it refuses the whole file"
                                     % (where, raw["pfGuid"]))
                elif match[0] is None:
                    # its network helper's Readlink of /sys/class/net/<link>/device fails with ENOENT, wrapped with
                    # %w up to infiniband.New, which takes it for a missing pool file (errors.Is fs.ErrNotExist)
                    raise ParseError("%s pfGuid %r is the address of a network interface without a device link: the "
                                     "operator ignores the whole file, as if it did not exist, and gives every VF a "
                                     "random GUID" % (where, raw["pfGuid"]))
                else:
                    entry["pci_address"] = match[0]
        span = raw["guidsRange"]
        if not raw["guids"] and (span is None or not span["start"] or not span["end"]):
            if span is not None and (span["start"] or span["end"]):
                raise ParseError("%s guidsRange needs both start and end: sriov-network-operator needs exactly one of "
                                 "guids and guidsRange" % where)
            raise ParseError("%s has neither guids nor a guidsRange with start and end: sriov-network-operator needs "
                             "exactly one of guids and guidsRange%s" % (where, _hint(raw)))
        if raw["guids"] and span is not None:
            raise ParseError("%s has both guids and guidsRange: sriov-network-operator needs exactly one of guids and "
                             "guidsRange" % where)
        if raw["guids"]:
            entry["guids"] = [parse_go_guid(item, "%s guids[%d]" % (where, index), bare_hex)
                              for index, item in enumerate(raw["guids"])]
        else:
            start = parse_go_guid(span["start"], where + " guidsRange.start", bare_hex)
            end = parse_go_guid(span["end"], where + " guidsRange.end", bare_hex)
            if end < start:
                raise ParseError("%s guidsRange end is below its start" % where)
            entry["range"] = (start, end)
        entries.append(entry)
    return entries


def pool_entry_for(entries, pci_address, pf_guids, source=OPERATOR_POOL_FILE):
    """The entry the operator uses for a PF: the *last* one whose ``pciAddress`` is exactly ``pci_address`` (the
    operator's map by PCI address keeps the last) or - for entries :func:`parse_pool` could not resolve - whose
    ``pfGuid`` is exactly one of ``pf_guids`` (the PF netdev's hardware address as Linux prints it: lowercase, IPoIB's
    20 octets; an 8-octet node GUID never equals a link address).  ParseError when no entry matches."""
    found = None
    wanted = set(pf_guids)
    for entry in entries:
        if entry.get("pci_address") == pci_address or ("pci_address" not in entry and entry.get("pf_guid") in wanted):
            found = entry
    if found is None:
        raise ParseError("%s has no entry for PF %s (by pciAddress or pfGuid)" % (source, pci_address))
    return found


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


def _pairs_to_plain(value):
    if isinstance(value, _Pairs):
        return dict((key, _pairs_to_plain(item)) for key, item in value)
    if isinstance(value, list):
        return [_pairs_to_plain(item) for item in value]
    return value


def _spelled_twice(entry):
    """Whether an entry (or its guidsRange) spells one field two ways (``pciAddress`` and ``PCIAddress``): a rewrite
    keeps one value per spelling, which could change the one the operator's decoder takes last.  The same spelling
    twice is fine (both keep the last value)."""
    def twice(pairs, fields):
        spellings = {}
        for key, dummy in pairs:
            field = fields.get(_go_fold(key))
            if field is not None:
                spellings.setdefault(field, set()).add(key)
        return any(len(names) > 1 for names in spellings.values())

    spans = [value for key, value in entry if _POOL_FIELDS.get(_go_fold(key)) == "guidsRange" and isinstance(value, _Pairs)]
    return twice(entry, _POOL_FIELDS) or any(twice(span, _RANGE_FIELDS) for span in spans)


def render_pool(existing, pci_address, guids, links=None):
    """Pool file text with this PF's entry (``pciAddress`` + ``guids``) last among the entries that can name the PF,
    so that the operator's map keeps it whatever else the file says about the PF: in the place of the PF's last entry
    when nothing after it can name the PF (a second pass over several PFs then changes nothing), else at the end;
    other entries whose ``pciAddress`` names this PF are dropped, every other entry is kept as it is, in its place.
    ``existing`` is the current text (or bytes: :func:`go_text`) or None.  Without GUIDs (no VFs) the entry is left
    out, as the operator refuses an entry without any; when nothing is left the result is None (no file: the operator
    then generates random GUIDs, where an empty list would make it refuse every VF).  A file the operator would
    refuse (any entry, see :func:`parse_pool`; ``links`` resolve pfGuid entries) is a ParseError: writing our entry
    into it would not make the operator use it."""
    existing = go_text(existing)
    parsed = []
    if existing and existing.strip():
        parsed = parse_pool(existing, links=links)
        try:
            data = json.loads(existing, object_pairs_hook=_pairs_hook, parse_float=_finite_float)
        except ValueError as exc:  # a number of more than 4,300 digits or beyond a float (the operator skips both
            # in keys it ignores; written back they would be refused: Infinity is not JSON): no rewrite
            raise ParseError("%s cannot be rewritten keeping its other entries: %s" % (OPERATOR_POOL_FILE, exc)) from exc
        if data is None:
            data = []
        for number, entry in enumerate(data):
            if isinstance(entry, _Pairs) and _spelled_twice(entry):
                raise ParseError("%s entry %d spells one key twice (the operator takes the last one): rewriting the file "
                                 "could change which; fix that entry first" % (OPERATOR_POOL_FILE, number))
        data = [_pairs_to_plain(entry) for entry in data]
    else:
        data = []
    wanted = pci_address.lower()
    ours = [index for index, entry in enumerate(data) if isinstance(entry, dict)
            and isinstance(entry.get("pciAddress"), str) and entry["pciAddress"].lower() == wanted]
    kept = [entry for index, entry in enumerate(data) if index not in ours]
    if not guids:
        return json.dumps(kept, indent=2) + "\n" if kept else None  # no file: the operator makes random GUIDs
    mine = {"pciAddress": pci_address, "guids": [format_guid(guid) for guid in guids]}
    if ours and _last_word(parsed[ours[-1] + 1:], wanted):
        # the PF's entry stays where it is when nothing after it can name the PF: the operator's map ends the same,
        # and a pass over several PFs of one file leaves it as it is (moving each PF last would reorder it every run)
        kept.insert(ours[-1] - len(ours) + 1, mine)
    else:
        kept.append(mine)
    return json.dumps(kept, indent=2) + "\n"


def _finite_float(text):
    """A JSON number with a fraction or exponent as a float, refused (ValueError) when it is beyond a float's range:
    json.dumps would write it back as Infinity, which no JSON reader (the operator's included) takes."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("the number %s is beyond a float's range" % text[:40])
    return value


def _last_word(later, wanted):
    """Whether no entry of ``later`` (parse_pool's entries after the PF's own) can name the PF ``wanted``: none with
    its PCI address, none whose pfGuid is unresolved (a link that may be the PF's, or no links were given)."""
    for entry in later:
        if (entry.get("pci_address") or "").lower() == wanted:
            return False
        if "pf_guid" in entry and (entry.get("unresolved") or "pci_address" not in entry):
            return False
    return True


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
