# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI configuration space, pure: find the PCI Express capability and read or set Max_Read_Request_Size.

Offsets and fields from include/uapi/linux/pci_regs.h: the capabilities pointer at ``PCI_CAPABILITY_LIST`` (0x34,
valid when ``PCI_STATUS_CAP_LIST`` is set in the status register at 0x06), capability ID ``PCI_CAP_ID_EXP`` (0x10),
Device Control at ``PCI_EXP_DEVCTL`` (+8, 16 bits), ``PCI_EXP_DEVCTL_READRQ`` = 0x7000 (bits 14:12): 128 << field
bytes, field values 6 and 7 reserved.  setpci names the same register ``CAP_EXP+8.w``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

STATUS = 0x06
STATUS_CAP_LIST = 0x10
CAPABILITY_LIST = 0x34
CAP_ID_EXP = 0x10
EXP_DEVCTL = 8
READRQ_MASK = 0x7000
READRQ_SHIFT = 12
#: the sizes the field can encode (6 and 7 are reserved)
SIZES = (128, 256, 512, 1024, 2048, 4096)
#: at most this many capabilities are followed (48 fit in the 192 bytes after the header; a loop is refused)
_MAX_CAPS = 48


def _word(data, offset):
    if offset + 2 > len(data):
        raise ParseError("configuration space too short: %d bytes, need offset 0x%x" % (len(data), offset + 2))
    return data[offset] | (data[offset + 1] << 8)


def find_capability(data, cap_id=CAP_ID_EXP):
    """Offset of capability ``cap_id`` in ``data`` (bytes of ``config``), or None when the device has none."""
    if len(data) <= 0x40:
        raise ParseError("configuration space too short: %d bytes (an unprivileged read shows only the 64-byte header)"
                         % len(data))
    if not _word(data, STATUS) & STATUS_CAP_LIST:
        return None
    offset = data[CAPABILITY_LIST] & 0xFC
    seen = set()
    while offset:
        if offset < 0x40 or offset in seen or len(seen) >= _MAX_CAPS:
            raise ParseError("capability list is broken at 0x%x" % offset)
        seen.add(offset)
        if offset + 2 > len(data):
            raise ParseError("capability at 0x%x is past the %d bytes read" % (offset, len(data)))
        if data[offset] == cap_id:
            return offset
        offset = data[offset + 1] & 0xFC
    return None


def size_of(devctl):
    """Max_Read_Request_Size in bytes encoded in a Device Control value; ParseError for a reserved encoding."""
    field = (devctl & READRQ_MASK) >> READRQ_SHIFT
    if field >= len(SIZES):
        raise ParseError("Device Control 0x%04x has the reserved Max_Read_Request_Size encoding %d" % (devctl, field))
    return SIZES[field]


def field_of(size):
    """The 3-bit field for ``size`` bytes."""
    return SIZES.index(size)


def with_size(devctl, size):
    """``devctl`` with its Max_Read_Request_Size set to ``size`` and every other bit kept."""
    return (devctl & ~READRQ_MASK & 0xFFFF) | (field_of(size) << READRQ_SHIFT)


def read_request(data):
    """``(capability offset, Device Control, size in bytes)`` of a PCIe function's ``config`` bytes; None when the
    function has no PCI Express capability."""
    cap = find_capability(data)
    if cap is None:
        return None
    devctl = _word(data, cap + EXP_DEVCTL)
    return cap, devctl, size_of(devctl)


def setpci_value(size):
    """The ``value:mask`` setpci writes to ``CAP_EXP+8.w`` for ``size`` (4096 -> ``5000:7000``)."""
    return "%04x:%04x" % (field_of(size) << READRQ_SHIFT, READRQ_MASK)


# -- extended capabilities (PCI Express configuration space above 0x100) ------------------------------------------
#: where the extended capability list starts (``PCI_CFG_SPACE_SIZE``)
EXT_CAP_START = 0x100
#: ``PCI_EXT_CAP_ID_ACS``, and the ACS registers relative to it: ``PCI_ACS_CAP`` (+4) and ``PCI_ACS_CTRL`` (+6)
EXT_CAP_ID_ACS = 0x000D
ACS_CAP = 4
ACS_CTRL = 6
#: at most this many extended capabilities are followed, the kernel's ttl in pci_find_next_ext_capability():
#: (PCI_CFG_SPACE_EXP_SIZE - PCI_CFG_SPACE_SIZE) / 8
_MAX_EXT_CAPS = (4096 - 256) // 8


def find_ext_capability(data, cap_id):
    """Offset of extended capability ``cap_id`` in ``data`` (bytes of ``config``), or None when the function has none.

    Walks the list as drivers/pci/pci.c pci_find_next_ext_capability() does: the header at 0x100 is one dword,
    ``PCI_EXT_CAP_ID`` bits 15:0, ``PCI_EXT_CAP_VER`` bits 19:16, ``PCI_EXT_CAP_NEXT`` bits 31:20 (& 0xffc); a header of
    0 (no extended capabilities) or all ones ends it, and so does a next pointer below 0x100.  A conventional PCI
    function's ``config`` has 256 bytes, so nothing above 0x100: None.  A loop or a pointer past the bytes read is a
    ParseError.
    """
    if len(data) < EXT_CAP_START + 4:
        return None
    offset = EXT_CAP_START
    seen = set()
    while True:
        if offset + 4 > len(data):
            raise ParseError("extended capability at 0x%x is past the %d bytes read" % (offset, len(data)))
        header = _word(data, offset) | (_word(data, offset + 2) << 16)
        if header in (0, 0xFFFFFFFF):
            return None
        if offset in seen or len(seen) >= _MAX_EXT_CAPS:
            raise ParseError("extended capability list is broken at 0x%x" % offset)
        seen.add(offset)
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
        if offset < EXT_CAP_START:
            return None
