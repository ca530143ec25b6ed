# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenPGP key fingerprints on the controller, without gpg and without trusting the key (documented in
openpgp_fingerprints.yml): the doca_ofed role pins its repository signing key by fingerprint with it.

RFC 4880 (packets, ASCII armor, v4 fingerprints) and RFC 9580 (v6 fingerprints); v5 as in LibrePGP.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import base64
import binascii
import hashlib
import re

from ansible.errors import AnsibleFilterError

_BEGIN = re.compile(r"^-----BEGIN PGP PUBLIC KEY BLOCK-----\s*$")
_END = re.compile(r"^-----END PGP PUBLIC KEY BLOCK-----\s*$")
_PUBLIC_KEY = 6  # packet tag of a primary public key (14: subkey)
_CRC24_INIT = 0xB704CE
_CRC24_POLY = 0x1864CFB


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
    """The bytes of every ``PGP PUBLIC KEY BLOCK`` in ``text``, concatenated; the checksum line is verified."""
    out = b""
    lines = text.replace("\r\n", "\n").split("\n")
    index = 0
    blocks = 0
    while index < len(lines):
        if not _BEGIN.match(lines[index]):
            index += 1
            continue
        index += 1
        while index < len(lines) and lines[index].strip() and ":" in lines[index]:  # armor headers (Version: ...)
            index += 1
        body, checksum = [], None
        while index < len(lines) and not _END.match(lines[index]):
            line = lines[index].strip()
            if line.startswith("=") and len(line) == 5:
                checksum = line[1:]
            elif line:
                body.append(line)
            index += 1
        if index == len(lines):
            raise AnsibleFilterError("openpgp_fingerprints: the key block has no END line (truncated?)")
        try:
            data = base64.b64decode("".join(body), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise AnsibleFilterError("openpgp_fingerprints: the key block is not valid base64 (%s)" % exc) from exc
        if checksum is not None:
            try:
                want = int.from_bytes(base64.b64decode(checksum, validate=True), "big")
            except (binascii.Error, ValueError) as exc:
                raise AnsibleFilterError("openpgp_fingerprints: bad armor checksum line =%s" % checksum) from exc
            if crc24(data) != want:
                raise AnsibleFilterError("openpgp_fingerprints: the armor checksum does not match the key data "
                                         "(the key was damaged in transit)")
        out += data
        blocks += 1
        index += 1
    if not blocks:
        raise AnsibleFilterError("openpgp_fingerprints: no '-----BEGIN PGP PUBLIC KEY BLOCK-----' in the input "
                                 "(an ASCII-armored OpenPGP public key is expected)")
    return out


def packets(data):
    """``(tag, body)`` of each OpenPGP packet (old and new packet formats, RFC 4880 4.2)."""
    pos = 0
    while pos < len(data):
        ctb = data[pos]
        if not ctb & 0x80:
            raise AnsibleFilterError("openpgp_fingerprints: byte %d is not a packet header" % pos)
        if ctb & 0x40:  # new format
            tag = ctb & 0x3F
            if pos + 1 >= len(data):
                raise AnsibleFilterError("openpgp_fingerprints: truncated packet header at byte %d" % pos)
            first = data[pos + 1]
            if first < 192:
                length, head = first, 2
            elif first < 224:
                if pos + 2 >= len(data):
                    raise AnsibleFilterError("openpgp_fingerprints: truncated packet header at byte %d" % pos)
                length, head = ((first - 192) << 8) + data[pos + 2] + 192, 3
            elif first == 255:
                length, head = int.from_bytes(data[pos + 2:pos + 6], "big"), 6
            else:
                raise AnsibleFilterError("openpgp_fingerprints: partial body lengths are not valid in a key")
        else:  # old format
            tag = (ctb >> 2) & 0x0F
            size = (1, 2, 4, None)[ctb & 0x03]
            if size is None:
                length, head = len(data) - pos - 1, 1
            else:
                length, head = int.from_bytes(data[pos + 1:pos + 1 + size], "big"), 1 + size
        start = pos + head
        if start > len(data) or start + length > len(data):
            raise AnsibleFilterError("openpgp_fingerprints: packet at byte %d runs past the end of the key "
                                     "(truncated?)" % pos)
        yield tag, data[start:start + length]
        pos = start + length


def fingerprint(body):
    """The fingerprint of a public-key packet body, upper-case hex (v4: 40 digits, v5/v6: 64)."""
    if not body:
        raise AnsibleFilterError("openpgp_fingerprints: empty public-key packet")
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise AnsibleFilterError("openpgp_fingerprints: version %d keys are not supported (v3 keys are obsolete and "
                             "their fingerprints can be forged)" % version)


def openpgp_fingerprints(text):
    """Fingerprints of the primary keys in an ASCII-armored OpenPGP public key block, in file order."""
    if isinstance(text, bytes):
        text = text.decode("ascii", errors="replace")
    if not isinstance(text, str):
        raise AnsibleFilterError("openpgp_fingerprints expects the armored key as a string, got %s"
                                 % type(text).__name__)
    found = [fingerprint(body) for tag, body in packets(dearmor(text)) if tag == _PUBLIC_KEY]
    if not found:
        raise AnsibleFilterError("openpgp_fingerprints: the block holds no public key")
    return found


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node OpenPGP helpers."""

    def filters(self):
        return {"openpgp_fingerprints": openpgp_fingerprints}
