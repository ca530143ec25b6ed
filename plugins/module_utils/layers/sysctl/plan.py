# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` layer's planner, pure: validated settings + observed -> the file write, the live writes, the files
that beat ours.

The module applies exactly these actions (check mode lists them), and the audit runs the same function on the facts
(judge.py): a plan with work is drift, its actions are the evidence.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from functools import lru_cache

from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules

CONF_MODE = 0o644


def effective_after(settings, all_live):
    """max(all, interface) for each interface whose max-rule keys we set, with our values applied; ``all_live`` has
    the live values of ``all`` that the settings do not set (:func:`observe.needed_all`)."""
    values = {}
    for key, value in settings.items():
        parts = rules.components(key)
        if len(parts) == 5 and parts[:3] == ["net", "ipv4", "conf"] and parts[4] in rules.MAX_RULE:
            values.setdefault(parts[3], {})[parts[4]] = int(value)
    out = {}
    for iface in sorted(i for i in values if i not in ("all", "default")):
        merged = {"all": dict(values.get("all") or {}), iface: values[iface]}
        for param in rules.MAX_RULE:
            if param not in merged["all"]:
                live = all_live.get(param)
                if live is not None and live.lstrip("-").isdigit():
                    merged["all"][param] = int(live)
        out[iface] = dict((p, rules.effective(merged, p, iface)) for p in rules.MAX_RULE if p in values[iface])
    return out


@lru_cache(maxsize=64)
def _entries(content):
    """Our file's entries as systemd-sysctl reads them: one text per desired state, parsed once for every host of a
    fleet that shares it (the audit)."""
    return tuple(rules.parse_file(content))


def find_overrides(files, path, content, settings):
    """:func:`rules.overrides` on the sysctl.d files (:func:`observe.read_files`) with ours as ``content``; an
    override from a symbolic link says its target (``link``)."""
    layers, conf = rules.layers_of(files)
    links = dict((f["path"], f["link"]) for f in files["files"] + ([files["conf"]] if files["conf"] else []) if f["link"])
    found = rules.overrides(rules.with_ours(layers, path, list(_entries(content))), path, settings, conf)
    for item in found:
        if item["file"] in links:
            item["link"] = links[item["file"]]
    return found


def plan(settings, observed, path, live=True):
    """The plan for validated ``settings`` in our file at ``path``.

    ``observed`` is :func:`observe.observe`'s result (the judge builds the same from the facts).  ``live``: set the
    running kernel's values too.

    Returns ``{"actions", "file" (the FilePlan), "to_set" ([(key, value)] for ``sysctl -w``), "missing" (keys the
    running kernel does not have), "overrides" (:func:`find_overrides`), "boot_overrides" (those systemd-sysctl
    applies at boot), "live" (the live values read), "effective" (:func:`effective_after`)}``; ``actions``: the
    file's create/update, then one ``set_live`` per key that differs, in the settings' order.
    """
    file_plan = plan_file(observed["file"], rules.render(settings), CONF_MODE)
    found = find_overrides(observed["files"], path, file_plan.content, settings)
    current = observed["live"]
    missing = [key for key, value in current.items() if value is None]
    actions, to_set = [], []
    if file_plan.changed:
        actions.append(file_plan.action())
    if live:
        for key, value in settings.items():
            if key not in missing and rules.differs(current[key], value):
                to_set.append((key, value))
                actions.append(action("set_live", key, before=current[key], after=value.replace("\t", " ")))
    return {"actions": actions, "file": file_plan, "to_set": to_set, "missing": missing, "overrides": found,
            "boot_overrides": [item for item in found if item["reader"] == rules.BOOT_READER],
            "live": current, "effective": effective_after(settings, observed["all"])}
