"""Text formats the kernel uses in sysfs/procfs, and the parsers the kernel applies to writes.

Keeping them in one place makes each format testable against the real captures in realdata/hwloc.
"""

from __future__ import annotations

import errno
import os
import re

BDF_RE = re.compile(r"^([0-9a-f]{4,5}):([0-9a-f]{2}):([0-1][0-9a-f])\.([0-7])$")


def oserror(code: int, path: str = "") -> OSError:
    """An OSError carrying a real errno, as the kernel would return it to the caller."""
    return OSError(code, os.strerror(code), path or None)


def parse_bdf(bdf: str) -> tuple[int, int, int, int]:
    """Split a PCI address (4- or 5-hex-digit domain, as VMD/Hyper-V use) into numbers."""
    match = BDF_RE.match(bdf)
    if not match:
        raise ValueError(f"not a PCI address: {bdf!r}")
    return int(match.group(1), 16), int(match.group(2), 16), int(match.group(3), 16), int(match.group(4))


def format_bdf(domain: int, bus: int, dev: int, fn: int) -> str:
    """The kernel's dev_name() for a PCI device: %04x domain grows to 5 digits when needed."""
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


def bdf_rid(bdf: str) -> tuple[int, int]:
    """(domain, routing id) where routing id = bus << 8 | devfn, the unit SR-IOV offsets count in."""
    domain, bus, dev, fn = parse_bdf(bdf)
    return domain, (bus << 8) | (dev << 3) | fn


def rid_bdf(domain: int, rid: int) -> str:
    """Inverse of bdf_rid; a VF routing id past the PF's bus lands on the next bus, as in pci_iov_virtfn_bus()."""
    return format_bdf(domain, (rid >> 8) & 0xFF, (rid >> 3) & 0x1F, rid & 7)


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel cpulist such as '0-7,16-23' or '0,2,4'."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            cpus.extend(range(int(low), int(high) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def format_cpulist(cpus: list[int]) -> str:
    """Format like the kernel's %*pbl: ranges only for runs of consecutive CPUs."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    idx = 0
    while idx < len(ordered):
        start = ordered[idx]
        while idx + 1 < len(ordered) and ordered[idx + 1] == ordered[idx] + 1:
            idx += 1
        end = ordered[idx]
        out.append(str(start) if start == end else f"{start}-{end}")
        idx += 1
    return ",".join(out)


def format_cpumask(cpus: list[int], nr_cpu_ids: int) -> str:
    """Format like the kernel's %*pb: comma-separated 32-bit hex groups, the leading one trimmed to nr_cpu_ids bits."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    groups: list[str] = []
    bits = max(nr_cpu_ids, 1)
    remaining = bits
    while remaining > 0:
        chunk_bits = remaining % 32 or 32
        digits = (chunk_bits + 3) // 4
        shift = remaining - chunk_bits
        groups.append(f"{(value >> shift) & ((1 << chunk_bits) - 1):0{digits}x}")
        remaining -= chunk_bits
    return ",".join(groups)


def guid_sysfs(value: int) -> str:
    """GUID as /sys/class/infiniband shows it: four groups of 16 bits ('58a2:e103:001a:677e')."""
    raw = f"{value:016x}"
    return ":".join(raw[i:i + 4] for i in range(0, 16, 4))


def guid_colons(value: int) -> str:
    """GUID as iproute2 prints it: eight colon-separated octets."""
    raw = f"{value:016x}"
    return ":".join(raw[i:i + 2] for i in range(0, 16, 2))


def parse_guid(text: str) -> int:
    """Accept both GUID spellings (sysfs 4x16 bit, iproute2 8x8 bit); ValueError otherwise."""
    text = text.strip().lower()
    if re.fullmatch(r"[0-9a-f]{4}(:[0-9a-f]{4}){3}", text) or re.fullmatch(r"[0-9a-f]{2}(:[0-9a-f]{2}){7}", text):
        return int(text.replace(":", ""), 16)
    raise ValueError(f"not a GUID: {text!r}")


def mac_colons(raw: bytes) -> str:
    """Hardware address as sysfs 'address' and iproute2 print it."""
    return ":".join(f"{octet:02x}" for octet in raw)


def ipoib_address(qpn: int, port_guid: int) -> str:
    """20-byte IPoIB hardware address: flags+QPN, the link-local GID prefix, then the port GUID (last 8 bytes)."""
    raw = bytes([0, (qpn >> 16) & 0xFF, (qpn >> 8) & 0xFF, qpn & 0xFF, 0xFE, 0x80, 0, 0, 0, 0, 0, 0])
    return mac_colons(raw + port_guid.to_bytes(8, "big"))


IPOIB_BROADCAST = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"


def gid_from_guid(prefix: int, guid: int) -> str:
    """A GID as sysfs gids/N shows it: eight 16-bit groups."""
    raw = f"{prefix:016x}{guid:016x}"
    return ":".join(raw[i:i + 4] for i in range(0, 32, 4))


def eui64_from_mac(mac: bytes) -> int:
    """Interface id of the RoCE link-local GID: the MAC turned into a modified EUI-64."""
    return int.from_bytes(bytes([mac[0] ^ 0x02, mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]]), "big")


def kstrtoul(text: str, limit: int, overflow: int = errno.EINVAL) -> int:
    """The kernel's kstrtou8/kstrtou16/kstrtou32 with base 0: '0x' hex, leading-0 octal, optional '+', one trailing
    newline; the one parser of the simulator's unsigned sysfs stores.

    Anything else (sign '-', spaces) is EINVAL.  A value past `limit` is `overflow`: kstrto*() itself answers
    -ERANGE (lib/kstrtox.c), which a store that returns it as is passes on (default_roce_tos_store: kstrtou8,
    overflow=errno.ERANGE); the default EINVAL is for the stores that map every parse failure to -EINVAL
    (sriov_numvfs_store).
    """
    body = text[:-1] if text.endswith("\n") else text
    if body.startswith("+"):
        body = body[1:]
    try:
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", body):
            value = int(body, 16)
        elif re.fullmatch(r"0[0-7]*", body):
            value = int(body, 8)
        elif re.fullmatch(r"[1-9][0-9]*", body):
            value = int(body, 10)
        else:
            raise ValueError(body)
    except ValueError as exc:
        raise oserror(errno.EINVAL) from exc
    if value > limit:
        raise oserror(overflow)
    return value


def kstrtobool(text: str) -> bool:
    """The kernel's kstrtobool(): decided by the first one or two characters."""
    if not text:
        raise oserror(errno.EINVAL)
    first = text[0]
    if first in "yY1":
        return True
    if first in "nN0":
        return False
    if first in "oO" and len(text) > 1:
        if text[1] in "nN":
            return True
        if text[1] in "fF":
            return False
    raise oserror(errno.EINVAL)


def parse_proc_int(text: str) -> int:
    """proc_dointvec: optional whitespace, an optional sign and decimal digits; anything else is EINVAL."""
    match = re.fullmatch(r"\s*([-+]?\d+)\s*", text)
    if not match:
        raise oserror(errno.EINVAL)
    return int(match.group(1))
