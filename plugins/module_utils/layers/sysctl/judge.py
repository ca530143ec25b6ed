# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` layer's audit judgement: the module's planner run on the facts (``layers.sysctl``).

* ``sysctl.arp`` per interface (``all``, ``default``, each RDMA netdev or ``rdma_sysctl_interfaces``): the desired
  ARP and reverse-path values against the live ones and the ones systemd-sysctl applies at boot; ``unknown`` when the
  interface's values cannot be read.
* ``sysctl.dropin`` (the role's file): ``sysctl_dropin``'s plan for the role's settings, as the role calls the
  module (``rdma_sysctl_file``, ``rdma_sysctl_live``): ``ok`` when it has nothing to do, else ``drift`` with the
  plan's actions as the evidence (``detail``: ``planned: [...]``).
* ``sysctl.override`` (fail at boot, ok with a detail for ``sysctl --system`` only): the plan's overrides, files read
  after the role's that set a key it sets to another value, which provisioning cannot fix (another tool's file).
* ``sysctl.host_arp_ignore`` (fail, even without a desired state): ``all.arp_ignore`` is 2.

Facts gathered before the layer was a room (no ``layers.sysctl``) are judged through :func:`section_of`, from the
``sysctl``, ``persisted.sysctl``, ``persisted.sysctl_files`` and ``devices`` keys; without our file's content they
get no ``sysctl.dropin`` check.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from functools import lru_cache

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError
# _frozen is also what test__audit_overrides compares
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _frozen, _thawed, desired_bool
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl.observe import CONF_FILE, needed_all
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl.settings import rdma_netdevs, role_settings

REMEDY = "run the rdma_sysctl role"


def section_of(facts):
    """The ``layers.sysctl`` section from facts without it (an older collection, or its observer failed): the live
    values, the boot table and the sysctl.d files ``rdma_facts`` returns at its top level and in ``persisted``."""
    persisted = facts.get("persisted") or {}
    return {"netdevs": rdma_netdevs(facts), "live": facts.get("sysctl") or {}, "files": persisted.get("sysctl_files"),
            "ours": None, "persisted": persisted.get("sysctl") or {}, "problems": []}


def _validated(interfaces, host, per_if, netdevs):
    settings = rules.validate(role_settings(interfaces, host, per_if, netdevs))
    return settings, rules.render(settings)


@lru_cache(maxsize=64)
def _validated_cached(key):
    """:func:`_validated` for one frozen desired state: the same for every host that shares it (a fleet has a
    handful), so it is computed once per state."""
    interfaces, host, per_if = (_thawed(part) for part in key[:3])
    return _validated(interfaces, host, per_if, key[3])


def settings_of(desired, netdevs):
    """``(validated settings, our file's text)`` the role gives the module for this host's desired state and RDMA
    netdevs (InputError for values the role refuses)."""
    interfaces = list(desired.get("rdma_sysctl_interfaces") or [])
    host, per_if = desired.get("rdma_sysctl_host") or {}, desired.get("rdma_sysctl_per_interface") or {}
    try:
        key = (_frozen(interfaces), _frozen(host), _frozen(per_if), () if interfaces else tuple(netdevs))
    except TypeError:
        return _validated(interfaces, host, per_if, netdevs)
    return _validated_cached(key)


def _raw(value):
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _number(value):
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def observed_of(section, path, settings):
    """:func:`observe.observe`'s shape from the facts section, for the planner; None when a key the settings hold
    was not observed (an interface that is not an RDMA netdev)."""
    values = section.get("live") or {}
    live = {}
    for key in settings:
        parts = rules.components(key)
        scope = values.get(parts[3]) if len(parts) == 5 and parts[:3] == ["net", "ipv4", "conf"] else None
        if scope is None or parts[4] not in scope:
            return None
        live[key] = _raw(scope[parts[4]])
    present = dict((item["path"], item) for item in (section.get("files") or {}).get("files") or [])
    ours = (section.get("ours") or {}).get(path)
    if ours is not None:
        state = FileState(path, True, ours.get("content"), ours.get("mode"), ours.get("uid"), ours.get("gid"),
                          ours.get("link"))
    elif path in present:
        state = FileState(path, True, None, link=present[path].get("link"))  # not ours: other content
    else:
        state = FileState(path)
    return {"live": live, "all": dict((p, _raw((values.get("all") or {}).get(p))) for p in needed_all(settings)),
            "file": state, "files": section["files"]}


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    checks = []
    live_all = section.get("live") or {}
    if desired is not None:
        netdevs = section.get("netdevs") or []
        checks.extend(_arp_checks(section, desired, netdevs))
        if section.get("files") is not None:  # facts of an older collection version have no sysctl.d files
            checks.extend(_plan_checks(section, desired, netdevs))
    arp_all = _number((live_all.get("all") or {}).get("arp_ignore"))
    if arp_all == 2:
        checks.append({"id": "sysctl.host_arp_ignore", "status": "fail", "desired": "all.arp_ignore < 2",
                       "live": arp_all,
                       "remedy": "set net.ipv4.conf.all.arp_ignore=1 (rdma_sysctl_host) and arp_ignore=2 per RDMA netdev",
                       "detail": "host-wide arp_ignore=2 breaks the /32 routes of pod interfaces"})
    return checks


def _arp_checks(section, desired, netdevs):
    """``sysctl.arp``: per interface, the desired values against the live ones and the boot's."""
    live_all = section.get("live") or {}
    host = desired.get("rdma_sysctl_host") or {}
    per_if = desired.get("rdma_sysctl_per_interface") or {}
    interfaces = list(desired.get("rdma_sysctl_interfaces") or []) or netdevs
    targets = [("all", host), ("default", host)] + [(name, per_if) for name in interfaces]
    if section.get("ours") is not None and section.get("files") is not None:
        persisted_all = rules.boot_table(rules.layers_of(section["files"])[0], interfaces)
    else:
        persisted_all = section.get("persisted") or {}
    checks = []
    for name, wanted in targets:
        if not wanted:
            continue
        wanted = dict((k, int(v)) for k, v in wanted.items())
        live = live_all.get(name)
        persisted = dict((k, (persisted_all.get(name) or {}).get(k, {}).get("value")) for k in wanted)
        if live is not None:
            live = dict((k, _number(v)) for k, v in live.items())
        if live is None or any(live.get(k) is None for k in wanted):
            checks.append({"id": "sysctl.arp", "status": "unknown", "subject": name, "desired": wanted, "live": live,
                           "persisted": persisted,
                           "detail": "net.ipv4.conf.%s could not be read (interface absent?)" % name})
            continue
        live = dict((k, live.get(k)) for k in wanted)
        same = live == wanted and persisted == wanted
        checks.append({"id": "sysctl.arp", "status": "ok" if same else "drift", "subject": name, "desired": wanted,
                       "live": live, "persisted": persisted, "remedy": None if same else REMEDY})
    return checks


def _plan_checks(section, desired, netdevs):
    """``sysctl.dropin`` (the module's plan; facts of a room only) and ``sysctl.override`` (its overrides)."""
    path = desired.get("rdma_sysctl_file") or CONF_FILE
    room = section.get("ours") is not None
    checks = []
    try:
        settings, content = settings_of(desired, netdevs)
        observed = observed_of(section, path, settings) if room else None
        if observed is not None:
            planned = _plan.plan(settings, observed, path, live=desired_bool(desired, "rdma_sysctl_live"))
            work, found = planned["actions"], planned["overrides"]
            checks.append({"id": "sysctl.dropin", "status": "drift" if work else "ok", "subject": path,
                           "desired": "%d settings" % len(settings), "remedy": REMEDY if work else None,
                           "detail": "planned: %s" % work if work else None})
        else:
            if room:
                checks.append({"id": "sysctl.dropin", "status": "unknown", "subject": path,
                               "detail": "the live values of an interface the settings name were not gathered (not an "
                                         "RDMA netdev?)"})
            # older facts: our file's content is unknown, the files that beat it are not
            found = _plan.find_overrides(section["files"], path, content, settings)
    except RdmaNodeError as exc:
        if room and not checks:
            checks.append({"id": "sysctl.dropin", "status": "unknown", "subject": path, "detail": exc.msg})
        return checks + [{"id": "sysctl.override", "status": "unknown", "detail": exc.msg}]
    for item in found:
        boot = item["reader"] == rules.BOOT_READER
        checks.append({"id": "sysctl.override", "status": "fail" if boot else "ok", "subject": item["key"],
                       "desired": item["want"], "live": item["value"],
                       "persisted": "%s:%s" % (item["file"], item["line"]),
                       "remedy": "remove %s from %s (another tool's file), or set rdma_sysctl_file to a name that sorts "
                                 "after it" % (item["key"], item["file"]),
                       "detail": rules.describe_override(item)})
    return checks
