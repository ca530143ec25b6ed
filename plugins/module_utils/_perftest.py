# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parts of the fabric acceptance on the node: the RoCE GID table and its index choice, perftest's command
lines and output, NCCL's INFO log.  Text in, data out; no I/O (plugins/modules/rdma_perftest.py does that)."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

# perftest's default TCP port for exchanging the QP numbers (-p); each rail gets its own above it
DEFAULT_TCP_PORT = 18515
ROCE_V2 = "RoCE v2"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

_RESULT_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(?P<unit>Gb/sec|MB/sec|MiB/sec)\]\s+"
                            r"BW average\[(?P=unit)\]\s+MsgRate\[Mpps\]")
_NUMBER = r"[-+]?\d+(?:\.\d+)?"
# (counts of more than 20 digits are no result row: int() refuses more than 4,300)
_RESULT_LINE = re.compile(r"^\s*(?P<bytes>\d{1,20})\s+(?P<iters>\d{1,20})\s+(?P<peak>%s)\s+(?P<avg>%s)\s+(?P<rate>%s)\s*$"
                          % (_NUMBER, _NUMBER, _NUMBER))
_UNSTABLE = re.compile(r"^\s*Correlation coefficient r\^2:\s*(%s)\s*<" % _NUMBER)
_HEADER_KEY = re.compile(r"[A-Za-z][A-Za-z .*_/-]*\Z")
# perftest's own failure messages (from its sources and the captures in tests/unit/.../perftest/)
_ERROR = re.compile(r"(?i)(couldn'?t|unable to|failed|error|not found|no ib devices|invalid|refused|timed? ?out)")


def _header_field(text):
    """``(key, value)`` of a ``Key : value`` header field, or None: what ``^\\s*(?P<key>[A-Za-z][A-Za-z .*_/-]*?)\\s*:
    \\s*(?P<value>[^\\t]*?)\\s*$`` matched, without its backtracking (quadratic on a long run of blanks: a 34,000
    character line took more than 10 s)."""
    head, sep, rest = text.partition(":")
    key, value = head.strip(), rest.strip()
    if not sep or not _HEADER_KEY.match(key) or "\t" in value:
        return None
    return key, value


def gid_table(entries):
    """The port's GID table from sysfs: ``entries`` is ``[(index, gid, type, ndev)]`` as read from
    ``ports/N/gids/I``, ``gid_attrs/types/I`` and ``gid_attrs/ndevs/I``; empty (all-zero) entries are dropped."""
    table = []
    for index, gid, gid_type, ndev in entries:
        if gid is None or gid.lower() == ZERO_GID or gid_type is None:
            continue
        table.append({"index": int(index), "gid": gid.lower(), "type": gid_type, "ndev": ndev,
                      "ipv4": ipv4_of_gid(gid)})
    return sorted(table, key=lambda e: e["index"])


def ipv4_of_gid(gid):
    """``a.b.c.d`` of an IPv4-mapped GID (``0000:...:ffff:0a00:0001``), else None."""
    parts = gid.lower().split(":")
    if len(parts) != 8 or parts[:5] != ["0000"] * 5 or parts[5] != "ffff" or len(parts[6]) > 4 or len(parts[7]) > 4:
        return None  # (a group of 5,000 hex digits made "%d" raise ValueError: int max str digits)
    try:
        high, low = int(parts[6], 16), int(parts[7], 16)
    except ValueError:
        return None
    return "%d.%d.%d.%d" % (high >> 8, high & 0xFF, low >> 8, low & 0xFF)


def choose_gid_index(table, link_layer, wanted=None):
    """``(index, problem)``: the GID index perftest must use (``-x``) and why it cannot, if so.

    InfiniBand needs none (``(None, None)``).  On RoCE the right entry is the RoCE v2 GID of the netdev's IPv4
    address, which is what ``show_gids`` users pick by hand; ``wanted`` (an operator's fixed index) is checked
    against the table instead of chosen.
    """
    if link_layer != "Ethernet":
        return wanted, None
    by_index = dict((e["index"], e) for e in table)
    if wanted is not None:
        entry = by_index.get(int(wanted))
        if entry is None:
            return int(wanted), "GID index %s is empty on this port" % wanted
        if entry["type"] != ROCE_V2 or entry["ipv4"] is None:
            return int(wanted), "GID index %s is %s %s, not the RoCE v2 IPv4 entry%s" % (
                wanted, entry["type"], entry["gid"], _best_hint(table))
        return int(wanted), None
    best = [e for e in table if e["type"] == ROCE_V2 and e["ipv4"]]
    if not best:
        return None, "no RoCE v2 GID with an IPv4 address (has the netdev an IPv4 address?)"
    return best[0]["index"], None


def _best_hint(table):
    best = [e for e in table if e["type"] == ROCE_V2 and e["ipv4"]]
    return "; the RoCE v2 IPv4 entry is index %d (%s)" % (best[0]["index"], best[0]["ipv4"]) if best else ""


# SDR, DDR and QDR use 8b/10b encoding and the kernel prints their signalling rate: 80 % of it carries data
_SIGNALLING_ONLY = re.compile(r"\b(SDR|DDR|QDR)\)")


def rate_gbps(rate):
    """Data rate in Gb/s from sysfs ``ports/N/rate`` (``"200 Gb/sec (4X HDR)"``; ``"40 Gb/sec (4X QDR)"`` is 32,
    as SDR/DDR/QDR's printed rate is the signalling rate before 8b/10b encoding)."""
    match = re.match(r"^\s*(%s)\s*Gb/sec" % _NUMBER, rate or "")
    if not match:
        return None
    value = float(match.group(1))
    return round(value * 0.8, 4) if _SIGNALLING_ONLY.search(rate) else value


def server_argv(binary, device, ib_port, tcp_port, gid_index=None, size=65536, duration=None, iterations=None,
                qps=1, rdma_cm=False, bind_source_ip=None):
    """ib_write_bw's server command line (no peer address).  ``-F``: no CPU-frequency warning failure;
    ``--report_gbits``: the result in Gb/s, the unit of a port's line rate.  With ``rdma_cm`` (``-R``) released
    perftest ignores ``-d`` (the kernel route picks the device): ``bind_source_ip`` (the rail's address,
    ``--bind_source_ip``, perftest 23.07+) pins the connection to the rail."""
    argv = [binary, "-d", device, "-i", str(ib_port), "-p", str(tcp_port), "-s", str(size), "-q", str(qps),
            "-F", "--report_gbits"]
    if rdma_cm:
        argv.append("-R")
        if bind_source_ip:
            argv += ["--bind_source_ip", bind_source_ip]
    if gid_index is not None:
        argv += ["-x", str(gid_index)]
    if duration:
        argv += ["-D", str(duration)]
    elif iterations:
        argv += ["-n", str(iterations)]
    return argv


def client_argv(binary, device, ib_port, tcp_port, server, **kwargs):
    """The client's command line: the server's, plus the server's address."""
    return server_argv(binary, device, ib_port, tcp_port, **kwargs) + [server]


def parse_perftest(text):
    """perftest's output as data: the header fields, the result row (Gb/s) and the error lines.

    ``{"fields": {...}, "bytes", "iterations", "peak_gbps", "avg_gbps", "msg_rate_mpps", "errors": [...]}``; the
    numbers are None when no result row was printed.  ``MB/sec`` (a run without ``--report_gbits``) is converted
    (1 MB = 2^20 bytes in perftest).
    """
    out = {"fields": {}, "bytes": None, "iterations": None, "peak_gbps": None, "avg_gbps": None,
           "msg_rate_mpps": None, "errors": [], "r_squared": None}
    unit = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        header = _RESULT_HEADER.match(line)
        if header:
            unit = header.group("unit")
            continue
        if unit:
            row = _RESULT_LINE.match(line)
            if row:
                factor = 1.0 if unit == "Gb/sec" else 8.0 * 1048576 / 1e9
                out.update({"bytes": int(row.group("bytes")), "iterations": int(row.group("iters")),
                            "peak_gbps": round(float(row.group("peak")) * factor, 4),
                            "avg_gbps": round(float(row.group("avg")) * factor, 4),
                            "msg_rate_mpps": float(row.group("rate"))})
                continue  # with -a one row per size follows: the last (largest) one counts
            if line.lstrip().startswith("---"):
                unit = None
        unstable = _UNSTABLE.match(line)
        if unstable:
            # get_clock.c: the CPU clock calibration failed (get_cpu_mhz() is 0); with -F the bandwidth prints as 0
            out["r_squared"] = float(unstable.group(1))
            continue
        for part in re.split(r"\t+", line):
            field = _header_field(part)
            if field and not line.lstrip().startswith(("local address", "remote address")) and field[0] in _FIELDS:
                out["fields"][_FIELDS[field[0]]] = field[1]
        stripped = line.strip()
        if stripped and not stripped.startswith(("-", "*", "#")) and _ERROR.search(stripped) and \
                not _header_field(stripped.split("\t")[0]):
            out["errors"].append(stripped)
    return out


_FIELDS = {"Device": "device", "Link type": "link_type", "GID index": "gid_index", "Mtu": "mtu",
           "Transport type": "transport", "Connection type": "connection", "Number of qps": "qps",
           "Data ex. method": "exchange"}


# -- NCCL ----------------------------------------------------------------------------------------------------
# "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/4/GDRDMA" (2.12+) and the older "Channel 00 : ..."
_NCCL_CHANNEL = re.compile(r"NCCL INFO Channel \d+(?:/\d+)?\s*:.*?(?:\[(?P<dir>send|receive)\]\s*)?\bvia "
                           r"(?P<transport>\S+)")
# a channel line's "via": the search for a channel stops after the transport of the line's last one, as no
# "NCCL INFO Channel" after it can match (each one rescanned the rest of the line: quadratic on a long line)
_VIA = re.compile(r"\bvia (?=\S)")
_NON_BLANKS = re.compile(r"\S*")
# NCCL's net transport prints "NET/<net>/<dev>[(<proxy rank>)]" + "/GDRDMA" when GPUDirect RDMA is used, "(PCI)" when
# it goes over PCIe on a C2C platform (2.26+), "/Shared" for shared buffers (2.12+) (src/transport/net.cc)
_GDRDMA = re.compile(r"/GDRDMA(\(PCI\))?(/Shared)?$")
_NCCL_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<bw>%s)" % _NUMBER)
_NCCL_NRANKS = re.compile(r"NCCL INFO comm \S+ rank \d+ nranks (?P<n>\d{1,9})\b")
_NCCL_WARN = re.compile(r"NCCL WARN (?P<msg>.*)$")


def is_gdrdma(transport):
    """True for a network channel with GPUDirect RDMA (``NET/IB/0/GDRDMA``, ``.../GDRDMA(PCI)``, ``.../GDRDMA/Shared``)."""
    return bool(_GDRDMA.search(transport))


def _is_ib(transport):
    parts = transport.split("/")
    return len(parts) > 1 and parts[1].startswith("IB")


def parse_nccl(text):
    """What an NCCL_DEBUG=INFO log says about the network path.

    ``{"transports": {"NET/IB/4/GDRDMA": n, ...}, "net_ib": n, "gdrdma": n, "socket": n, "p2p_or_shm": n,
    "nranks": n or None, "avg_busbw_gbytes": x or None, "warnings": [...], "notes": [...], "verdict": str,
    "cause": str or None}``: ``pass`` only when every network channel goes over ``NET/IB`` (or an IB plugin,
    ``NET/IBext*``) with ``GDRDMA``.  When the log has ``[receive]`` lines only those are judged: send-side GDR
    (``NCCL_NET_GDR_READ``) is off by default on PCIe GPUs before Ampere, so a healthy node prints
    ``[send] via NET/IB/0`` next to ``[receive] via NET/IB/0/GDRDMA``; a send side without it is a note.
    """
    transports, by_dir = {}, {"send": {}, "receive": {}}
    warnings = []
    busbw, nranks = None, []
    for line in (text or "").splitlines():
        via = None
        for via in _VIA.finditer(line):
            pass
        channel = _NCCL_CHANNEL.search(line, 0, _NON_BLANKS.match(line, via.end()).end()) if via else None
        if channel:
            name = channel.group("transport")
            transports[name] = transports.get(name, 0) + 1
            if channel.group("dir"):
                table = by_dir[channel.group("dir")]
                table[name] = table.get(name, 0) + 1
            continue
        ranks = _NCCL_NRANKS.search(line)
        if ranks:
            nranks.append(int(ranks.group("n")))
        warn = _NCCL_WARN.search(line)
        if warn:
            warnings.append(warn.group("msg").strip())
        bw = _NCCL_BUSBW.search(line)
        if bw:
            busbw = float(bw.group("bw"))
    net, received, sent = (dict((k, v) for k, v in table.items() if k.startswith("NET/"))
                           for table in (transports, by_dir["receive"], by_dir["send"]))
    judged = received or net
    net_ib = sum(v for k, v in net.items() if _is_ib(k))
    gdrdma = sum(v for k, v in judged.items() if _is_ib(k) and is_gdrdma(k))
    socket = sum(v for k, v in net.items() if k.startswith("NET/Socket"))
    out = {"transports": transports, "net_ib": net_ib, "gdrdma": gdrdma, "socket": socket,
           "p2p_or_shm": sum(v for k, v in transports.items() if not k.startswith("NET/")),
           "nranks": max(nranks) if nranks else None, "avg_busbw_gbytes": busbw, "warnings": warnings, "notes": []}
    send_plain = sorted(k for k in sent if not is_gdrdma(k))
    if received and send_plain:
        out["notes"].append("send side without GDRDMA on %d channels (%s): NCCL_NET_GDR_READ is off by default on "
                            "PCIe GPUs before Ampere" % (sum(sent[k] for k in send_plain), ", ".join(send_plain)))
    if not net and nranks and max(nranks) == 1:
        out["verdict"], out["cause"] = "fail", (
            "a single rank (nranks 1): NCCL opens no transport; run over two or more GPUs or nodes")
    elif not net:
        out["verdict"], out["cause"] = "fail", (
            "no network channel in the log (NCCL_DEBUG=INFO missing, or NCCL used only P2P/SHM)")
    elif socket:
        out["verdict"], out["cause"] = "fail", "NCCL fell back to sockets (NET/Socket) on %d channels" % socket
    elif gdrdma < sum(judged.values()):
        out["verdict"], out["cause"] = "fail", "no GDRDMA: %d of %d %snetwork channels without GPUDirect RDMA (%s)" % (
            sum(judged.values()) - gdrdma, sum(judged.values()), "receiving " if received else "",
            ", ".join(sorted(k for k in judged if not is_gdrdma(k))))
    else:
        out["verdict"], out["cause"] = "pass", None
    return out
