# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``qos`` layer's planner, pure: desired + observed -> the actions, the boot script and unit, the problems.

The module applies exactly these actions (check mode lists them), and the audit runs the same function on the facts:
a plan with work is drift, its actions are the evidence.

Desired state (:func:`desired_of` builds it from the role's variables): ``priority`` (the lossless RDMA priority),
``dscp`` (RoCE data; the ToS is ``dscp << 2``), ``cnp_dscp`` / ``cnp_priority`` (congestion notifications),
``ecn`` (enable DCQCN on the priority), ``tool`` (auto, mlnx_qos, dcb), ``interfaces`` (empty: every RoCE netdev),
``boot_unit``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.qos import tools

HEADER = "# Managed by rdma.k8s_node.roce_qos: change the role's variables, not this file.\n"
DEFAULTS = {"priority": 3, "dscp": 26, "cnp_dscp": 48, "cnp_priority": 6, "ecn": True, "tool": "auto",
            "interfaces": [], "boot_unit": True}
#: the action kinds, in the order they are applied on a port
PORT_ACTIONS = ("set_trust", "set_dscp2prio", "set_pfc", "set_ecn", "set_cnp", "set_roce_tos", "set_traffic_class")


def tos_of(dscp):
    """The IP ToS byte of a DSCP value (ECN bits 0): what RDMA-CM, the traffic class and NCCL_IB_TC take."""
    return int(dscp) << 2


def desired_of(variables):
    """The planner's desired state from the role's variables (``roce_qos_*``), or None when not managed
    (``roce_qos_manage`` is opt-in)."""
    variables = variables or {}
    if not variables.get("roce_qos_manage", False):
        return None
    desired = dict(DEFAULTS)
    for key in DEFAULTS:
        value = variables.get("roce_qos_" + key)
        if value is not None:
            desired[key] = value
    return desired


def entries_of(desired):
    """The DSCP -> priority entries a port needs: RoCE data and CNPs (one entry when they share a DSCP)."""
    entries = [(int(desired["dscp"]), int(desired["priority"]))]
    if int(desired["cnp_dscp"]) != int(desired["dscp"]):
        entries.append((int(desired["cnp_dscp"]), int(desired["cnp_priority"])))
    return entries


def _paths(ifname, item):
    ecn = "/sys/class/net/%s/ecn" % ifname
    return {"ecn": ecn, "cma_group": "/sys/kernel/config/rdma_cm/%s" % item["rdma_device"],
            "tos": "/sys/kernel/config/rdma_cm/%s/ports/%d/default_roce_tos" % (item["rdma_device"], item["port"]),
            "tclass": "/sys/class/infiniband/%s/tc/%d/traffic_class" % (item["rdma_device"], item["port"])}


def port_actions(desired, ifname, item, tool):
    """The actions of one port (``item`` as the observer read it), in apply order."""
    actions = []
    prio, tos, entries = int(desired["priority"]), tos_of(desired["dscp"]), entries_of(desired)
    paths = _paths(ifname, item)
    mapping = item.get("dscp2prio") or {}
    if item.get("trust") != "dscp":
        actions.append({"action": "set_trust", "target": ifname, "before": item.get("trust"), "after": "dscp",
                        "argv": tools.trust_argv(tool["name"], tool["path"], ifname, entries)})
        wrong = [(d, p) for d, p in entries if tools.default_prio(d) != p] if tool["name"] == "mlnx_qos" else []
        before = dict((str(d), tools.default_prio(d)) for d, dummy in wrong)
    else:
        wrong = [(d, p) for d, p in entries if mapping.get(str(d), tools.default_prio(d)) != p]
        before = dict((str(d), mapping.get(str(d), tools.default_prio(d))) for d, dummy in wrong)
    if wrong:
        actions.append({"action": "set_dscp2prio", "target": ifname, "before": before,
                        "after": dict((str(d), p) for d, p in wrong),
                        "argv": tools.dscp2prio_argv(tool["name"], tool["path"], ifname, wrong)})
    want_pfc = tools.pfc_list(prio)
    if item.get("pfc") != want_pfc:
        actions.append({"action": "set_pfc", "target": ifname, "before": item.get("pfc"), "after": want_pfc,
                        "argv": tools.pfc_argv(tool["name"], tool["path"], ifname, want_pfc)})
    ecn = item.get("ecn") or {}
    if desired.get("ecn", True):
        for proto in ("roce_np", "roce_rp"):
            values = ecn.get(proto)
            if values is not None and values[prio] != 1:
                actions.append({"action": "set_ecn", "target": ifname, "protocol": proto, "priority": prio,
                                "before": values[prio], "after": 1,
                                "path": "%s/%s/enable/%d" % (paths["ecn"], proto, prio)})
    cnp = item.get("cnp")
    if cnp is not None:
        for attr, want in (("cnp_dscp", int(desired["cnp_dscp"])), ("cnp_802p_prio", int(desired["cnp_priority"]))):
            if cnp.get(attr) != want:
                actions.append({"action": "set_cnp", "target": ifname, "attribute": attr, "before": cnp.get(attr),
                                "after": want, "path": "%s/roce_np/%s" % (paths["ecn"], attr)})
    if item.get("roce_tos") != tos:
        group = bool(item.get("roce_tos_group"))
        actions.append({"action": "set_roce_tos", "target": ifname, "device": item["rdma_device"],
                        "port": item["port"], "before": item.get("roce_tos") if group else 0, "after": tos,
                        "mkdir": None if group else paths["cma_group"], "path": paths["tos"]})
    if item.get("traffic_class") is not None and item["traffic_class"] != tos:
        actions.append({"action": "set_traffic_class", "target": ifname, "device": item["rdma_device"],
                        "port": item["port"], "before": item["traffic_class"], "after": tos, "path": paths["tclass"]})
    return actions


def _shell(word):
    word = str(word)
    if word and all(c.isalnum() or c in "/_.,:=+-" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def render_script(desired, ports, tool):
    """The boot script: every setting of every port again, each file written only when it differs (mlx5 answers
    EPERM to enabling an ECN priority that is already enabled), the tools' settings idempotent."""
    prio, tos, entries = int(desired["priority"]), tos_of(desired["dscp"]), entries_of(desired)
    lines = ["#!/bin/sh\n", HEADER,
             "# Lossless RoCE QoS (priority %d, DSCP %d = ToS %d, CNP DSCP %d on priority %d) of the RoCE netdevs, run by\n"
             % (prio, int(desired["dscp"]), tos, int(desired["cnp_dscp"]), int(desired["cnp_priority"])),
             "# rdma-k8s-node-roce-qos.service after the NICs probe and whenever openibd (re)starts: none of it survives\n",
             "# a reboot or a driver reload.\n",
             "set -u\n", "rc=0\n",
             "put() {\n",
             "    if [ ! -e \"$1\" ]; then echo \"roce-qos: $1 is missing\" >&2; rc=1; return; fi\n",
             "    [ \"$(cat \"$1\")\" = \"$2\" ] || echo \"$3\" > \"$1\" || { echo \"roce-qos: writing $3 to $1 failed\" >&2; rc=1; }\n",
             "}\n",
             "run() {\n",
             "    \"$@\" > /dev/null || { echo \"roce-qos: $* failed\" >&2; rc=1; }\n",
             "}\n",
             "[ -d /sys/kernel/config/rdma_cm ] || modprobe rdma_cm || rc=1\n"]
    for ifname in sorted(ports):
        item = ports[ifname]
        paths = _paths(ifname, item)
        lines.append("\n# %s (%s port %d)\n" % (ifname, item["rdma_device"], item["port"]))
        lines.append("run %s\n" % " ".join(_shell(w) for w in tools.trust_argv(tool["name"], tool["path"], ifname, entries)))
        wrong = [(d, p) for d, p in entries if tools.default_prio(d) != p]
        if wrong and tool["name"] == "mlnx_qos":
            lines.append("run %s\n" % " ".join(_shell(w) for w in tools.dscp2prio_argv(tool["name"], tool["path"], ifname, wrong)))
        pfc = tools.pfc_argv(tool["name"], tool["path"], ifname, tools.pfc_list(prio))
        lines.append("run %s\n" % " ".join(_shell(w) for w in pfc))
        ecn = item.get("ecn") or {}
        if desired.get("ecn", True):
            for proto in ("roce_np", "roce_rp"):
                if ecn.get(proto) is not None:
                    lines.append("put %s/%s/enable/%d 1 1\n" % (paths["ecn"], proto, prio))
        if item.get("cnp") is not None:
            lines.append("put %s/roce_np/cnp_dscp %d %d\n" % (paths["ecn"], int(desired["cnp_dscp"]), int(desired["cnp_dscp"])))
            lines.append("put %s/roce_np/cnp_802p_prio %d %d\n" % (paths["ecn"], int(desired["cnp_priority"]),
                                                                   int(desired["cnp_priority"])))
        lines.append("[ -d %s ] || mkdir %s || rc=1\n" % (paths["cma_group"], paths["cma_group"]))
        lines.append("put %s %d %d\n" % (paths["tos"], tos, tos))
        if item.get("traffic_class") is not None:
            lines.append("put %s 'Global tclass=%d' %d\n" % (paths["tclass"], tos, tos))
    lines.append("exit $rc\n")
    return "".join(lines)


def render_unit(script, ports):
    """The boot unit: after the netdevs exist (their device units), after openibd and configfs, before the kubelet;
    pulled in by openibd and restarted with it (PartOf), so a restart of the OFED stack applies everything again."""
    devices = " ".join("sys-subsystem-net-devices-%s.device" % name for name in sorted(ports))
    return "".join([HEADER,
                    "[Unit]\n",
                    "Description=rdma.k8s_node: lossless RoCE QoS (trust DSCP, PFC, ECN, RoCE ToS) of the RoCE netdevs\n",
                    "Wants=sys-kernel-config.mount %s\n" % devices,
                    "After=openibd.service rdma-hw.target sys-kernel-config.mount %s\n" % devices,
                    "PartOf=openibd.service\n",
                    "Before=kubelet.service\n",
                    "\n[Service]\n",
                    "Type=oneshot\n",
                    "RemainAfterExit=yes\n",
                    "ExecStart=/bin/sh %s\n" % script,
                    "\n[Install]\n",
                    "WantedBy=multi-user.target openibd.service\n"])


def plan(desired, observed):
    """``{"actions", "script", "unit", "problems", "notes", "skip", "tool"}``.

    ``observed`` is :func:`observe.observe`'s result.  ``skip`` says why nothing applies (no RoCE port).  Problems
    (a port the tool could not read, configfs without rdma_cm, the tool missing, an unknown interface) make the
    module refuse before any change.
    """
    observed = observed or {}
    ports = observed.get("ports") or {}
    tool = tools.choose(observed.get("tool"), desired.get("tool", "auto"))
    problems = list(observed.get("problems") or [])
    notes, actions, groups = [], [], set()
    for name in desired.get("interfaces") or []:
        if name not in ports:
            problems.append("interfaces: %s is not a RoCE netdev of this node (RoCE netdevs: %s)"
                            % (name, ", ".join(sorted(ports)) or "none"))
    wanted = dict((k, v) for k, v in ports.items() if not desired.get("interfaces") or k in desired["interfaces"])
    if not wanted:
        ib = observed.get("ib_ports") or []
        skip = ("no RoCE port on this node: every RDMA port is InfiniBand (%s); lossless Ethernet QoS does not apply"
                % ", ".join(ib)) if ib else "no RDMA NIC port on this node"
        return {"actions": [], "script": None, "unit": None, "problems": problems, "notes": notes, "skip": skip,
                "tool": tool}
    if not tool["path"]:
        problems.append("%s is not installed on the node (%s)" % (
            tool["name"], "DOCA-OFED's mlnx-tools package" if tool["name"] == "mlnx_qos" else "iproute2 5.12 or later"))
    configfs = observed.get("configfs") or {}
    if not configfs.get("exists"):
        problems.append("%s does not exist: the RDMA-CM default ToS needs configfs mounted at /sys/kernel/config and "
                        "the rdma_cm module loaded (modprobe rdma_cm)" % (configfs.get("path") or "/sys/kernel/config/rdma_cm"))
    for ifname in sorted(wanted):
        item = wanted[ifname]
        for key in ("error", "sysfs_error"):
            if item.get(key):
                problems.append("%s: %s" % (ifname, item[key]))
        if item.get("error") or item.get("sysfs_error"):
            continue
        ecn = item.get("ecn") or {}
        if desired.get("ecn", True) and ecn.get("roce_np") is None:
            notes.append("%s: no per-priority ECN switch (inbox mlx5 has no ecn/ sysfs): DCQCN runs on the priorities "
                         "of the firmware's ROCE_CC_PRIO_MASK_P%d (nic_firmware; 255 = all, the default)" % (ifname, item["port"]))
        if item.get("traffic_class") is None:
            notes.append("%s: no %s/tc (inbox mlx5_ib): RDMA-CM's default ToS marks rdma_cm connections; verbs "
                         "applications set their own traffic class (NCCL_IB_TC)" % (ifname, item["rdma_device"]))
        if tool["path"] and configfs.get("exists"):
            for step in port_actions(desired, ifname, item, tool):
                # one rdma_cm/<device> group for all the device's ports: made by the first port's step only
                if step.get("mkdir") in groups:
                    step["mkdir"] = None
                elif step.get("mkdir"):
                    groups.add(step["mkdir"])
                actions.append(step)
    script = unit = None
    if desired.get("boot_unit", True) and tool["path"]:
        script = render_script(desired, wanted, tool)
        unit = render_unit((observed.get("script") or {}).get("path"), wanted)
        for kind, text in (("write_script", script), ("write_unit", unit)):
            current = observed.get("script" if kind == "write_script" else "unit") or {}
            if current.get("text") != text:
                actions.append({"action": kind, "target": current.get("path")})
    return {"actions": actions, "script": script, "unit": unit, "problems": problems, "notes": notes, "skip": None,
            "tool": tool}
