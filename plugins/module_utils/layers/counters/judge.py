# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``counters`` layer's audit judgement, pure: :mod:`.observe`'s values against thresholds (docs/counters.md).

Nothing here is provisioned, so every finding is ``fail`` (a port that lost packets, gave up connections or ignores
congestion notifications) or ``unknown`` (a value that cannot be read or parsed: never taken as good).  The checks
run in facts-only mode too (``desired`` None): the thresholds take their defaults.

* ``counters.totals[<dev>/<port>]``: each counter's value since the RDMA device registered at most
  ``rdma_audit_hw_counter_thresholds`` (defaults :data:`.catalogue.DEFAULT_TOTALS`);
* ``counters.rates[<dev>/<port>]``, when rdma_facts read the counters twice (``counters_interval``): each counter's
  growth per second between the two readings at most ``rdma_audit_hw_counter_rates``; the counters that grew are
  shown, judged or not (congestion notifications have no limit by default);
* ``counters.options``: an option of this layer that is not what its argument spec allows.

:func:`growth` (the counters that grew between two readings of one port) is validate's too.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import check as _check
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters import catalogue as cat

REMEDY_RETRANSMISSION = (
    "find where packets are lost on this port's path: physical errors (mlxlink -d <dev> -c, health.counters), one MTU "
    "along the path (the mtu checks), on RoCE a lossless RDMA priority (PFC, ECN/DCQCN) from NIC to switch, the NIC's "
    "interrupts on busy CPUs; after the fix watch the rate (rdma_audit_hw_counter_interval)")
REMEDY_ERRORS = (
    "connections gave up after their retries, or packets arrived corrupt: the retransmission counters and the peer "
    "tell why (a peer process that died also exhausts the retries); rx_icrc_encapsulated points at the cable or "
    "transceiver")
REMEDY_CNP_IGNORED = (
    "congestion notifications reach this NIC but it does not act on them: enable DCQCN's reaction point for the RDMA "
    "priority (/sys/class/net/<netdev>/ecn/roce_rp/enable/<prio>) on every RoCE NIC")
REMEDY_OPTIONS = "fix this host's audit option in the inventory (roles/rdma_audit/meta/argument_specs.yml)"


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def options(desired):
    """``(settings, problems)``: ``{"totals": {name: limit}, "rates": {name: limit}}`` (None = not checked) from
    ``desired`` (None: facts-only, the defaults); a bad value is a problem and that option keeps its defaults."""
    desired = desired or {}
    problems = []
    settings = {}
    for key, var, defaults, kind in (
            ("totals", "rdma_audit_hw_counter_thresholds", cat.DEFAULT_TOTALS, "integers >= 0"),
            ("rates", "rdma_audit_hw_counter_rates", cat.DEFAULT_RATES, "numbers >= 0 (per second)")):
        settings[key] = dict(defaults)
        value = desired.get(var)
        if value is None:
            continue
        good = isinstance(value, dict) and all(
            name in cat.KNOWN and (limit is None or (_number(limit) and limit >= 0 and (
                key == "rates" or isinstance(limit, int)))) for name, limit in value.items())
        if good:
            settings[key].update(value)
        else:
            problems.append("%s must map hw_counters (%s) to %s or null, got %r" % (var, ", ".join(cat.KNOWN), kind, value))
    return settings, problems


def _remedy(names):
    parts = []
    if any(cat.group_of(name) == "retransmission" for name in names):
        parts.append(REMEDY_RETRANSMISSION)
    if any(cat.group_of(name) == "errors" for name in names):
        parts.append(REMEDY_ERRORS)
    if "rp_cnp_ignored" in names:
        parts.append(REMEDY_CNP_IGNORED)
    return "; ".join(parts) or REMEDY_RETRANSMISSION


def growth(before, after):
    """The known counters that grew from reading ``before`` to ``after`` (``{name: value}`` each, None: unread):
    ``{"deltas": {name: increase > 0}, "reset": [names that went back], "unread": [names]}``.

    A counter that went back started again (the RDMA device registered again: driver reload, reset; or a 32-bit Q
    counter wrapped): its increase is counted from 0, i.e. its new value, and it is named in ``reset``.
    """
    out = {"deltas": {}, "reset": [], "unread": []}
    before, after = before or {}, after or {}
    for name in cat.KNOWN:
        if name not in after and name not in before:
            continue
        old, new = before.get(name), after.get(name)
        if not isinstance(old, int) or not isinstance(new, int) or isinstance(old, bool) or isinstance(new, bool):
            out["unread"].append(name)
            continue
        if new < old:
            out["reset"].append(name)
            increase = new
        else:
            increase = new - old
        if increase:
            out["deltas"][name] = increase
    return out


def _totals(port, subject, limits):
    counters = port["counters"]
    wanted = dict((name, limit) for name, limit in limits.items() if limit is not None and name in counters)
    if not wanted:
        return None
    live, over, unreadable = {}, [], []
    for name in sorted(wanted):
        value = counters.get(name)
        live[name] = value
        if not isinstance(value, int) or isinstance(value, bool):
            unreadable.append(name)
        elif value > wanted[name]:
            over.append(name)
    desired = dict((name, "<= %d" % limit) for name, limit in sorted(wanted.items()))
    if over:
        return _check("counters.totals", "fail", subject, desired, live, remedy=_remedy(over), detail="%s (since the RDMA device "
                      "registered: driver load or reset)" % "; ".join("%s %d > %d" % (n, live[n], wanted[n]) for n in over))
    if unreadable:
        return _check("counters.totals", "unknown", subject, desired, live,
                      detail="not readable as a number: %s%s" % (", ".join(unreadable), (
                          " (%s)" % "; ".join(port.get("problems"))) if port.get("problems") else ""))
    return _check("counters.totals", "ok", subject, desired, live)


def _per_second(value):
    return "%g/s" % round(value, 3)


def _rates(port, subject, limits, interval):
    found = growth(port.get("previous"), port["counters"])
    wanted = dict((name, limit) for name, limit in limits.items() if limit is not None and name in port["counters"])
    desired = dict((name, "<= %s" % _per_second(limit)) for name, limit in sorted(wanted.items()))
    live = dict((name, {"delta": delta, "per_second": round(delta / interval, 3)})
                for name, delta in sorted(found["deltas"].items()))
    over = [name for name in sorted(found["deltas"]) if name in wanted and found["deltas"][name] / interval > wanted[name]]
    notes = []
    if found["reset"]:
        notes.append("went back between the readings (the device registered again, or a 32-bit counter wrapped), "
                     "counted from 0: %s" % ", ".join(found["reset"]))
    grew = [name for name in sorted(found["deltas"]) if name not in over]
    if grew:
        notes.append("grew within their limits or unjudged: %s" % ", ".join(
            "%s +%d" % (name, found["deltas"][name]) for name in grew))
    if over:
        text = "; ".join("%s +%d in %g s (%s > %s)" % (name, found["deltas"][name], interval, _per_second(
            found["deltas"][name] / interval), _per_second(wanted[name])) for name in over)
        return _check("counters.rates", "fail", subject, desired, live, remedy=_remedy(over), detail="; ".join([text] + notes))
    unread = [name for name in found["unread"] if name in wanted]
    if unread:
        return _check("counters.rates", "unknown", subject, desired, live,
                      detail="not readable as a number in both readings: %s" % ", ".join(unread))
    return _check("counters.rates", "ok", subject, desired, live, detail="; ".join(notes) or None)


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, remedy, detail}]``) of the layer; ``desired`` None =
    facts-only (the default thresholds)."""
    settings, problems = options(desired)
    checks = [_check("counters.options", "fail", None, None, None, remedy=REMEDY_OPTIONS, detail=problem) for problem in problems]
    if section is None:
        return checks + [_check("counters.facts", "unknown",
                                detail="rdma_facts gave no layers.counters (an older collection)")]
    interval = section.get("interval")
    for port in section.get("ports") or []:
        if port.get("counters") is None:
            continue  # no hw_counters directory (a driver without port statistics): nothing to judge
        subject = "%s/%s" % (port.get("device"), port.get("port"))
        total = _totals(port, subject, settings["totals"])
        if total:
            checks.append(total)
        if port.get("previous") is not None and _number(interval) and interval > 0:
            checks.append(_rates(port, subject, settings["rates"], interval))
    return checks
