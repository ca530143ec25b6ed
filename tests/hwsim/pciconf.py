"""PCI configuration space of a simulated PCI function: the bytes `/sys/bus/pci/devices/<bdf>/config` serves.

Register offsets and bits are include/uapi/linux/pci_regs.h's; the file semantics are drivers/pci/pci-sysfs.c
(`pci_read_config`, `pci_write_config`, `pci_dev_config_attr_bin_size`) and fs/sysfs/file.c (`sysfs_kf_bin_read`,
`sysfs_kf_bin_write`). Hardware ignores writes to read-only bits, so a write keeps every bit outside the register's
write mask. tests/hwsim/README.md ("PCI configuration space") lists the defaults and what is not modelled.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass

from .fmt import oserror

PCI_CFG_SPACE_SIZE = 256
PCI_CFG_SPACE_EXP_SIZE = 4096

# type 0/1 header (pci_regs.h)
PCI_VENDOR_ID, PCI_DEVICE_ID, PCI_COMMAND, PCI_STATUS = 0x00, 0x02, 0x04, 0x06
PCI_REVISION_ID, PCI_CLASS_PROG, PCI_HEADER_TYPE = 0x08, 0x09, 0x0E
PCI_SUBSYSTEM_VENDOR_ID, PCI_SUBSYSTEM_ID, PCI_CAPABILITY_LIST, PCI_INTERRUPT_PIN = 0x2C, 0x2E, 0x34, 0x3D
PCI_PRIMARY_BUS, PCI_SECONDARY_BUS, PCI_SUBORDINATE_BUS = 0x18, 0x19, 0x1A
PCI_STATUS_CAP_LIST = 0x10
PCI_HEADER_TYPE_NORMAL, PCI_HEADER_TYPE_BRIDGE, PCI_HEADER_TYPE_MFD = 0, 1, 0x80
#: Command bits software may set: I/O, Memory, Bus Master, Parity, SERR#, INTx Disable
PCI_COMMAND_RW = 0x0001 | 0x0002 | 0x0004 | 0x0040 | 0x0100 | 0x0400

# capability ids and layout of the list this simulator serves
PCI_CAP_ID_PM, PCI_CAP_ID_SSVID, PCI_CAP_ID_EXP = 0x01, 0x0D, 0x10
PCI_EXT_CAP_ID_ACS = 0x000D
CAP_PM_AT, CAP_EXP_AT, CAP_SSVID_AT, ECAP_ACS_AT = 0x40, 0x60, 0xA0, 0x100
PCI_PM_PMC, PCI_PM_CTRL = 2, 4

# PCI Express capability registers (offsets from the capability)
PCI_EXP_FLAGS, PCI_EXP_DEVCAP, PCI_EXP_DEVCTL, PCI_EXP_DEVSTA = 0x02, 0x04, 0x08, 0x0A
PCI_EXP_LNKCAP, PCI_EXP_LNKCTL, PCI_EXP_LNKSTA = 0x0C, 0x10, 0x12
PCI_EXP_LNKCAP2, PCI_EXP_LNKCTL2 = 0x2C, 0x30
PCI_CAP_EXP_SIZEOF = 0x3C  # PCI_CAP_EXP_ENDPOINT_SIZEOF_V2
PCI_EXP_TYPE_ENDPOINT, PCI_EXP_TYPE_ROOT_PORT, PCI_EXP_TYPE_UPSTREAM, PCI_EXP_TYPE_DOWNSTREAM = 0x0, 0x4, 0x5, 0x6
PCI_EXP_DEVCAP_EXT_TAG, PCI_EXP_DEVCAP_RBER, PCI_EXP_DEVCAP_FLR = 0x20, 0x8000, 0x10000000
PCI_EXP_DEVCTL_RELAX_EN, PCI_EXP_DEVCTL_EXT_TAG, PCI_EXP_DEVCTL_NOSNOOP_EN = 0x0010, 0x0100, 0x0800
PCI_EXP_DEVCTL_PAYLOAD, PCI_EXP_DEVCTL_READRQ = 0x00E0, 0x7000
#: Device Control bits 14:0 are RW; bit 15 (Initiate FLR / Bridge Configuration Retry Enable) is not modelled
PCI_EXP_DEVCTL_RW = 0x7FFF
#: Link Control RW bits: ASPM, RCB, Common Clock, Extended Synch, CLKREQ#, HAWD, LBMIE, LABIE (+ Link Disable on
#: ports); Retrain Link always reads 0
PCI_EXP_LNKCTL_RW = 0x0003 | 0x0008 | 0x0040 | 0x0080 | 0x0100 | 0x0200 | 0x0400 | 0x0800
PCI_EXP_LNKCTL_LD = 0x0010
PCI_EXP_LNKSTA_CLS, PCI_EXP_LNKSTA_NLW = 0x000F, 0x03F0
PCI_EXP_LNKSTA_SLC, PCI_EXP_LNKSTA_DLLLA = 0x1000, 0x2000
PCI_EXP_LNKCAP_DLLLARC = 0x00100000

# ACS extended capability (offsets from the capability) and its bits
PCI_ACS_CAP, PCI_ACS_CTRL = 0x04, 0x06
ACS_BITS = {"SV": 0x01, "TB": 0x02, "RR": 0x04, "CR": 0x08, "UF": 0x10, "EC": 0x20, "DT": 0x40}

#: pci_speed_string() / pcie_link_speed[]: Current Link Speed / Supported Link Speeds code -> sysfs text
SPEEDS = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe",
          6: "64.0 GT/s PCIe"}
WIDTHS = (1, 2, 4, 8, 12, 16, 32)
#: Device Control payload/read-request encodings: 0 = 128 bytes ... 5 = 4096 bytes
SIZES = {128 << code: code for code in range(6)}

#: defaults (README "PCI configuration space" says where each comes from)
DEFAULT_SPEED, DEFAULT_WIDTH = 5, 16
DEFAULT_MPSS = SIZES[512]
DEFAULT_MPS = SIZES[256]
DEFAULT_MRRS = SIZES[512]


def speed_code(value: object) -> int:
    """A link speed as a spec writes it (32, 16.0, "8 GT/s", "2.5 GT/s PCIe") -> its PCIe code; ValueError else."""
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(?:\s*GT/s(?:\s+PCIe)?)?", text)
    if match:
        number = float(match.group(1))
        for code, name in SPEEDS.items():
            if float(name.split()[0]) == number:
                return code
    raise ValueError(f"not a PCIe link speed: {value!r} (one of {', '.join(SPEEDS.values())})")


def acs_bits(value: object) -> int:
    """ACS Control as a spec writes it: an integer or a list of bit names (SV, TB, RR, CR, UF, EC, DT)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value & 0x7F
    if isinstance(value, (list, tuple)):
        bits = 0
        for name in value:
            if str(name).upper() not in ACS_BITS:
                raise ValueError(f"unknown ACS bit {name!r}; known: {', '.join(ACS_BITS)}")
            bits |= ACS_BITS[str(name).upper()]
        return bits
    raise ValueError(f"ACS control must be an integer or a list of {', '.join(ACS_BITS)}")


@dataclass
class Link:
    """One end of a PCIe link: what this function can do (Link Capabilities) and what trained (Link Status)."""

    max_speed: int = DEFAULT_SPEED
    max_width: int = DEFAULT_WIDTH
    speed: int = DEFAULT_SPEED
    width: int = DEFAULT_WIDTH
    up: bool = True


@dataclass
class Layout:
    """What a function's configuration space is built from."""

    vendor: int
    device: int
    klass: int
    subsystem_vendor: int = 0
    subsystem_device: int = 0
    bridge: bool = False
    multifunction: bool = False
    port_type: int = PCI_EXP_TYPE_ENDPOINT
    port_number: int = 0
    buses: tuple[int, int, int] = (0, 0, 0)
    link: Link | None = None
    acs_cap: int | None = None
    acs_ctrl: int = 0
    vf: bool = False
    pcie: bool = True


class ConfigSpace:
    """The register image plus the per-byte write mask of one PCI function."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.size = PCI_CFG_SPACE_EXP_SIZE if layout.pcie else PCI_CFG_SPACE_SIZE
        self.data = bytearray(self.size)
        self.wmask = bytearray(self.size)
        self._build()

    # ------------------------------------------------------------ helpers
    def _put(self, offset: int, width: int, value: int, wmask: int = 0) -> None:
        self.data[offset:offset + width] = value.to_bytes(width, "little")
        self.wmask[offset:offset + width] = wmask.to_bytes(width, "little")

    def word(self, offset: int) -> int:
        """16-bit little-endian register."""
        return int.from_bytes(self.data[offset:offset + 2], "little")

    def dword(self, offset: int) -> int:
        """32-bit little-endian register."""
        return int.from_bytes(self.data[offset:offset + 4], "little")

    # ------------------------------------------------------------ layout
    def _build(self) -> None:
        lay = self.layout
        # SR-IOV VFs: Vendor ID and Device ID read FFFFh (PCIe Base Spec, SR-IOV "VF Vendor ID"/"VF Device ID");
        # the kernel takes them from the PF and its SR-IOV capability (drivers/pci/iov.c pci_iov_add_virtfn())
        self._put(PCI_VENDOR_ID, 2, 0xFFFF if lay.vf else lay.vendor)
        self._put(PCI_DEVICE_ID, 2, 0xFFFF if lay.vf else lay.device)
        self._put(PCI_COMMAND, 2, 0x0004 if lay.vf else 0x0006, PCI_COMMAND_RW)
        self._put(PCI_STATUS, 2, PCI_STATUS_CAP_LIST)
        self._put(PCI_REVISION_ID, 1, 0)
        self._put(PCI_CLASS_PROG, 3, lay.klass)
        header = PCI_HEADER_TYPE_BRIDGE if lay.bridge else PCI_HEADER_TYPE_NORMAL
        self._put(PCI_HEADER_TYPE, 1, header | (PCI_HEADER_TYPE_MFD if lay.multifunction else 0))
        if lay.bridge:
            primary, secondary, subordinate = lay.buses
            self._put(PCI_PRIMARY_BUS, 1, primary)
            self._put(PCI_SECONDARY_BUS, 1, secondary)
            self._put(PCI_SUBORDINATE_BUS, 1, subordinate)
        else:
            self._put(PCI_SUBSYSTEM_VENDOR_ID, 2, lay.subsystem_vendor)
            self._put(PCI_SUBSYSTEM_ID, 2, lay.subsystem_device)
            self._put(PCI_INTERRUPT_PIN, 1, 0 if lay.vf else 1)
        self._put(PCI_CAPABILITY_LIST, 1, CAP_PM_AT)
        # Power Management capability, version 3, D0, No_Soft_Reset
        self._put(CAP_PM_AT, 1, PCI_CAP_ID_PM)
        self._put(CAP_PM_AT + 1, 1, CAP_EXP_AT if lay.pcie else 0)
        self._put(CAP_PM_AT + PCI_PM_PMC, 2, 0x0003)
        self._put(CAP_PM_AT + PCI_PM_CTRL, 2, 0x0008)
        if lay.pcie:
            self._build_exp()
        if lay.pcie and lay.acs_cap is not None:
            self._put(ECAP_ACS_AT, 4, PCI_EXT_CAP_ID_ACS | (1 << 16))
            self._put(ECAP_ACS_AT + PCI_ACS_CAP, 2, lay.acs_cap)
            self._put(ECAP_ACS_AT + PCI_ACS_CTRL, 2, lay.acs_ctrl & lay.acs_cap, lay.acs_cap)

    def _build_exp(self) -> None:
        lay = self.layout
        base = CAP_EXP_AT
        ssvid = lay.bridge and (lay.subsystem_vendor or lay.subsystem_device)
        self._put(base, 1, PCI_CAP_ID_EXP)
        self._put(base + 1, 1, CAP_SSVID_AT if ssvid else 0)
        self._put(base + PCI_EXP_FLAGS, 2, 0x2 | (lay.port_type << 4))
        devcap = DEFAULT_MPSS | PCI_EXP_DEVCAP_EXT_TAG | PCI_EXP_DEVCAP_RBER
        if lay.port_type == PCI_EXP_TYPE_ENDPOINT:
            devcap |= PCI_EXP_DEVCAP_FLR
        self._put(base + PCI_EXP_DEVCAP, 4, devcap)
        devctl = (PCI_EXP_DEVCTL_RELAX_EN | PCI_EXP_DEVCTL_EXT_TAG | PCI_EXP_DEVCTL_NOSNOOP_EN
                  | DEFAULT_MPS << 5 | DEFAULT_MRRS << 12)
        self._put(base + PCI_EXP_DEVCTL, 2, devctl, PCI_EXP_DEVCTL_RW)
        port = lay.port_type in (PCI_EXP_TYPE_ROOT_PORT, PCI_EXP_TYPE_DOWNSTREAM)
        link = lay.link or Link()
        lnkcap = link.max_speed | link.max_width << 4 | lay.port_number << 24
        if port:
            lnkcap |= PCI_EXP_LNKCAP_DLLLARC
        self._put(base + PCI_EXP_LNKCAP, 4, lnkcap)
        self._put(base + PCI_EXP_LNKCTL, 2, 0, PCI_EXP_LNKCTL_RW | (PCI_EXP_LNKCTL_LD if port else 0))
        self.set_link_status(link)
        self._put(base + PCI_EXP_LNKCAP2, 4, (1 << (link.max_speed + 1)) - 2)
        self._put(base + PCI_EXP_LNKCTL2, 2, link.max_speed, 0x000F)
        if ssvid:
            self._put(CAP_SSVID_AT, 1, PCI_CAP_ID_SSVID)
            self._put(CAP_SSVID_AT + 4, 2, lay.subsystem_vendor)
            self._put(CAP_SSVID_AT + 6, 2, lay.subsystem_device)

    def set_link_status(self, link: Link) -> None:
        """Link Status after (re)training: current speed and negotiated width; a port sees its partner (DLLLA)."""
        port = self.layout.port_type in (PCI_EXP_TYPE_ROOT_PORT, PCI_EXP_TYPE_DOWNSTREAM)
        value = (link.speed | link.width << 4 | PCI_EXP_LNKSTA_SLC) if link.up else PCI_EXP_LNKSTA_SLC | 1
        if port and link.up:
            value |= PCI_EXP_LNKSTA_DLLLA
        self._put(CAP_EXP_AT + PCI_EXP_LNKSTA, 2, value)

    # ------------------------------------------------------------ what the kernel reads for sysfs
    def current_link(self) -> tuple[str, int]:
        """current_link_speed/_width: pcie_link_speed[LNKSTA & CLS], FIELD_GET(NLW, LNKSTA)."""
        status = self.word(CAP_EXP_AT + PCI_EXP_LNKSTA)
        return SPEEDS.get(status & PCI_EXP_LNKSTA_CLS, "Unknown"), (status & PCI_EXP_LNKSTA_NLW) >> 4

    def max_link(self) -> tuple[str, int]:
        """max_link_speed/_width: pcie_get_speed_cap() (LNKCAP2 vector first, else LNKCAP SLS), pcie_get_width_cap()."""
        vector = (self.dword(CAP_EXP_AT + PCI_EXP_LNKCAP2) >> 1) & 0x7F
        lnkcap = self.dword(CAP_EXP_AT + PCI_EXP_LNKCAP)
        code = vector.bit_length() if vector else lnkcap & 0xF
        return SPEEDS.get(code, "Unknown"), (lnkcap >> 4) & 0x3F

    # ------------------------------------------------------------ the sysfs file
    def read(self, offset: int, count: int) -> bytes:
        """pci_read_config() as CAP_SYS_ADMIN (cfg_size bytes): past the end reads nothing, a straddling read is cut."""
        if offset >= self.size or count <= 0:
            return b""
        return bytes(self.data[offset:min(self.size, offset + count)])

    def write(self, offset: int, data: bytes) -> int:
        """sysfs_kf_bin_write() then pci_write_config(): EFBIG at or past the end, a straddling write is cut to the
        size and returns the shorter count; each byte keeps its read-only bits (hardware ignores them)."""
        if offset < 0:
            raise oserror(errno.EINVAL)
        if offset >= self.size:
            raise oserror(errno.EFBIG)
        count = min(len(data), self.size - offset)
        for idx in range(count):
            pos = offset + idx
            mask = self.wmask[pos]
            self.data[pos] = (self.data[pos] & ~mask & 0xFF) | (data[idx] & mask)
        return count


def walk_capabilities(data: bytes) -> list[tuple[str, int, int]]:
    """The capability list as lspci walks it: ('cap', id, offset) from 0x34, then ('ecap', id, offset) from 0x100."""
    out: list[tuple[str, int, int]] = []
    if not data[PCI_STATUS] & PCI_STATUS_CAP_LIST:
        return out
    pos, seen = data[PCI_CAPABILITY_LIST] & ~3, set()
    while pos and pos not in seen and pos < PCI_CFG_SPACE_SIZE:
        seen.add(pos)
        out.append(("cap", data[pos], pos))
        pos = data[pos + 1] & ~3
    pos, seen = 0x100, set()
    while len(data) > PCI_CFG_SPACE_SIZE and pos and pos not in seen:
        seen.add(pos)
        header = int.from_bytes(data[pos:pos + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        out.append(("ecap", header & 0xFFFF, pos))
        pos = (header >> 20) & 0xFFC
    return out
