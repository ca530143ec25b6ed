# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's facts as ``rdma_facts`` prints them for the audit, compressed (``compress: true``): base64 (RFC 4648) of
the zlib stream (RFC 1950) of their compact JSON text.  Read by the gather action (in every host's forked worker:
nothing else is imported here) and by the audit."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import base64
import binascii
import zlib

#: the largest facts text a compressed result may inflate to: a DGX H100's is about 90 KB, with 16 VFs on each of its
#: 8 InfiniBand PFs about 400 KB; a node (which a compromised one may be) cannot make the controller inflate more
MAX_TEXT = 64 * 1024 * 1024


def deflate(text):
    """The compressed form of the facts' JSON ``text`` (what ``rdma_facts`` returns as ``rdma_facts_json_zlib``)."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"))).decode("ascii")


def inflate(blob, limit=MAX_TEXT):
    """``(text, error)`` of a compressed facts text: the JSON text (at most ``limit`` bytes of UTF-8), or None and
    why it cannot be read."""
    if not isinstance(blob, (str, bytes)):
        return None, "compressed facts that are not a string: %s" % type(blob).__name__
    try:
        data = base64.b64decode(blob, validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data, limit)
        if inflater.unconsumed_tail:
            return None, "compressed facts of more than %d bytes: not read" % limit
        if not inflater.eof or inflater.unused_data:
            return None, "compressed facts that are cut short or followed by other data"
        return raw.decode("utf-8"), None
    except (binascii.Error, ValueError, zlib.error) as exc:  # a UnicodeDecodeError is a ValueError
        return None, "compressed facts that cannot be read: %s" % exc
