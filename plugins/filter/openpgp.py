# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A strict reader of one ASCII-armored OpenPGP public key block, on the controller, without gpg and without trusting
the key (documented in openpgp_key.yml and openpgp_fingerprints.yml): the doca_ofed role pins its repository signing
key by fingerprint with it and installs the canonical copy it returns, never the text it was given.

Strict because apt and dnf do not read a key file the way a lenient parser does: apt 2.6 (apt-key's awk) takes every
``-----BEGIN`` block whatever its title, newer apt strips each line first (an indented block counts), and gpg
--show-keys lists keys found under a ``PRIVATE KEY BLOCK`` title. So anything that is not exactly one public key
block made of whole transferable public keys is refused, and only the packets that were checked are handed back.

RFC 4880 (packets, ASCII armor, v4 fingerprints, transferable public keys 11.1) and RFC 9580 (v6 fingerprints); v5
as in LibrePGP.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import base64
import binascii
import hashlib
import re

from ansible.errors import AnsibleFilterError

_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_END = "-----END PGP PUBLIC KEY BLOCK-----"
_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")     # armor header (Version: ..., Comment: ...)
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_CHECKSUM = re.compile(r"^=[A-Za-z0-9+/]{4}$")
_CRC24_INIT = 0xB704CE
_CRC24_POLY = 0x1864CFB
# packet tags a transferable public key is made of (RFC 4880 11.1, RFC 9580 10.1)
_PUBLIC_KEY = 6
_SIGNATURE = 2
_USER_ID = 13
_PUBLIC_SUBKEY = 14
_USER_ATTRIBUTE = 17
_TAG_NAMES = {1: "public-key encrypted session key", 2: "signature", 3: "symmetric-key encrypted session key",
              4: "one-pass signature", 5: "secret key", 6: "public key", 7: "secret subkey", 8: "compressed data",
              9: "symmetrically encrypted data", 10: "marker", 11: "literal data", 12: "trust", 13: "user ID",
              14: "public subkey", 17: "user attribute", 18: "encrypted and integrity protected data",
              19: "modification detection code", 20: "AEAD encrypted data", 21: "padding"}
_SUBKEY_BINDING = 0x18


class OpenPGPError(AnsibleFilterError):
    """The input is not exactly one well-formed armored OpenPGP public key block."""


def crc24(data):
    """The armor checksum (RFC 4880 6.1)."""
    crc = _CRC24_INIT
    for byte in data:
        crc ^= byte << 16
        for dummy in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= _CRC24_POLY
    return crc & 0xFFFFFF


def dearmor(text):
    """The bytes of the one ``PGP PUBLIC KEY BLOCK`` in ``text``; the checksum line is verified when present.

    Refused: no block, a second block, any other ``-----BEGIN``/``-----END`` line (indented or not), non-blank text
    before or after the block, and anything in the block but armor headers, base64 lines and one checksum line."""
    lines = [line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:].strip()
    begins = [i for i, line in enumerate(lines) if line == _BEGIN]
    if not begins:
        raise OpenPGPError("no '%s' line in the input (an ASCII-armored OpenPGP public key is expected)" % _BEGIN)
    if len(begins) > 1:
        raise OpenPGPError("%d '%s' lines: exactly one key block is accepted (export several keys into one block with"
                           " gpg --armor --export)" % (len(begins), _BEGIN))
    start = begins[0]
    ends = [i for i, line in enumerate(lines) if line == _END]
    if not ends or ends[0] < start:
        raise OpenPGPError("the key block has no '%s' line (truncated?)" % _END)
    end = ends[0]
    for number, line in enumerate(lines, 1):
        if line.startswith("-----") and number - 1 not in (start, end):
            raise OpenPGPError("line %d (%s) is another armor line: only one '%s' block is accepted (apt and gpg "
                               "would read keys from it)" % (number, line[:64], _BEGIN))
        if line and not start <= number - 1 <= end:
            raise OpenPGPError("line %d is text outside the key block (%r): only one armored public key block is "
                               "accepted" % (number, line[:40]))
    index = start + 1
    while index < end and _HEADER.match(lines[index]):
        index += 1
    body, checksum = [], None
    for number in range(index, end):
        line = lines[number]
        if not line:
            if body:
                raise OpenPGPError("line %d: a blank line inside the key data" % (number + 1))
            continue
        if checksum is not None:
            raise OpenPGPError("line %d: data after the armor checksum line" % (number + 1))
        if _CHECKSUM.match(line) and body:
            checksum = line[1:]
        elif _BASE64.match(line):
            body.append(line)
        else:
            raise OpenPGPError("line %d is not base64 key data (%r)" % (number + 1, line[:40]))
    try:
        data = base64.b64decode("".join(body), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise OpenPGPError("the key block is not valid base64 (%s)" % exc) from exc
    if not data:
        raise OpenPGPError("the key block is empty")
    if checksum is not None and crc24(data) != int.from_bytes(base64.b64decode(checksum), "big"):
        raise OpenPGPError("the armor checksum does not match the key data (the key was damaged in transit)")
    return data


def packets(data):
    """``(tag, body, raw)`` of each OpenPGP packet (old and new packet formats, RFC 4880 4.2); ``raw`` is the whole
    packet, header included."""
    pos = 0
    while pos < len(data):
        ctb = data[pos]
        if not ctb & 0x80:
            raise OpenPGPError("byte %d is not a packet header" % pos)
        if ctb & 0x40:  # new format
            tag = ctb & 0x3F
            if pos + 1 >= len(data):
                raise OpenPGPError("truncated packet header at byte %d" % pos)
            first = data[pos + 1]
            if first < 192:
                length, head = first, 2
            elif first < 224:
                if pos + 2 >= len(data):
                    raise OpenPGPError("truncated packet header at byte %d" % pos)
                length, head = ((first - 192) << 8) + data[pos + 2] + 192, 3
            elif first == 255:
                if pos + 6 > len(data):
                    raise OpenPGPError("truncated packet header at byte %d" % pos)
                length, head = int.from_bytes(data[pos + 2:pos + 6], "big"), 6
            else:
                raise OpenPGPError("partial body lengths are not valid in a key")
        else:  # old format
            tag = (ctb >> 2) & 0x0F
            size = (1, 2, 4, None)[ctb & 0x03]
            if size is None:
                raise OpenPGPError("an indeterminate-length packet (byte %d) is not valid in a key" % pos)
            if pos + 1 + size > len(data):
                raise OpenPGPError("truncated packet header at byte %d" % pos)
            length, head = int.from_bytes(data[pos + 1:pos + 1 + size], "big"), 1 + size
        start = pos + head
        if start + length > len(data):
            raise OpenPGPError("packet at byte %d runs past the end of the key (truncated?)" % pos)
        yield tag, data[start:start + length], data[pos:start + length]
        pos = start + length


def fingerprint(body):
    """The fingerprint of a public-key packet body, upper-case hex (v4: 40 digits, v5/v6: 64)."""
    if not body:
        raise OpenPGPError("empty public-key packet")
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise OpenPGPError("version %d keys are not supported (v3 keys are obsolete and their fingerprints can be "
                       "forged)" % version)


def _signature_type(body):
    """The signature type octet (v3: after the hashed-material length; v4, v5, v6: second octet)."""
    if len(body) > 2 and body[0] == 3:
        return body[2]
    if len(body) > 1 and body[0] in (4, 5, 6):
        return body[1]
    raise OpenPGPError("a signature packet of version %s is not supported" % (body[0] if body else "(empty)"))


def _subpacket_issuers(body):
    """Issuer key IDs and fingerprints (subpackets 16 and 33, hashed and unhashed areas) of a v4 or v6 signature,
    upper-case hex; empty for other versions (v3 and v5 are left to gpg)."""
    if not body or body[0] not in (4, 6):
        return set()
    size = 2 if body[0] == 4 else 4
    pos, found = 4, set()
    for dummy in range(2):          # hashed, then unhashed subpackets
        if pos + size > len(body):
            raise OpenPGPError("a truncated signature packet")
        end = pos + size + int.from_bytes(body[pos:pos + size], "big")
        pos += size
        if end > len(body):
            raise OpenPGPError("a truncated signature packet")
        while pos < end:
            first = body[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 255:
                if pos + 1 >= end:
                    raise OpenPGPError("a malformed signature subpacket")
                length, pos = ((first - 192) << 8) + body[pos + 1] + 192, pos + 2
            else:
                length, pos = int.from_bytes(body[pos + 1:pos + 5], "big"), pos + 5
            if length < 1 or pos + length > end:
                raise OpenPGPError("a malformed signature subpacket")
            kind, value = body[pos] & 0x7F, body[pos + 1:pos + length]
            if kind == 16 and len(value) == 8:
                found.add(value.hex().upper())
            elif kind == 33 and len(value) > 1:
                found.add(value[1:].hex().upper())
            pos += length
        pos = end
    return found


def _key_ids(fpr):
    """The names a signature may give its issuer by: the fingerprint and the key ID (v4: its last 16 digits, v5 and
    v6: its first 16)."""
    return {fpr, fpr[-16:] if len(fpr) == 40 else fpr[:16]}


def transferable_keys(data):
    """Check that ``data`` is a sequence of transferable public keys (RFC 4880 11.1): each a primary key (tag 6),
    then signatures, user IDs and user attributes with their signatures, then subkeys each with a binding signature.
    Any other packet (marker, trust, secret key, a message ...) is refused. Returns the primary keys' fingerprints."""
    found = []
    state = None            # None before the first key; 'primary', 'uid', 'subkey' within a key
    bound = True            # the current subkey has its binding signature
    for number, (tag, body, dummy) in enumerate(packets(data), 1):
        if state is None and tag != _PUBLIC_KEY:
            raise OpenPGPError("packet 1 is a %s packet (tag %d), not a primary public key: a key block starts with "
                               "its primary key" % (_TAG_NAMES.get(tag, "unknown"), tag))
        if tag in (_PUBLIC_KEY, _PUBLIC_SUBKEY) and not bound:
            raise OpenPGPError("packet %d: the subkey before it has no binding signature" % number)
        if tag == _PUBLIC_KEY:
            found.append(fingerprint(body))
            state = "primary"
        elif tag in (_USER_ID, _USER_ATTRIBUTE):
            if state == "subkey":
                raise OpenPGPError("packet %d: a user ID after a subkey (not a transferable public key)" % number)
            state = "uid"
        elif tag == _PUBLIC_SUBKEY:
            state, bound = "subkey", False
        elif tag == _SIGNATURE:
            if state == "subkey" and _signature_type(body) == _SUBKEY_BINDING:
                issuers = _subpacket_issuers(body)
                if issuers - _key_ids(found[-1]):
                    raise OpenPGPError("packet %d: the binding signature of the subkey before it names the issuer %s, "
                                       "not its primary key %s (a subkey taken from another key)"
                                       % (number, ", ".join(sorted(issuers)), found[-1]))
                bound = True
        else:
            raise OpenPGPError("packet %d is a %s packet (tag %d), which has no place in a public key" % (
                number, _TAG_NAMES.get(tag, "unknown"), tag))
    if not bound:
        raise OpenPGPError("the last subkey has no binding signature")
    if not found:
        raise OpenPGPError("the block holds no public key")
    return found


def armor(data):
    """``data`` as a public key block in GnuPG's layout: no headers, 64-column base64, the CRC-24 line."""
    text = base64.b64encode(data).decode("ascii")
    lines = [text[i:i + 64] for i in range(0, len(text), 64)]
    checksum = base64.b64encode(crc24(data).to_bytes(3, "big")).decode("ascii")
    return "%s\n\n%s\n=%s\n%s\n" % (_BEGIN, "\n".join(lines), checksum, _END)


def _text(text, name):
    if isinstance(text, bytes):
        text = text.decode("ascii", errors="replace")
    if not isinstance(text, str):
        raise AnsibleFilterError("%s expects the armored key as a string, got %s" % (name, type(text).__name__))
    return text


def openpgp_key(text, errors="raise"):
    """The checked key: ``{'fingerprints': [...], 'armored': <canonical block of exactly the checked packets>,
    'error': ''}``. With ``errors='return'`` a refused input gives ``{'fingerprints': [], 'armored': '',
    'error': <why>}`` instead of failing."""
    if errors not in ("raise", "return"):
        raise AnsibleFilterError("openpgp_key: errors must be 'raise' or 'return', got %r" % (errors,))
    text = _text(text, "openpgp_key")
    try:
        data = dearmor(text)
        found = transferable_keys(data)
    except OpenPGPError as exc:
        if errors == "return":
            return {"fingerprints": [], "armored": "", "error": exc.message}
        raise OpenPGPError("openpgp_key: %s" % exc.message) from exc
    return {"fingerprints": found, "armored": armor(data), "error": ""}


def openpgp_fingerprints(text):
    """Fingerprints of the primary keys in one ASCII-armored OpenPGP public key block, in block order."""
    text = _text(text, "openpgp_fingerprints")
    try:
        return transferable_keys(dearmor(text))
    except OpenPGPError as exc:
        raise OpenPGPError("openpgp_fingerprints: %s" % exc.message) from exc


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node OpenPGP helpers."""

    def filters(self):
        return {"openpgp_fingerprints": openpgp_fingerprints, "openpgp_key": openpgp_key}
