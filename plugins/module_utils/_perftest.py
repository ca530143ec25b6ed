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
                qps=1, rdma_cm=False, bind_source_ip=None, cuda_bus_id=None, cuda_index=None, cuda_dmabuf=False):
    """ib_write_bw's server command line (no peer address).  ``-F``: no CPU-frequency warning failure;
    ``--report_gbits``: the result in Gb/s, the unit of a port's line rate.  With ``rdma_cm`` (``-R``) released
    perftest ignores ``-d`` (the kernel route picks the device): ``bind_source_ip`` (the rail's address,
    ``--bind_source_ip``, perftest 23.07+) pins the connection to the rail.

    GPU memory (GPUDirect RDMA): ``cuda_bus_id`` (``--use_cuda_bus_id=<domain:bus:device.function>``, perftest
    4.4-0.36+, resolved by cuDeviceGetByPCIBusId whatever CUDA_DEVICE_ORDER says) or ``cuda_index``
    (``--use_cuda=<n>``, the n-th device in CUDA's order: run it with CUDA_DEVICE_ORDER=PCI_BUS_ID); then
    ``cuda_dmabuf`` (``--use_cuda_dmabuf``, perftest 4.5-0.18+), which perftest accepts only *after* a
    ``--use_cuda*`` option (src/perftest_parameters.c checks the memory type while parsing; perftest #336)."""
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
    argv += cuda_args(cuda_bus_id, cuda_index, cuda_dmabuf)
    return argv


def cuda_args(cuda_bus_id=None, cuda_index=None, cuda_dmabuf=False):
    """perftest's GPU-memory options in the order it needs them (``--use_cuda_dmabuf`` last); [] for host memory."""
    if cuda_bus_id:
        out = ["--use_cuda_bus_id=%s" % cuda_bus_id]
    elif cuda_index is not None:
        out = ["--use_cuda=%d" % int(cuda_index)]
    else:
        return []
    return out + (["--use_cuda_dmabuf"] if cuda_dmabuf else [])


def help_options(text):
    """What a perftest's ``--help`` offers: ``bind_source_ip`` (23.07+), ``cuda`` (built with CUDA: ``--use_cuda``),
    ``cuda_bus_id`` (4.4-0.36+), ``cuda_dmabuf`` (4.5-0.18+, built with CUDA DMA-BUF support).  perftest lists
    the CUDA options only when it was built with CUDA (``cuda_memory_supported()``), and ``--use_cuda_dmabuf`` only
    when also ``cuda_memory_dmabuf_supported()``."""
    text = text or ""
    return {"bind_source_ip": "--bind_source_ip" in text,
            "cuda": bool(re.search(r"--use_cuda=", text)),
            "cuda_bus_id": "--use_cuda_bus_id" in text,
            "cuda_dmabuf": "--use_cuda_dmabuf" in text}


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
           "msg_rate_mpps": None, "errors": [], "r_squared": None, "cuda": parse_cuda(text)}
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


# perftest's CUDA start-up (src/cuda_memory.c): "initializing CUDA", "Listing all CUDA devices in system:",
# "CUDA device 0: PCIe address is 17:00" (bus:device, no domain), "Picking device No. 0", "[pid = 3669, dev = 0] device
# name = [NVIDIA A30]", with --use_cuda_bus_id first "Finding PCIe BUS <bdf>" and "Picking GPU number <n>"; "CUDA
# device integrated: 0"; with --use_cuda_dmabuf "using DMA-BUF for GPU buffer address at ..."
_CUDA_DEVICE = re.compile(r"^\s*CUDA device (?P<index>\d{1,4}): PCIe address is (?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})\s*$")
_CUDA_PICK = re.compile(r"^\s*(?:Picking device No\.|Picking GPU number)\s*(?P<index>\d{1,4})\s*$")
_CUDA_NAME = re.compile(r"device name = \[(?P<name>[^\]]{0,200})\]")
_CUDA_BUS = re.compile(r"^\s*Finding PCIe BUS (?P<bdf>\S{1,32})\s*$")
_CUDA_INTEGRATED = re.compile(r"^\s*CUDA device integrated: (?P<v>[0-9A-Fa-f]{1,8})\s*$")


def parse_cuda(text):
    """perftest's CUDA lines as data, or None when it did not initialise CUDA (a host-memory run).

    ``{"devices": {index: "BB:DD"}, "picked": index, "picked_pci": "BB:DD" or None, "name", "bus_id" (what
    ``--use_cuda_bus_id`` looked up), "integrated": bool or None, "dmabuf": bool}``.
    """
    text = text or ""
    if "initializing CUDA" not in text:
        return None
    out = {"devices": {}, "picked": None, "picked_pci": None, "name": None, "bus_id": None, "integrated": None,
           "dmabuf": False}
    for raw in text.splitlines():
        line = raw.rstrip()
        match = _CUDA_DEVICE.match(line)
        if match:
            out["devices"][int(match.group("index"))] = ("%s:%s" % (match.group("bus"), match.group("dev"))).upper()
            continue
        match = _CUDA_PICK.match(line)
        if match:
            out["picked"] = int(match.group("index"))
            continue
        match = _CUDA_BUS.match(line)
        if match:
            out["bus_id"] = match.group("bdf")
            continue
        match = _CUDA_INTEGRATED.match(line)
        if match:
            out["integrated"] = int(match.group("v"), 16) == 1
            continue
        match = _CUDA_NAME.search(line)
        if match and out["name"] is None:
            out["name"] = match.group("name")
        if line.lstrip().startswith("using DMA-BUF for GPU buffer") or "ibv_reg_dmabuf_mr(" in line:
            out["dmabuf"] = True
    if out["picked"] is not None:
        out["picked_pci"] = out["devices"].get(out["picked"])
    return out


def pci_bus_device(bdf):
    """``"BB:DD"`` of a PCI address (``0000:1b:00.0`` -> ``1B:00``), what perftest prints for a CUDA device."""
    parts = (bdf or "").split(":")
    if len(parts) < 2:
        return None
    return ("%s:%s" % (parts[-2][-2:], parts[-1].split(".")[0][-2:])).upper()


_FIELDS = {"Device": "device", "Link type": "link_type", "GID index": "gid_index", "Mtu": "mtu",
           "Transport type": "transport", "Connection type": "connection", "Number of qps": "qps",
           "Data ex. method": "exchange"}


# -- NCCL ----------------------------------------------------------------------------------------------------
# "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/4/GDRDMA" (2.12+) and the older "Channel 00 : ..."; the
# transport is the rest of the line and may hold blanks: "via NET/AWS Libfabric/0/GDRDMA" (aws-ofi-nccl's net name),
# "via P2P/direct pointer" (src/transport/p2p.cc)
_NCCL_CHANNEL = re.compile(r"NCCL INFO Channel \d+(?:/\d+)?\s*:.*\bvia ")
_DIRECTION = re.compile(r"\[(send|receive)\]\s*$")
# a channel line's "via": the search for a channel stops at the line's last one, as no "NCCL INFO Channel" after it
# can match (each one rescanned the rest of the line: quadratic on a long line)
_VIA = re.compile(r"\bvia (?=\S)")
# NCCL's net transport prints "NET/<net>/<dev>[(<proxy rank>)]" + "/GDRDMA" when GPUDirect RDMA is used, "(PCI)" when
# it goes over PCIe on a C2C platform (2.26+), "/Shared" for shared buffers (2.12+) (src/transport/net.cc)
_GDRDMA = re.compile(r"/GDRDMA(\(PCI\))?(/Shared)?$")
_NCCL_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<bw>%s)" % _NUMBER)
# src/init.cc: "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE" (and
# "- Init START"); NCCL prefixes the function ("ncclCommInitRank comm 0x...", "ncclCommSplit comm ..."), older ones
# print "comm 0x... rank 0 nranks 16 cudaDev 0 busId 1a000 - Init COMPLETE"
_NCCL_NRANKS = re.compile(r"NCCL INFO (?:[A-Za-z]{1,40} )?comm \S+ rank \d+ nranks (?P<n>\d{1,9})\b")
# src/graph/topo.cc (2.13+): "NET/%s : GPU Direct RDMA %s for HCA %d '%s'" - Disabled when the plugin supports
# neither CUDA pointers (nvidia_peermem) nor DMA-BUF; before 2.13 net_ib.cc printed "... for HCA %d '%s' (no module)"
_NCCL_GDR_OFF = re.compile(r"NCCL INFO NET/(?P<net>[^:]{1,64}?)\s*: GPU Direct RDMA Disabled for (?P<what>HCA \d+ '[^']{1,64}'"
                           r"(?: \([^)]{1,64}\))?)")
_NCCL_WARN = re.compile(r"NCCL WARN (?P<msg>.*)$")


def is_gdrdma(transport):
    """True for a network channel with GPUDirect RDMA (``NET/IB/0/GDRDMA``, ``.../GDRDMA(PCI)``, ``.../GDRDMA/Shared``)."""
    return bool(_GDRDMA.search(transport))


def _is_ib(transport):
    parts = transport.split("/")
    return len(parts) > 1 and parts[1].startswith("IB")


def _is_socket(transport):
    return transport.startswith("NET/Socket")


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
    warnings, gdr_off = [], []
    busbw, nranks = None, []
    for line in (text or "").splitlines():
        via = None
        for via in _VIA.finditer(line):
            pass
        start = line.find("NCCL INFO Channel", 0, via.start()) if via else -1
        channel = _NCCL_CHANNEL.match(line, start, via.end()) if start >= 0 else None
        if channel and line[via.end():].strip():
            name = line[via.end():].strip()
            direction = _DIRECTION.search(line, start, via.start())
            transports[name] = transports.get(name, 0) + 1
            if direction:
                table = by_dir[direction.group(1)]
                table[name] = table.get(name, 0) + 1
            continue
        ranks = _NCCL_NRANKS.search(line)
        if ranks:
            nranks.append(int(ranks.group("n")))
        off = _NCCL_GDR_OFF.search(line)
        if off and off.group("what") not in gdr_off:
            gdr_off.append(off.group("what"))
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
    # GPUDirect RDMA over any RDMA network: NET/IB, an IB plugin (IBext) or another RDMA plugin (AWS Libfabric)
    gdrdma = sum(v for k, v in judged.items() if not _is_socket(k) and is_gdrdma(k))
    socket = sum(v for k, v in net.items() if _is_socket(k))
    out = {"transports": transports, "net_ib": net_ib, "gdrdma": gdrdma, "socket": socket,
           "p2p_or_shm": sum(v for k, v in transports.items() if not k.startswith("NET/")),
           "nranks": max(nranks) if nranks else None, "avg_busbw_gbytes": busbw, "warnings": warnings,
           "gdr_disabled": gdr_off, "notes": []}
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
        out["verdict"], out["cause"] = "fail", "no GDRDMA: %d of %d %snetwork channels without GPUDirect RDMA (%s)%s" % (
            sum(judged.values()) - gdrdma, sum(judged.values()), "receiving " if received else "",
            ", ".join(sorted(k for k in judged if not is_gdrdma(k))), _gdr_reason(gdr_off))
    else:
        out["verdict"], out["cause"] = "pass", None
    return out


def _gdr_reason(gdr_off):
    """NCCL's own reason, when it printed one: GPU Direct RDMA Disabled for the HCAs (topo.cc: the net plugin supports
    neither CUDA pointers, i.e. nvidia_peermem, nor DMA-BUF for them)."""
    if not gdr_off:
        return ""
    return "; NCCL: GPU Direct RDMA Disabled for %s (no nvidia_peermem and no usable DMA-BUF for them)" % ", ".join(gdr_off)


def expected_busbw(line_rates_gbps, rails, ranks, fraction):
    """The all_reduce bus bandwidth (GB/s) a node's run should reach: each rank's bandwidth to the outside world B
    (nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n is comparable with B) is its share of the rails,
    ``min(rails, ranks) / ranks`` of the lowest line rate, in GB/s, times ``fraction``.  None when unknown."""
    rates = [r for r in line_rates_gbps or [] if r]
    if not rates or not rails or not ranks:
        return None
    per_rank_gbps = min(rates) * min(rails, ranks) / float(ranks)
    return round(per_rank_gbps / 8.0 * fraction, 3)
