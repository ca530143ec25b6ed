# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side filters of the fabric acceptance (documented in rdma_validate*.yml): the thin layer between the
hosts' registered results and the pure logic in plugin_utils/_validate.py."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.plugin_utils._hostvars import plain as _plain
from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _validate


def _var(hostvars, host, name):
    try:
        return _plain(hostvars[host].get(name))
    except KeyError:
        return None


def _ok(registered):
    """The registered result, or None when the host was unreachable, failed, or skipped the task."""
    if not isinstance(registered, Mapping) or registered.get("unreachable") or registered.get("failed") \
            or registered.get("skipped") and "jobs" not in registered and "ports" not in registered:
        return None
    return registered


def rdma_validate_rails(facts, configured=None):
    """The rails of one node: ``configured`` (inventory) when given, else every non-VF RDMA device, port 1."""
    try:
        return _validate.parse_rails(configured) if configured else _validate.default_rails(_plain(facts))
    except _validate.ValidateInputError as exc:
        raise AnsibleFilterError("rdma_validate_rails: %s" % exc) from exc


def rdma_validate_probe_devices(rails, gid_index=None):
    """The ``devices`` of rdma_perftest's probe: each rail's device and port, with the node's fixed GID index."""
    return [{"device": r["device"], "port": r["port"], "gid_index": gid_index} for r in _plain(rails) or []]


def rdma_validate_pairs(hosts, pairs=None):
    """``[[client, server]]``: ``pairs`` checked against the hosts, or a ring of the hosts."""
    try:
        hosts = list(hosts)
        return [list(p) for p in (_validate.explicit_pairs(hosts, _plain(pairs)) if pairs else _validate.ring_pairs(hosts))]
    except _validate.ValidateInputError as exc:
        raise AnsibleFilterError("rdma_validate_pairs: %s" % exc) from exc


def _probe_of(probe, facts):
    """A host's probe as _validate reads it: None when the host was unreachable - its facts or its probe
    registered as unreachable, or the probe skipped (it is skipped exactly when the facts were unreachable) -
    ``{"failed": True, "msg"}`` when the probe failed, else the probe result.  When rdma_facts failed on the
    node (the role registers it with ``failed_when: false``: a result without facts), ``facts_failed`` and
    ``facts_msg`` are added: its jobs are blocked as ``no_facts``, its pod row stays what the probe saw."""
    if isinstance(facts, Mapping) and facts.get("unreachable"):
        return None
    if not isinstance(probe, Mapping) or probe.get("unreachable") or \
            (probe.get("skipped") and "ports" not in probe):
        return None
    out = {"failed": True, "msg": probe.get("msg")} if probe.get("failed") else probe
    if isinstance(facts, Mapping) and not facts.get("skipped") and \
            not isinstance((facts.get("ansible_facts") or {}).get("rdma"), Mapping):
        out = dict(out, facts_failed=True, facts_msg=facts.get("msg") or "no facts returned")
    return out


def rdma_validate_plan(pairs, hostvars, base_port=18515, rdma_cm=False, rails_var="rdma_validate__rails",
                       probe_var="rdma_validate__probe", facts_var="rdma_validate__facts", gpu=True):
    """The jobs of every pair x rail, from each host's rails and probe result; with ``gpu``, a GPU-memory run too
    for pairs of nodes with GPUs (from each node's rdma_facts: gpus, gpu_nic_affinity, drivers.gpudirect)."""
    hosts = sorted(set(h for p in pairs for h in p))
    rails = dict((h, _var(hostvars, h, rails_var) or []) for h in hosts)
    probes = dict((h, _probe_of(_var(hostvars, h, probe_var), _var(hostvars, h, facts_var))) for h in hosts)
    # a host may set its own first port (rdma_validate_base_port in its host_vars)
    ports = dict((h, int(_var(hostvars, h, "rdma_validate_base_port") or base_port)) for h in hosts)
    addresses = dict((h, _var(hostvars, h, "ansible_host")) for h in hosts)
    gpus = {}
    if gpu:
        for host in hosts:
            facts = _var(hostvars, host, facts_var)
            rdma = ((facts or {}).get("ansible_facts") or {}).get("rdma") if isinstance(facts, Mapping) else None
            gpus[host] = _validate.gpu_info(rdma if isinstance(rdma, Mapping) else None)
    return _validate.plan([tuple(p) for p in pairs], rails, probes, ports, addresses, bool(rdma_cm), gpus)


def rdma_validate_nccl_command(facts, configured=None):
    """Step 4's command on one node (``{command, gpus, skip}``): ``configured``, or all_reduce_perf over the node's
    GPUs; skipped below two GPUs (one rank opens no transport)."""
    return _validate.nccl_command(_plain(configured), _plain(facts))


def rdma_validate_nccl_env(probe, base=None, roce=None):
    """Step 4's environment on one node: ``base`` (rdma_validate_nccl_env) plus NCCL_IB_TC (DSCP x 4), NCCL_IB_SL
    (priority) and NCCL_IB_GID_INDEX (the probed RoCE v2 index) when its rails are RoCE (``roce``: the roce_qos
    desired state, ``{dscp, priority}``)."""
    return _validate.nccl_env(_plain(base), _plain(probe), _plain(roce))


def rdma_validate_server_lifetime(the_plan, timeout, start_timeout):
    """Seconds a server lives (GNU timeout): long enough for every client job of the plan to run in turn."""
    return _validate.server_lifetime(_plain(the_plan), timeout, start_timeout)


def _by_id(registered):
    registered = _ok(registered)
    return dict((j["id"], j) for j in (registered or {}).get("jobs") or [])


def rdma_validate_report(the_plan, hosts, hostvars, settings=None, generated=None, prefix="rdma_validate__"):
    """The report (``summary``, ``pairs``, ``nodes``) from the plan and each host's registered results, with each
    job's rails' counter readings around its wave (``counters`` in ``settings`` false: not read, not judged)."""
    settings = dict(_plain(settings) or {})
    the_plan = _plain(the_plan)
    servers, stops, clients, readings = {}, {}, {}, {}
    for host in hosts:
        # the rails' hw_counters before and after each wave (roles/rdma_validate/tasks/clients.yml)
        readings[host] = _validate.counter_readings(_var(hostvars, host, prefix + "counters"))
        servers.update(_by_id(_var(hostvars, host, prefix + "server")))
        stops.update(_by_id(_var(hostvars, host, prefix + "stop")))
        # the client results of every wave (roles/rdma_validate/tasks/clients.yml)
        clients.update((j["id"], j) for j in _var(hostvars, host, prefix + "clients") or [] if isinstance(j, Mapping))
    rows = []
    for job in the_plan["jobs"]:
        server = dict(servers.get(job["id"]) or {})
        if job["id"] in stops:
            server["stop"] = stops[job["id"]]
        counters = _validate.job_counters(job, readings, the_plan["jobs"]) if settings.get("counters", True) else None
        rows.append(_validate.judge(job, server, clients.get(job["id"]), counters, settings))
    nodes = []
    for host in hosts:
        probe = _probe_of(_var(hostvars, host, prefix + "probe"), _var(hostvars, host, prefix + "facts"))
        nccl = _var(hostvars, host, prefix + "nccl")
        nccl = (nccl or {}).get("nccl") if isinstance(nccl, Mapping) and "nccl" in nccl else \
            ({"msg": (nccl or {}).get("msg")} if isinstance(nccl, Mapping) else None)
        nccl_plan = _var(hostvars, host, prefix + "nccl_plan")
        if isinstance(nccl_plan, Mapping) and nccl_plan.get("skip"):
            nccl = {"status": "skipped", "reason": nccl_plan["skip"]}
        gpus = nccl_plan.get("gpus") if isinstance(nccl_plan, Mapping) else None
        nodes.extend(_validate.node_rows(host, probe, nccl, bool(settings.get("nccl")), gpus, settings))
    return _validate.report(rows, nodes, settings, generated)


def rdma_validate_markdown(report):
    return _validate.markdown(_plain(report))


def rdma_validate_junit(report):
    return _validate.junit(_plain(report))


def rdma_validate_summary(report, limit=20):
    return _validate.short_summary(_plain(report), int(limit))


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node fabric acceptance filters."""

    def filters(self):
        return {
            "rdma_validate_rails": rdma_validate_rails,
            "rdma_validate_pairs": rdma_validate_pairs,
            "rdma_validate_probe_devices": rdma_validate_probe_devices,
            "rdma_validate_plan": rdma_validate_plan,
            "rdma_validate_server_lifetime": rdma_validate_server_lifetime,
            "rdma_validate_nccl_command": rdma_validate_nccl_command,
            "rdma_validate_nccl_env": rdma_validate_nccl_env,
            "rdma_validate_report": rdma_validate_report,
            "rdma_validate_markdown": rdma_validate_markdown,
            "rdma_validate_junit": rdma_validate_junit,
            "rdma_validate_summary": rdma_validate_summary,
        }
