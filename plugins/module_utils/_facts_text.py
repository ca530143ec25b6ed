# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's facts as ``rdma_facts`` prints them for the audit: their compact JSON text (``facts_json``), or that
text compressed (``compress: true``): base64 (RFC 4648) of its zlib stream (RFC 1950).  Written by ``rdma_facts`` on
the node (:func:`deflate`), read by the gather action in every host's forked worker (nothing else is imported here)
and by the audit (:func:`inflate`)."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import base64
import binascii
import zlib

#: the result's key of the facts' JSON text, and of that text compressed
FACTS_KEY = "rdma_facts_json"
ZLIB_KEY = "rdma_facts_json_zlib"
#: the largest facts text a compressed result may inflate to.  A DGX H100's is 90 KB (7.8 times its compressed
#: base64), with 16 VFs on each of its 8 InfiniBand PFs 297 KB (10.4 times); a node, which a compromised one may be,
#: cannot make the controller inflate more, nor ...
MAX_TEXT = 16 * 1024 * 1024
#: ... more than MAX_RATIO times what it sent, once the text is past RATIO_FREE: JSON such as ``[{},{},...]``
#: compresses 770 to 1 and takes 24 times its size once decoded, and the audit decodes what it inflates
MAX_RATIO = 50
RATIO_FREE = 1024 * 1024


def deflate(text):
    """The compressed form of the facts' JSON ``text`` (what ``rdma_facts`` returns as ``rdma_facts_json_zlib``)."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"))).decode("ascii")


def inflate(blob, limit=None):
    """``(text, error)`` of a compressed facts text: the JSON text, or None and why it cannot be read.  At most
    ``limit`` bytes of UTF-8 (default `MAX_TEXT`), and past `RATIO_FREE` at most `MAX_RATIO` times the compressed
    stream's size."""
    limit = MAX_TEXT if limit is None else limit
    if limit <= 0:
        raise ValueError("limit must be a positive number of bytes, got %r" % (limit,))
    if not isinstance(blob, (str, bytes)):
        return None, "compressed facts that are not a string: %s" % type(blob).__name__
    try:
        data = base64.b64decode(blob, validate=True)
        bound = min(limit, max(RATIO_FREE, MAX_RATIO * len(data)))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data, bound)
        if inflater.unconsumed_tail:
            if bound < limit:
                return None, ("compressed facts that inflate more than %d times (%d bytes sent): not read"
                              % (MAX_RATIO, len(data)))
            return None, "compressed facts of more than %d bytes: not read" % limit
        if not inflater.eof or inflater.unused_data:
            return None, "compressed facts that are cut short or followed by other data"
        return raw.decode("utf-8"), None
    except (binascii.Error, ValueError, zlib.error) as exc:  # a UnicodeDecodeError is a ValueError
        return None, "compressed facts that cannot be read: %s" % exc
