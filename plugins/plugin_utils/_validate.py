# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric acceptance on the controller, pure: which nodes test against which (a ring or explicit pairs), rail i of
one node against rail i of the other, the perftest jobs of each node, and the verdict of every pair x rail with its
likely cause.  Data in, data out; the role (roles/rdma_validate) moves the data, rdma_perftest runs the tests."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import hashlib
import json
import re
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.rdma.k8s_node.plugins.module_utils._perftest import expected_busbw, pci_bus_device
from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import natural_key
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters import catalogue as _counter_names
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters.judge import growth as _growth
from ansible_collections.rdma.k8s_node.plugins.plugin_utils._audit_report import _table

STATUSES = ("pass", "fail", "skipped")
# cause kinds, most basic first: the first one found is the row's likely cause
CAUSES = ("unreachable", "no_facts", "no_rail", "link_down", "perftest_missing", "no_gpudirect", "perftest_no_cuda", "no_gpu",
          "gid_index", "no_address", "rail_unpinned", "mtu_mismatch", "server",
          "client_timeout", "client", "cuda", "cpu_clock", "no_traffic", "retransmissions", "congestion", "below_line_rate",
          "cross_numa", "line_rate_unknown", "no_gdrdma",
          "cri", "nccl_missing")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class ValidateInputError(ValueError):
    """The inventory or the variables cannot describe a test (unknown host in a pair, a malformed rail)."""


# -- pairing ------------------------------------------------------------------------------------------------------
def ring_pairs(hosts):
    """``[(client, server)]``: each host tests against the next one, the last against the first.  Two hosts are one
    pair (a ring of two would test the same link twice), fewer than two none."""
    hosts = list(hosts)
    if len(hosts) < 2:
        return []
    if len(hosts) == 2:
        return [(hosts[0], hosts[1])]
    return [(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(len(hosts))]


def explicit_pairs(hosts, pairs):
    """``[(client, server)]`` from ``[[a, b], ...]`` (or ``{client, server}`` dicts); every name must be a host of
    the play and the two ends must differ."""
    known = set(hosts)
    out = []
    for pair in pairs:
        if isinstance(pair, dict):
            ends = (pair.get("client"), pair.get("server"))
        elif isinstance(pair, (list, tuple)) and len(pair) == 2:
            ends = tuple(pair)
        else:
            raise ValidateInputError("a pair is [client, server] or {client: .., server: ..}, got %r" % (pair,))
        unknown = [e for e in ends if e not in known]
        if unknown:
            raise ValidateInputError("pair %s: %s not in the play's hosts" % (list(ends), ", ".join(map(str, unknown))))
        if ends[0] == ends[1]:
            raise ValidateInputError("pair %s: a node cannot be paired with itself" % (list(ends),))
        out.append(tuple(ends))
    return out


# -- rails --------------------------------------------------------------------------------------------------------
def parse_rails(value):
    """Rails as ``[{"device", "port", "netns"}]`` from ``["mlx5_0", "mlx5_1:2", {device: .., port: ..}]``."""
    rails = []
    for item in value or []:
        if isinstance(item, dict):
            if not item.get("device"):
                raise ValidateInputError("a rail needs a device: %r" % (item,))
            rails.append({"device": str(item["device"]), "port": _port(item.get("port") or 1, item),
                          "netns": item.get("netns")})
        elif isinstance(item, str) and re.match(r"^[^:\s]+(:\d+)?$", item):
            name, dummy, port = item.partition(":")
            rails.append({"device": name, "port": _port(port or 1, item), "netns": None})
        else:
            raise ValidateInputError("a rail is 'device', 'device:port' or {device, port}, got %r" % (item,))
    return rails


def _port(value, item):
    """A rail's port as an int; ValidateInputError for what int() refuses ('x', a list, inf, 5,000 digits)."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValidateInputError("a rail's port must be a number, got %r in %r" % (value, item)) from None


def default_rails(facts):
    """The node's rails when the inventory names none: every RDMA device that is not a VF, port 1, in natural
    order (mlx5_2 before mlx5_10), as NCCL numbers them."""
    devices = [d for d in (facts or {}).get("devices") or [] if not d.get("is_vf") and d.get("ports")]
    return [{"device": d["name"], "port": d["ports"][0]["port"], "netns": None}
            for d in sorted(devices, key=lambda d: natural_key(d["name"]))]


# -- plan ---------------------------------------------------------------------------------------------------------
JOB_ID_MAX = 100  # rdma_perftest's limit (the id names run files)


def job_id(client, server, rail, memory="host"):
    """``client--server--rN`` (``--gN`` for the GPU-memory run) with unsafe characters replaced; a long one (FQDNs)
    is cut and ends in a hash of the whole name, so it stays unique and within rdma_perftest's 100 characters."""
    letter = "g" if memory == "cuda" else "r"
    name = _ID_UNSAFE.sub("_", "%s--%s--%s%d" % (client, server, letter, rail))
    if len(name) <= JOB_ID_MAX:
        return name
    digest = hashlib.sha256(("%s\0%s\0%d\0%s" % (client, server, rail, memory)).encode("utf-8")).hexdigest()[:12]
    tail = "--%s%d-%s" % (letter, rail, digest)
    return name[:JOB_ID_MAX - len(tail)] + tail


def _address(job, srv, addresses, rdma_cm):
    """``(server_address, blocker or None)``: the server rail's IPv4 address (RoCE: from its GID; InfiniBand:
    its IPoIB interface); without one, the node's ``ansible_host`` when perftest exchanges over TCP (``-d`` still
    picks the rail), and nothing with rdma_cm, which routes by that address."""
    port = srv.get("port") or {}
    if port.get("ipv4"):
        return port["ipv4"], None
    fallback = (addresses or {}).get(job["server"])
    if fallback and not rdma_cm:
        return fallback, None
    return None, ("no_address", "%s %s/%d: no IPv4 address on the rail (%s)%s" % (
        job["server"], srv["rail"]["device"], srv["rail"]["port"], port.get("netdev") or "no netdev",
        "; rdma_cm needs one" if rdma_cm else "; and no ansible_host"))


def _pinning(job, rails, rdma_cm):
    """With rdma_cm each end binds to its rail's address (``--bind_source_ip``); a perftest without that option
    lets the kernel route choose the NIC, which on a node of several rails may not be the rail under test.
    ``(bind: {role: address}, blockers, notes)``."""
    bind, blockers, notes = {}, [], []
    if not rdma_cm:
        return bind, blockers, notes
    for role in ("client", "server"):
        end = job["ends"][role]
        address = (end.get("port") or {}).get("ipv4")
        if (end.get("perftest") or {}).get("bind_source_ip") and address:
            bind[role] = address
            continue
        text = "%s: perftest has no --bind_source_ip (23.07+), so with rdma_cm the kernel route picks the NIC" % (
            end["host"])
        if len(rails.get(end["host"]) or []) > 1:
            blockers.append(("rail_unpinned", text + "; set rdma_validate_rdma_cm: false or update perftest"))
        else:
            notes.append(text)
    return bind, blockers, notes


# nvidia-smi topo's distance classes, nearest first (rdma_facts' gpu_nic_affinity)
_AFFINITY = ("PIX", "PXB", "PHB", "NODE", "SYS")


def gpu_info(facts):
    """What the GPU run needs from one node's rdma_facts: ``{"gpus": [pci of GPUs bound to nvidia, in PCI order],
    "affinity": gpu_nic_affinity, "gpudirect": "peermem" | "dmabuf" | "none" | None}``."""
    facts = facts or {}
    gpus = sorted(g["pci_address"] for g in facts.get("gpus") or [] if g.get("driver") == "nvidia" and g.get("pci_address"))
    return {"gpus": gpus, "affinity": facts.get("gpu_nic_affinity") or {},
            "gpudirect": ((facts.get("drivers") or {}).get("gpudirect") or {}).get("active")}


def nearest_gpu(info, device):
    """``(pci, class)`` of the GPU nearest to RDMA device ``device`` (PIX before PXB, PHB, NODE, SYS; the lower PCI
    address on a tie), or ``(None, None)`` when no GPU's distance to it is known."""
    best = None
    for pci in info.get("gpus") or []:
        klass = (info.get("affinity") or {}).get(pci, {}).get(device)
        if klass in _AFFINITY:
            key = (_AFFINITY.index(klass), pci)
            best = min(best, key) if best else key
    return (best[1], _AFFINITY[best[0]]) if best else (None, None)


def _cuda_end(host, end, info):
    """``(cuda job args, blockers)`` of one end of a GPU-memory run: the GPU nearest to the rail, by PCI bus id when
    perftest has ``--use_cuda_bus_id`` (4.4-0.36+), else by its index in PCI order (the module sets
    CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA's default order is FASTEST_FIRST); ``--use_cuda_dmabuf`` when the node's
    GPUDirect path is dma-buf (no nvidia_peermem)."""
    perftest = end.get("perftest") or {}
    path = info.get("gpudirect")
    if path == "none":
        return None, [("no_gpudirect", "%s: no GPUDirect RDMA path (nvidia_peermem not loaded, DMA-BUF not usable: "
                       "open GPU kernel modules and Linux 5.12+ needed)" % host)]
    if not perftest.get("cuda"):
        return None, [("perftest_no_cuda", "%s: %s was built without CUDA (no --use_cuda in its --help); build perftest "
                       "with CUDA or set rdma_validate_gpu: false" % (host, perftest.get("binary", "ib_write_bw")))]
    if path == "dmabuf" and not perftest.get("cuda_dmabuf"):
        return None, [("perftest_no_cuda", "%s: the GPUDirect path is dma-buf but %s has no --use_cuda_dmabuf "
                       "(perftest 4.5-0.18+, built with CUDA 11.7+)" % (host, perftest.get("binary", "ib_write_bw")))]
    pci, klass = nearest_gpu(info, end["rail"]["device"])
    if pci is None:
        return None, [("no_gpu", "%s: no GPU's distance to %s is known (gpu_nic_affinity)" % (host, end["rail"]["device"]))]
    args = {"cuda_dmabuf": path == "dmabuf"}
    if perftest.get("cuda_bus_id"):
        args["cuda_bus_id"] = pci
    else:
        args["cuda_index"] = info["gpus"].index(pci)
    end["gpu"] = {"pci": pci, "distance": klass, "index": info["gpus"].index(pci), "dmabuf": args["cuda_dmabuf"]}
    return args, []


def plan(pairs, rails, probes, base_port=18515, addresses=None, rdma_cm=False, gpus=None):
    """The perftest jobs: one per pair x rail whose both ends can run; the others carry the reason they cannot.

    ``rails``: ``{host: [rail]}``; ``probes``: ``{host: rdma_perftest probe result or None (unreachable)}``;
    ``addresses``: ``{host: ansible_host}`` (the server's address when its rail has none and ``rdma_cm`` is off).
    Returns ``{"jobs": [...], "servers": {host: [job args]}, "clients": {host: [job args]}, "waves": [{host:
    [job args]}]}``; each server host numbers its TCP ports from ``base_port`` (an int, or ``{host: int}`` with a
    per-host first port) so several jobs can run on one node.  ``waves`` splits the clients so that no two jobs
    of a wave share a server rail (explicit pairs ``[a, c], [b, c]``): run one wave after the other, else the two
    clients halve the rail's bandwidth between them.

    ``gpus``: ``{host: gpu_info(facts)}``; a pair whose two nodes both have GPUs bound to nvidia also gets a
    GPU-memory run per rail (``memory: cuda``, ids ``...--gN``) from the GPU nearest to each end's rail; it shares
    its server rail with the host-memory run, so it runs in a later wave.
    """
    if not isinstance(base_port, dict):
        base_port = {"__all__": base_port}
    jobs, servers, clients, waves = [], {}, {}, []
    next_port, rail_use = {}, {}
    gpus = gpus or {}
    for client, server, index, memory in _pair_rails(pairs, rails, gpus):
        job = {"id": job_id(client, server, index, memory), "client": client, "server": server, "rail": index,
               "memory": memory, "ends": {}, "blocked": []}
        for role, host in (("client", client), ("server", server)):
            probe = probes.get(host)
            host_rails = rails.get(host) or []
            rail = host_rails[index] if index < len(host_rails) else None
            port = _probe_port(probe, rail)
            job["ends"][role] = {"host": host, "rail": rail, "port": port,
                                 "perftest": (probe or {}).get("perftest")}
            job["blocked"].extend(_blockers(host, probe, rail, port, index, host_rails))
        cuda = {}
        if memory == "cuda" and not job["blocked"]:
            for role, host in (("client", client), ("server", server)):
                cuda[role], blockers = _cuda_end(host, job["ends"][role], gpus.get(host) or {})
                job["blocked"].extend(blockers)
        jobs.append(job)
        if job["blocked"]:
            continue
        srv, cli = job["ends"]["server"], job["ends"]["client"]
        address, blocker = _address(job, srv, addresses, rdma_cm)
        bind, pin_blockers, job["notes"] = _pinning(job, rails, rdma_cm)
        job["blocked"].extend(([blocker] if blocker else []) + pin_blockers)
        if job["blocked"]:
            continue
        tcp_port = next_port.get(server, base_port.get(server, base_port.get("__all__", 18515)))
        next_port[server] = tcp_port + 1
        job["tcp_port"] = tcp_port
        servers.setdefault(server, []).append({
            "id": job["id"], "device": srv["rail"]["device"], "port": srv["rail"]["port"],
            "gid_index": srv["port"].get("gid_index"), "tcp_port": tcp_port, "netns": srv["rail"].get("netns"),
            "bind_source_ip": bind.get("server"), "cpus": _local_cpus(srv["port"]), **(cuda.get("server") or {})})
        clients.setdefault(client, []).append({
            "id": job["id"], "device": cli["rail"]["device"], "port": cli["rail"]["port"],
            "gid_index": cli["port"].get("gid_index"), "tcp_port": tcp_port, "server_address": address,
            "netns": cli["rail"].get("netns"), "bind_source_ip": bind.get("client"),
            "cpus": _local_cpus(cli["port"]), **(cuda.get("client") or {})})
        rail_key = (server, srv["rail"]["device"], srv["rail"]["port"], srv["rail"].get("netns"))
        job["wave"] = rail_use.get(rail_key, 0)
        rail_use[rail_key] = job["wave"] + 1
        while len(waves) <= job["wave"]:
            waves.append({})
        waves[job["wave"]].setdefault(client, []).append(clients[client][-1])
    return {"jobs": jobs, "servers": servers, "clients": clients, "waves": waves}


def _pair_rails(pairs, rails, gpus):
    """``(client, server, rail, memory)`` in plan order: each pair's host-memory runs, then its GPU-memory runs when
    both nodes have GPUs bound to nvidia."""
    for client, server in pairs:
        width = max(len(rails.get(client) or []), len(rails.get(server) or []), 1)
        memories = ["host"]
        if all((gpus.get(h) or {}).get("gpus") for h in (client, server)):
            memories.append("cuda")
        for memory in memories:
            for index in range(width):
                yield client, server, index, memory


#: seconds of Ansible's own work a server's lifetime allows before the first client wave (the counter reads) and
#: per client job around its run (its wave's task and counter reads, over ssh): a lifetime that counted only the
#: clients' timeouts (plus 30 s) could end a server before its client came when that work is slow (a loaded
#: controller took 2.5 min to read the counters before kernel_vm's first wave)
SERVER_GRACE = 300
JOB_GRACE = 60


def server_lifetime(the_plan, timeout, start_timeout):
    """Seconds a server may wait for its client: the client nodes may run one after another (a client throttle,
    Ansible's forks), so a server can wait for every client job of the plan, and Ansible's work around them; ``stop``
    ends it as soon as the clients are done (the lifetime only ends servers the play left behind)."""
    total = sum(len(jobs) for jobs in (the_plan.get("clients") or {}).values())
    return int(start_timeout) + SERVER_GRACE + (int(timeout) + JOB_GRACE) * max(total, 1)


def _local_cpus(port):
    """The CPUs a test end runs on (taskset): the NIC's ``local_cpulist`` when the kernel knows its NUMA node."""
    if (port or {}).get("numa_node") is not None and port["numa_node"] >= 0 and port.get("local_cpulist"):
        return port["local_cpulist"]
    return None


def _probe_port(probe, rail):
    if not probe or not rail:
        return None
    for port in probe.get("ports") or []:
        if port.get("device") == rail["device"] and port.get("port") == rail["port"]:
            return port
    return None


def _blockers(host, probe, rail, port, index, host_rails):
    """Reasons a job cannot run at all, as ``(kind, text)``; link and tool problems stop it before any traffic."""
    if probe is None:
        return [("unreachable", "%s: unreachable or its probe failed" % host)]
    if probe.get("facts_failed"):
        return [("no_facts", "%s: rdma_facts failed: %s" % (host, probe.get("facts_msg", "")))]
    if probe.get("failed"):
        return [("unreachable", "%s: probe failed: %s" % (host, probe.get("msg", "")))]
    if rail is None:
        return [("no_rail", "%s has no rail %d (its rails: %s)" % (
            host, index, ", ".join(r["device"] for r in host_rails) or "none"))]
    if port is None or not port.get("exists"):
        return [("no_rail", "%s: no RDMA device port %s/%d" % (host, rail["device"], rail["port"]))]
    out = []
    down = []
    if port.get("state") != "ACTIVE":
        down.append("port state %s" % port.get("state"))
    if port.get("phys_state") not in (None, "LinkUp"):
        down.append("physical state %s" % port.get("phys_state"))
    if port.get("netdev") and port.get("operstate") not in ("up", "unknown", None):
        down.append("netdev %s %s" % (port["netdev"], port.get("operstate")))
    if down:
        out.append(("link_down", "%s %s/%d: link down (%s)" % (host, rail["device"], rail["port"], ", ".join(down))))
    if not (probe.get("perftest") or {}).get("path"):
        out.append(("perftest_missing", "%s: perftest missing (%s not installed)" % (
            host, (probe.get("perftest") or {}).get("binary", "ib_write_bw"))))
    if port.get("link_layer") == "Ethernet" and port.get("gid_index") is None:
        out.append(("gid_index", "%s %s: %s" % (host, rail["device"], port.get("gid_problem"))))
    return out


# -- verdicts -----------------------------------------------------------------------------------------------------
def _first_error(output, result):
    errors = (result or {}).get("errors") or []
    if errors:
        return errors[0]
    lines = [line.strip() for line in (output or "").splitlines() if line.strip().strip("*-# ")]
    return lines[-1] if lines else "no output"


def _tail(text, limit=1500):
    text = text or ""
    return text if len(text) <= limit else "..." + text[-limit:]


def _numa_hint(host, port):
    """A note when the end could not be pinned to its NIC's NUMA node: the kernel gives no NUMA node or CPU list
    for the NIC (a one-node machine reports -1: nothing to pin), so perftest's buffers may be on the other
    socket's memory."""
    port = port or {}
    if port.get("numa_node") is None and port.get("exists"):
        return "%s %s: NUMA node unknown, the test ran unpinned (cross-NUMA possible)" % (host, port.get("device"))
    if port.get("numa_node") is not None and port["numa_node"] >= 0 and not port.get("local_cpulist"):
        return "%s %s: NUMA node %s without local_cpulist, the test ran unpinned (cross-NUMA possible)" % (
            host, port.get("device"), port["numa_node"])
    return None


# -- the rails' counters around a wave ---------------------------------------------------------------------------
def counter_readings(entries):
    """A node's counter readings (rdma_validate__counters: ``[{wave, before, after, msg}]``, each reading rdma_perftest's
    ``counters``) as ``{wave: {"before": {(device, port): counters}, "after": {...}, "why": text or None}}``."""
    out = {}
    for entry in entries or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("wave"), int):
            continue
        found = {"before": {}, "after": {}, "why": entry.get("msg")}
        for when in ("before", "after"):
            for port in ((entry.get(when) or {}).get("ports") or []):
                found[when][(port.get("device"), port.get("port"))] = port.get("counters")
        out[entry["wave"]] = found
    return out


def _counter_end(role, end, wave, readings):
    """One end of a job: what its rail's counters did during the job's wave."""
    rail = end.get("rail") or {}
    key = (rail.get("device"), rail.get("port"))
    item = {"role": role, "host": end["host"], "device": key[0], "port": key[1], "read": False}
    taken = (readings.get(end["host"]) or {}).get(wave)
    if taken is None:
        item["why"] = "no reading around the test"
        return item
    before, after = taken["before"].get(key), taken["after"].get(key)
    if before is None or after is None:
        item["why"] = taken.get("why") or ("the port has no hw_counters" if key in taken["after"] else "not read")
        return item
    found = _growth(before, after)
    item.update(read=True, deltas=found["deltas"], reset=found["reset"])
    return item


def job_counters(job, readings, jobs=()):
    """``{"client": end, "server": end, "shared": [job ids]}`` for a job that ran: each end's rail counters over the
    job's wave (``readings``: ``{host: counter_readings()}``); ``shared`` names the other jobs of the wave that used
    one of the two rails (in a ring a node is a client and a server at once: the counts are the rail's, not the job's
    alone).  None for a job that did not run."""
    if job.get("blocked") or job.get("wave") is None:
        return None
    ends = dict((role, _counter_end(role, job["ends"][role], job["wave"], readings)) for role in ("client", "server"))
    mine = set((e["host"], e["device"], e["port"]) for e in ends.values())
    shared = []
    for other in jobs:
        if other is job or other.get("id") == job.get("id") or other.get("blocked") or other.get("wave") != job["wave"]:
            continue
        rails = set((other["ends"][role]["host"], (other["ends"][role].get("rail") or {}).get("device"),
                     (other["ends"][role].get("rail") or {}).get("port")) for role in ("client", "server"))
        if rails & mine:
            shared.append(other["id"])
    return {"client": ends["client"], "server": ends["server"], "shared": sorted(shared)}


def _grew(end, names):
    return [(name, end["deltas"][name]) for name in names if name in (end.get("deltas") or {})]


def _end_text(end, names):
    return "%s %s/%s (%s) %s" % (end["host"], end["device"], end["port"], end["role"], ", ".join(
        "%s +%d" % item for item in _grew(end, names)))


def _counter_verdict(counters, failed_on_traffic):
    """``(causes, notes)`` from the rails' counters over the test: retransmissions (and connections that gave up) or
    congestion notifications that grew name a cause of a row that failed on traffic; counters that did not grow
    say so."""
    if not counters:
        return [], []
    ends = [counters["client"], counters["server"]]
    causes, notes = [], []
    lost = _counter_names.RETRANSMISSION + _counter_names.ERRORS
    for end in ends:
        if not end["read"]:
            notes.append("%s %s/%s: retransmission counters not read (%s)" % (
                end["host"], end["device"], end["port"], end.get("why")))
        elif end.get("reset"):
            notes.append("%s %s/%s: %s went back during the test (driver reload or reset), counted from 0" % (
                end["host"], end["device"], end["port"], ", ".join(end["reset"])))
    retransmitted = [end for end in ends if end["read"] and _grew(end, lost)]
    congested = [end for end in ends if end["read"] and _grew(end, _counter_names.CONGESTION)]
    shared = (" (the counts are the rails', which %s also used in this wave)" % ", ".join(counters["shared"])
              if counters.get("shared") else "")
    if retransmitted:
        text = "retransmissions during the test: %s%s" % ("; ".join(_end_text(end, lost) for end in retransmitted), shared)
        if failed_on_traffic:
            causes.append(("retransmissions", text))
        else:
            notes.append(text + ", although the row reached the line")
    if congested:
        text = "congestion notifications during the test (ECN/DCQCN slowed the sender): %s%s" % (
            "; ".join(_end_text(end, _counter_names.CONGESTION) for end in congested), shared)
        if failed_on_traffic:
            causes.append(("congestion", text))
        else:
            notes.append(text)
    if failed_on_traffic and not retransmitted and not congested and all(end["read"] for end in ends):
        notes.append("the retransmission and congestion counters did not grow during the test (%s): no packet was "
                     "lost or marked on this path, look elsewhere" % ", ".join(
                         "%s %s/%s" % (end["host"], end["device"], end["port"]) for end in ends))
    return causes, notes


def judge(job, server_run, client_run, counters, settings):
    """The report row of one pair x rail.

    ``server_run``: the server's start entry (listening/exited/not_started) merged with its stop entry;
    ``client_run``: the client's entry; ``counters``: :func:`job_counters` (the rails' hw_counters over the job's
    wave), or None when they were not read; ``settings``: ``min_pct``,
    ``min_gbps`` (overrides the percentage when set), ``start_timeout``, ``timeout``, ``check_mode``.
    """
    cli, srv = job["ends"]["client"], job["ends"]["server"]
    cport, sport = cli.get("port") or {}, srv.get("port") or {}
    rates = [p.get("rate_gbps") for p in (cport, sport) if p.get("rate_gbps")]
    line_rate = min(rates) if rates else None
    row = {"id": job["id"], "pair": "%s -> %s" % (job["client"], job["server"]), "client": job["client"],
           "server": job["server"], "rail": job["rail"],
           "client_device": (cli.get("rail") or {}).get("device"), "server_device": (srv.get("rail") or {}).get("device"),
           "gid_index": [cport.get("gid_index"), sport.get("gid_index")], "gbps": None, "line_rate_gbps": line_rate,
           "pct_of_line_rate": None, "threshold_gbps": None, "status": "fail", "cause": None, "causes": [],
           "notes": [], "seconds": None, "memory": job.get("memory", "host"),
           "gpu": [(cli.get("gpu") or {}).get("pci"), (srv.get("gpu") or {}).get("pci")]}
    causes = list(job.get("blocked") or [])
    notes = list(job.get("notes") or [])
    for host, port in ((job["client"], cport), (job["server"], sport)):
        if port.get("gid_problem") and port.get("gid_index") is not None:
            causes.append(("gid_index", "%s %s: %s" % (host, port.get("device"), port["gid_problem"])))
    mtus = [(h, p.get("netdev"), p.get("mtu")) for h, p in ((job["client"], cport), (job["server"], sport))]
    suspects = []  # worth naming as a cause only when the row failed on traffic
    if all(m[2] for m in mtus) and mtus[0][2] != mtus[1][2]:
        suspects.append(("mtu_mismatch", "MTU mismatch: %s" % ", ".join("%s %s %s" % m for m in mtus)))
    if len(rates) == 2 and rates[0] != rates[1]:
        notes.append("port rates differ: %s %s Gb/s, %s %s Gb/s" % (job["client"], rates[0], job["server"], rates[1]))
    for host, port in ((job["client"], cport), (job["server"], sport)):
        hint = _numa_hint(host, port)
        if hint:
            notes.append(hint)
    if settings.get("min_gbps") is not None:
        row["threshold_gbps"] = float(settings["min_gbps"])
    elif line_rate:
        row["threshold_gbps"] = round(line_rate * float(settings.get("min_pct", 90)) / 100.0, 4)
    if job.get("blocked"):
        return _finish(row, causes, notes + [text for dummy, text in suspects])
    if settings.get("check_mode"):
        row["status"] = "skipped"
        row["cause"] = "check mode: no traffic was run"
        return _finish(row, [], notes, keep_status=True)
    server_run = server_run or {}
    row["server_output"] = _tail(((server_run.get("stop") or {}).get("output")) or server_run.get("output"))
    row["client_output"] = _tail((client_run or {}).get("output"))
    if server_run.get("port_in_use"):
        causes.append(("server", "%s: TCP port %s is already in use on the node (another perftest or a service); "
                       "set rdma_validate_base_port" % (job["server"], job.get("tcp_port"))))
    elif server_run.get("status") == "not_started":
        causes.append(("server", "%s: server did not listen within %ss (%s)" % (
            job["server"], server_run.get("waited", settings.get("start_timeout")),
            _first_error(server_run.get("output"), None))))
    elif server_run.get("status") == "exited":
        causes.append(("server", "%s: server exited before the client came (rc %s): %s" % (
            job["server"], server_run.get("rc"), _first_error(server_run.get("output"), server_run.get("result")))))
    elif client_run is None:
        causes.append(("client", "%s: the client did not run (unreachable during the test?)" % job["client"]))
    else:
        result = client_run.get("result") or {}
        row["seconds"] = client_run.get("seconds")
        if client_run.get("timed_out"):
            causes.append(("client_timeout", "%s: client killed after %ss (timeout): %s" % (
                job["client"], client_run.get("seconds"), _first_error(client_run.get("output"), result))))
        elif client_run.get("rc") not in (0, None) or result.get("avg_gbps") is None:
            causes.append(("client", "%s: client failed (rc %s): %s" % (
                job["client"], client_run.get("rc"), _first_error(client_run.get("output"), result))))
        else:
            causes.extend(_cuda_causes(job, client_run, server_run))
            row["gbps"] = result["avg_gbps"]
            if line_rate:
                row["pct_of_line_rate"] = round(100.0 * row["gbps"] / line_rate, 1)
            if not row["gbps"] and result.get("r_squared") is not None:
                # get_clock.c: the cycles-per-second fit of its CPU clock calibration has r^2 < 0.9, get_cpu_mhz()
                # returns 0 and, with -F, every bandwidth is computed as 0: nothing is known about the link
                causes.append(("cpu_clock", "perftest could not calibrate the CPU clock (r^2 %s < 0.9); rerun on a "
                               "quiet CPU" % result["r_squared"]))
            elif not row["gbps"]:
                causes.append(("no_traffic", "0 Gb/s: the test connected but no data crossed (%s iterations)" %
                               result.get("iterations")))
            elif row["threshold_gbps"] is None:
                causes.append(("line_rate_unknown", "the port rate is unknown; set rdma_validate_min_gbps"))
            elif row["gbps"] < row["threshold_gbps"]:
                causes.append(("below_line_rate", "%s Gb/s is below %s Gb/s (%s)" % (
                    _gbps(row["gbps"]), _gbps(row["threshold_gbps"]),
                    "rdma_validate_min_gbps" if settings.get("min_gbps") is not None
                    else "%s %% of %s Gb/s" % (settings.get("min_pct", 90), line_rate))))
    failed_on_traffic = any(k in ("below_line_rate", "no_traffic", "client", "client_timeout") for k, dummy in causes)
    if counters:
        row["counters"] = dict((role, dict((k, v) for k, v in counters[role].items() if k != "role"))
                               for role in ("client", "server"))
        row["counters"]["shared"] = counters.get("shared") or []
    counted, counter_notes = _counter_verdict(counters, failed_on_traffic)
    notes.extend(counter_notes)
    if failed_on_traffic:
        # the usual suspects of a slow or failing link
        causes.extend(suspects + counted)
        if any(k == "below_line_rate" for k, dummy in causes):
            causes.extend(("cross_numa", n) for n in notes if "cross-NUMA" in n)
    else:
        notes.extend(text for dummy, text in suspects)
    return _finish(row, causes, notes)


def _cuda_causes(job, client_run, server_run):
    """A GPU-memory run that perftest did not make on the GPU it was given: no "initializing CUDA" (it ran on host
    memory) or another GPU picked (perftest prints the bus:device of each CUDA device and the one it picked)."""
    if job.get("memory") != "cuda":
        return []
    out = []
    for role, host, run in (("client", job["client"], client_run),
                            ("server", job["server"], (server_run or {}).get("stop") or {})):
        wanted = (job["ends"][role].get("gpu") or {}).get("pci")
        result = (run or {}).get("result") or {}
        if role == "server" and not result:
            continue  # the server's output is not always collected
        cuda = result.get("cuda")
        if cuda is None:
            out.append(("cuda", "%s: perftest did not initialise CUDA, the run used host memory" % host))
        elif wanted and cuda.get("picked_pci") and cuda["picked_pci"] != pci_bus_device(wanted):
            out.append(("cuda", "%s: perftest used the GPU at %s, not %s (the GPU nearest to the rail)" % (
                host, cuda["picked_pci"], wanted)))
    return out


def _finish(row, causes, notes, keep_status=False):
    ordered = sorted(causes, key=lambda c: CAUSES.index(c[0]))
    row["causes"] = [{"kind": k, "text": t} for k, t in ordered]
    row["notes"] = notes
    if not keep_status:
        row["status"] = "fail" if ordered else "pass"
        row["cause"] = ordered[0][1] if ordered else None
    return row


# -- step 4: the NCCL command ---------------------------------------------------------------------------------------
NCCL_DEFAULT = ["all_reduce_perf", "-b", "8M", "-e", "128M", "-f", "2"]


def nccl_command(configured, facts):
    """``{"command", "gpus", "skip"}``: the operator's command as given, or nccl-tests over every GPU of the node
    (``-g <GPUs bound to nvidia>``).  One rank opens no transport at all (NCCL connects channels only when
    ``nRanks > 1``), so below two GPUs the default run would prove nothing: it is skipped with the reason."""
    gpus = len([g for g in (facts or {}).get("gpus") or [] if g.get("driver") == "nvidia"])
    if configured:
        return {"command": [str(a) for a in configured], "gpus": gpus, "skip": None}
    if gpus < 2:
        return {"command": None, "gpus": gpus, "skip": (
            "%d GPU%s bound to nvidia: one rank opens no NCCL transport (set rdma_validate_nccl_command for a "
            "multi-node run)" % (gpus, "" if gpus == 1 else "s"))}
    return {"command": NCCL_DEFAULT + ["-g", str(gpus)], "gpus": gpus, "skip": None}


def nccl_env(base, probe, roce):
    """The environment of the node's NCCL run: ``base`` (the operator's ``rdma_validate_nccl_env``) plus, when the
    probed rails include RoCE ports, what pods on a lossless RoCE fabric use (docs/roce.md): ``NCCL_IB_TC`` = the
    RoCE DSCP x 4 (the ToS byte the switches classify), ``NCCL_IB_SL`` = the lossless priority, both from the
    roce_qos desired state (``roce`` = ``{"dscp", "priority"}``), and ``NCCL_IB_GID_INDEX`` = the RoCE v2 GID index
    the probe chose, when every RoCE rail has the same one (NCCL takes one index for all HCAs; without it NCCL >= 2.21
    picks the RoCE v2 entry itself).  A variable the operator set in ``base`` is kept as given."""
    env = dict((str(k), str(v)) for k, v in (base or {}).items())
    ports = [p for p in ((probe or {}).get("ports") or []) if isinstance(p, dict) and p.get("link_layer") == "Ethernet"]
    if not ports or not roce:
        return env
    derived = {"NCCL_IB_TC": str(int(roce["dscp"]) << 2), "NCCL_IB_SL": str(int(roce["priority"]))}
    indexes = sorted(set(p.get("gid_index") for p in ports if p.get("gid_index") is not None))
    if len(indexes) == 1 and all(p.get("gid_index") is not None for p in ports):
        derived["NCCL_IB_GID_INDEX"] = str(indexes[0])
    for key, value in derived.items():
        env.setdefault(key, value)
    return env


# -- node rows (steps 1, 2 and 4) ----------------------------------------------------------------------------------
# Accepted all_reduce bus bandwidth, % of each rank's share of the rails' line rate (expected_busbw), per link layer:
# nccl-tests' busbw is comparable with the hardware bandwidth (doc/PERFORMANCE.md); RoCE is given more headroom (ECN/PFC
# congestion control, 4096-byte MTU at most)
NCCL_BUSBW_PCT = {"InfiniBand": 80, "Ethernet": 70}


def nccl_threshold(probe, gpus, settings):
    """``(GB/s, how)``: the bus bandwidth the node's NCCL run must reach, or ``(None, why not)``."""
    settings = settings or {}
    if settings.get("nccl_min_busbw") is not None:
        return float(settings["nccl_min_busbw"]), "rdma_validate_nccl_min_busbw"
    ports = [p for p in (probe or {}).get("ports") or [] if p.get("exists") and p.get("rate_gbps")]
    if not ports or not gpus:
        return None, "line rate or GPU count unknown"
    pct = dict(NCCL_BUSBW_PCT, **(settings.get("nccl_busbw_pct") or {}))
    layer = "InfiniBand" if all(p.get("link_layer") == "InfiniBand" for p in ports) else "Ethernet"
    value = expected_busbw([p["rate_gbps"] for p in ports], len(ports), gpus, float(pct.get(layer, 80)) / 100.0)
    return value, "%s %% (%s) of %d rail%s x %s Gb/s shared by %d GPUs, in GB/s" % (
        pct.get(layer, 80), layer, len(ports), "" if len(ports) == 1 else "s", min(p["rate_gbps"] for p in ports), gpus)


def node_rows(host, probe, nccl, nccl_wanted, nccl_gpus=None, settings=None):
    """Per node: step 1 (a pod's view through CRI) and step 4 (NCCL's transport and bus bandwidth), each
    pass/fail/skipped."""
    rows = []
    if probe is None or probe.get("failed"):
        rows.append({"host": host, "step": "1-pod", "status": "fail", "cause": "unreachable or probe failed",
                     "detail": (probe or {}).get("msg")})
    else:
        pod = probe.get("pod") or {}
        rows.append({"host": host, "step": "1-pod", "status": pod.get("status", "skipped"),
                     "cause": pod.get("reason"),
                     "detail": {"memlock": pod.get("memlock"), "devices": pod.get("devices_seen")}})
    if not nccl_wanted:
        return rows
    nccl = nccl or {}
    if nccl.get("status") in ("absent", "skipped"):
        rows.append({"host": host, "step": "4-nccl", "status": "skipped", "cause": nccl.get("reason"), "detail": None})
    elif nccl.get("status") == "timed_out":
        rows.append({"host": host, "step": "4-nccl", "status": "fail", "cause": "nccl-tests timed out",
                     "detail": (nccl.get("result") or {}).get("transports")})
    elif nccl.get("status") == "ran":
        result = nccl.get("result") or {}
        cause = result.get("cause")
        notes = list(result.get("notes") or [])
        threshold, how = nccl_threshold(probe, nccl_gpus, settings)
        busbw = result.get("avg_busbw_gbytes")
        if nccl.get("rc") not in (0, None):
            cause = "nccl-tests failed (rc %s)%s" % (nccl.get("rc"), "; " + cause if cause else "")
        elif threshold is not None and busbw is not None and busbw < threshold:
            low = "average bus bandwidth %s GB/s is below %s GB/s (%s)" % (busbw, threshold, how)
            cause = "%s; %s" % (cause, low) if cause else low
        elif busbw is None:
            notes.append("no '# Avg bus bandwidth' line: the bus bandwidth was not judged")
        elif threshold is None:
            notes.append("bus bandwidth not judged: %s" % how)
        rows.append({"host": host, "step": "4-nccl", "status": "fail" if cause else "pass", "cause": cause,
                     "detail": {"transports": result.get("transports"), "notes": notes,
                                "avg_busbw_gbytes": busbw, "min_busbw_gbytes": threshold,
                                "gdr_disabled": result.get("gdr_disabled") or []}})
    else:
        rows.append({"host": host, "step": "4-nccl", "status": "fail", "cause": "unreachable or the run failed",
                     "detail": nccl.get("msg")})
    return rows


def report(rows, nodes, settings, generated=None):
    """The whole report: ``{generated, settings, summary, pairs: [row], nodes: [row]}``."""
    counts = dict((s, 0) for s in STATUSES)
    for row in list(rows) + list(nodes):
        counts[row["status"]] += 1
    status = "fail" if counts["fail"] else ("pass" if counts["pass"] else "skipped")
    return {"generated": generated, "settings": settings,
            "summary": {"status": status, "pairs": len(rows), "by_status": counts,
                        "causes": sorted(set(c["kind"] for r in rows for c in r["causes"][:1]))},
            "pairs": list(rows), "nodes": list(nodes)}


# -- report.md and junit.xml ----------------------------------------------------------------------------------------
_MARK = {"pass": "ok", "fail": "**FAIL**", "skipped": "*skipped*"}


def _gbps(value):
    return "-" if value is None else "%.2f" % value


def _rail_label(row):
    """The rail's number, ``0 (GPU 0000:1b:00.0 -> 0000:1b:00.0)`` for a GPU-memory run."""
    if row.get("memory") != "cuda":
        return row["rail"]
    return "%s (GPU %s -> %s)" % (row["rail"], (row.get("gpu") or [None, None])[0] or "-",
                                  (row.get("gpu") or [None, None])[1] or "-")


def markdown(rep):
    """report.md: the verdict, one table row per pair x rail (Gb/s, % of line rate, cause), then the node steps."""
    summary = rep["summary"]
    out = ["# RDMA fabric acceptance", ""]
    if rep.get("generated"):
        out.append("Generated %s. " % rep["generated"])
    settings = rep.get("settings") or {}
    threshold = ("%s Gb/s (rdma_validate_min_gbps)" % settings["min_gbps"] if settings.get("min_gbps") is not None
                 else "%s %% of the port's line rate" % settings.get("min_pct", 90))
    out.append("Status **%s**: %d pair x rail rows; rows by status: %s. Accepted line: %s." % (
        summary["status"], summary["pairs"], ", ".join("%s %d" % (s, summary["by_status"][s]) for s in STATUSES),
        threshold))
    out.extend(["", "## Point to point (ib_write_bw)", ""])
    order = {"fail": 0, "skipped": 1, "pass": 2}
    rows = sorted(rep["pairs"], key=lambda r: (order[r["status"]], r["pair"], r["rail"]))
    out.extend(_table(["pair", "rail", "devices", "Gb/s", "% line", "line rate", "status", "likely cause", "notes"],
                      [[r["pair"], _rail_label(r), "%s -> %s" % (r["client_device"] or "-", r["server_device"] or "-"),
                        _gbps(r["gbps"]), "-" if r["pct_of_line_rate"] is None else "%.1f" % r["pct_of_line_rate"],
                        _gbps(r["line_rate_gbps"]), _MARK[r["status"]], r["cause"],
                        "; ".join([c["text"] for c in r["causes"][1:]] + r["notes"])] for r in rows]))
    if rep.get("nodes"):
        out.extend(["", "## Nodes (step 1: a pod through CRI; step 4: NCCL)", ""])
        out.extend(_table(["host", "step", "status", "cause", "detail"],
                          [[n["host"], n["step"], _MARK[n["status"]], n["cause"], n["detail"]] for n in rep["nodes"]]))
    return "\n".join(out) + "\n"


def _junit_pair_name(row):
    """``a->b.rail0`` (host memory) or ``a->b.rail0.cuda`` (GPU memory)."""
    return "%s.rail%d%s" % (row["pair"].replace(" -> ", "->"), row["rail"], ".cuda" if row.get("memory") == "cuda" else "")


def junit(rep, suite="rdma.k8s_node validate"):
    """junit.xml: a suite for the pairs and one for the node steps; fail is a failure, skipped is skipped."""
    by = rep["summary"]["by_status"]
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<testsuites name=%s tests="%d" failures="%d" errors="0" skipped="%d">' % (
                 quoteattr(suite), sum(by.values()), by["fail"], by["skipped"])]
    groups = (("pairs", [(_junit_pair_name(r), "perftest", r) for r in rep["pairs"]]),
              ("nodes", [("%s.%s" % (n["host"], n["step"]), "node", n) for n in rep.get("nodes") or []]))
    for name, cases in groups:
        fails = len([1 for dummy, dummy2, r in cases if r["status"] == "fail"])
        skips = len([1 for dummy, dummy2, r in cases if r["status"] == "skipped"])
        lines.append('  <testsuite name=%s tests="%d" failures="%d" errors="0" skipped="%d">' % (
            quoteattr(name), len(cases), fails, skips))
        for case, classname, row in cases:
            lines.append('    <testcase classname=%s name=%s>' % (quoteattr(classname), quoteattr(case)))
            body = json.dumps(dict((k, v) for k, v in row.items() if k != "status"), sort_keys=True, indent=1)
            if row["status"] == "fail":
                lines.append('      <failure type="fail" message=%s>%s</failure>' % (
                    quoteattr(row.get("cause") or "fail"), escape(body)))
            elif row["status"] == "skipped":
                lines.append('      <skipped message=%s/>' % quoteattr(row.get("cause") or "skipped"))
            lines.append("    </testcase>")
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def short_summary(rep, limit=20):
    """A few lines for the end of the play."""
    lines = ["validate: status %s, %s" % (rep["summary"]["status"], ", ".join(
        "%s %d" % (s, rep["summary"]["by_status"][s]) for s in STATUSES))]
    for row in rep["pairs"]:
        if len(lines) > limit:
            lines.append("... more in the report")
            break
        lines.append("%s rail %s %s %s Gb/s%s" % (row["pair"], _rail_label(row), row["status"].upper(), _gbps(row["gbps"]),
                                                  ": " + row["cause"] if row["cause"] else ""))
    for node in rep.get("nodes") or []:
        if node["status"] != "pass":
            lines.append("%s %s %s: %s" % (node["host"], node["step"], node["status"].upper(), node["cause"]))
    return lines
