# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sriov`` layer's planners, pure: a module's options + what :func:`observe.collect` read -> the actions
(``sriov_numvfs`` writes, the wait for the VFs, ``ip link set <pf> vf N ...``; GUIDs set, VFs re-bound or bound,
the operator's pool file), the warnings, the diff, what the module reports as ``observed``, and the refusals (typed
errors, in the order the modules raised them before the room).

The modules and the boot-time applier apply exactly these actions (check mode lists them).  Node-side: stdlib only.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, ConflictError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import plan_file
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import action
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid, rules as _sriov

_GUID_KEYS = ("node_guid", "port_guid", "admin_node", "admin_port")
#: the options naming the PF, one of them (both modules)
PF_OPTIONS = ("netdev", "rdma_device", "pci_address")
MUTUALLY_EXCLUSIVE = [PF_OPTIONS]
REQUIRED_ONE_OF = [PF_OPTIONS]
#: ib_vf_guids' required_if
GUIDS_REQUIRED_IF = [("scheme", "list", ("guids",))]


def _vf_options(with_index):
    options = dict(
        link_state=dict(type="str", choices=list(_sriov.LINK_STATES)),
        trust=dict(type="bool"),
        spoofchk=dict(type="bool"),
        vlan=dict(type="int"),
        qos=dict(type="int"),
        mac=dict(type="str"),
    )
    if with_index:
        options["index"] = dict(type="int", required=True)
    return options


def vfs_argument_spec():
    """sriov_vfs' argument spec (the module's, and the audit's check of the role's variables)."""
    return dict(
        netdev=dict(type="str"),
        rdma_device=dict(type="str"),
        pci_address=dict(type="str"),
        num_vfs=dict(type="int", required=True),
        allow_vf_reset=dict(type="bool", default=False),
        vf_defaults=dict(type="dict", options=_vf_options(False)),
        vfs=dict(type="list", elements="dict", options=_vf_options(True)),
        firmware_check=dict(type="str", default="auto", choices=["auto", "always", "never"]),
        timeout=dict(type="int", default=120),
        host_root=dict(type="path", default="/"),
    )


def guids_argument_spec():
    """ib_vf_guids' argument spec (the module's, and the audit's check of the role's variables)."""
    return dict(
        netdev=dict(type="str"),
        rdma_device=dict(type="str"),
        pci_address=dict(type="str"),
        scheme=dict(type="str", default="pf_guid", choices=list(_guid.SCHEMES)),
        guid_prefix=dict(type="str", default="02"),
        guids=dict(type="list", elements="str"),
        pool_file=dict(type="path", default=_guid.OPERATOR_POOL_FILE),
        export_pool_file=dict(type="bool"),
        exclude_guids=dict(type="list", elements="str"),
        backup=dict(type="bool", default=False),
        allow_vf_reset=dict(type="bool", default=False),
        timeout=dict(type="int", default=60),
        host_root=dict(type="path", default="/"),
    )


def vf_public(vf, admin=None):
    """A VF as the modules report it (GUIDs spelled, no sysfs path)."""
    out = {"index": vf["index"], "pci_address": vf["pci_address"], "driver": vf["driver"], "netdevs": vf["netdevs"],
           "rdma_device": vf["rdma_device"],
           "node_guid": _guid.format_guid(vf["node_guid"]) if vf["node_guid"] is not None else None,
           "port_guid": _guid.format_guid(vf["port_guid"]) if vf["port_guid"] is not None else None}
    if admin is not None:
        out["admin"] = dict((key, _guid.format_guid(value) if key in _GUID_KEYS and value is not None else value)
                            for key, value in admin.items())
    return out


def pf_public(pf):
    """The PF as the modules report it (no sysfs path)."""
    return dict((k, v) for k, v in pf.items() if k != "path")


# -- sriov_vfs ---------------------------------------------------------------------------------------------------------
def validate_vfs(params):
    """Checks of sriov_vfs' options before any I/O; InputError names the option."""
    want = params["num_vfs"]
    if isinstance(want, bool) or not isinstance(want, int) or want < 0:
        raise InputError("num_vfs must be a whole number >= 0, got %r" % (want,))


def firmware(query, bdf, num_vfs, mode):
    """The firmware verdict of :func:`host.firmware_query`'s answer: ``(read, warnings)`` where ``read`` is
    ``{SRIOV_EN, NUM_OF_VFS}`` or None; InputError/ApplyError when ``firmware_check=always`` cannot ask, and
    ConflictError (with ``reboot_required`` when the value is staged) when the firmware is not ready."""
    if query is None:
        return None, []
    tool, rc, out, err = query["tool"], query["rc"], query["out"], query["err"]
    if tool is None:
        if mode == "always":
            raise InputError("firmware_check=always but neither mstconfig nor mlxconfig is installed")
        return None, []
    if rc != 0:
        if mode == "always":
            raise ApplyError("%s -e -d %s q failed (rc=%s): %s" % (tool, bdf, rc, (err or out).strip()))
        return None, ["%s could not query %s (rc=%s), firmware not checked: %s" % (tool, bdf, rc, (err or out).strip())]
    params = _sriov.parse_mstconfig(out)
    verdict = _sriov.firmware_verdict(params, num_vfs)
    if verdict is not None:
        message, staged = verdict
        raise ConflictError("firmware of %s is not ready for SR-IOV: %s" % (bdf, message),
                            {"firmware": params, "reboot_required": staged})
    return dict((key, value) for key, value in params.items() if key in ("SRIOV_EN", "NUM_OF_VFS")), []


def _diff_text(data):
    lines = ["num_vfs: %s" % data["num_vfs"]]
    for index, attrs in sorted(data["vfs"].items()):
        shown = dict((k, _guid.format_guid(v) if k.endswith("guid") and v is not None else v) for k, v in sorted(attrs.items())
                     if v is not None)
        lines.append("vf %d: %s" % (index, ", ".join("%s=%s" % item for item in sorted(shown.items()))))
    return "\n".join(lines) + "\n"


def plan_vfs(params, observed):
    """sriov_vfs: ``{actions, writes, changes, desired_attrs, admin, warnings, diffs, observed, vfs}``.
    ``writes``: the values for ``sriov_numvfs`` in order; ``changes``: ``[(index, attrs)]`` for ``ip link``."""
    validate_vfs(params)
    pf, mode = observed["pf"], observed["eswitch_mode"]
    if mode == "switchdev":
        raise ConflictError("PF %s is in switchdev eswitch mode; this module manages legacy SR-IOV VFs. Switch it with "
                            "'devlink dev eswitch set pci/%s mode legacy' or leave switchdev PFs to an operator"
                            % (pf["pci_address"], pf["pci_address"]), {"eswitch": mode})
    want, state, used = params["num_vfs"], observed["state"], observed["in_use"]
    desired_attrs = _sriov.desired_vf_attrs(want, params.get("vf_defaults"), params.get("vfs"), pf["link_layer"])
    fw, fw_error, warnings = None, None, []
    try:
        fw, warnings = firmware(observed["firmware"], pf["pci_address"], want, params["firmware_check"])
    except ConflictError as exc:
        fw_error = exc
    try:
        writes = _sriov.plan_numvfs(state["numvfs"], want, state["totalvfs"], params["allow_vf_reset"], used)
    except InputError as exc:
        msg = exc.msg
        if state["totalvfs"] is None:  # say which device the options selected (a bridge, a GPU, a PF without SRIOV_EN)
            msg = "%s %s (PCI %s): %s" % (pf["selected_by"], params.get(pf["selected_by"]), pf["pci_address"], msg)
        if fw_error is None:
            raise InputError(msg, exc.details) from exc
        raise InputError("%s; %s" % (msg, fw_error.msg), fw_error.details) from exc
    if fw_error is not None:
        raise fw_error
    if observed["admin_error"] is not None:
        raise observed["admin_error"]
    admin = observed["admin"]
    public = {"pf": pf_public(pf), "eswitch_mode": mode, "firmware": fw, "num_vfs": state["numvfs"],
              "totalvfs": state["totalvfs"], "in_use": used,
              "vfs": [vf_public(vf, admin.get(vf["index"])) for vf in state["vfs"]]}
    if writes == [0] and used:
        warnings.append("removing all VFs of %s, some of which look in use: %s" % (
            pf["pci_address"], ", ".join("VF %d (%s)" % item for item in sorted(used.items()))))
    after_admin = {} if writes else admin
    changes = _sriov.plan_vf_attrs(desired_attrs, after_admin)
    if changes and not pf["netdev"]:
        raise InputError("VF attributes need the PF's netdev (ip link set <pf> vf N ...), and %s has none" % pf["pci_address"])
    numvfs_path = pf["path"] + "/sriov_numvfs"
    actions = [action("write", numvfs_path, value=str(value)) for value in writes]
    if writes and writes[-1]:
        actions.append(action("wait_for_vfs", pf["pci_address"], count=want, timeout=params["timeout"]))
    actions.extend(action("set_vf", "%s vf %d" % (pf["netdev"], index), **attrs) for index, attrs in changes)
    diffs = []
    if actions:
        before = {"num_vfs": state["numvfs"], "vfs": dict((i, admin.get(i, {})) for i in sorted(admin))}
        after_vfs = dict((i, dict(after_admin.get(i, {}), **desired_attrs[i])) for i in range(want))
        diffs.append({"before": _diff_text(before), "after": _diff_text({"num_vfs": want, "vfs": after_vfs}),
                      "before_header": "%s (sriov)" % pf["pci_address"], "after_header": "%s (sriov)" % pf["pci_address"]})
    return {"actions": actions, "writes": writes, "changes": changes, "desired_attrs": desired_attrs, "admin": admin,
            "numvfs_path": numvfs_path, "warnings": warnings, "diffs": diffs, "observed": public}


# -- ib_vf_guids --------------------------------------------------------------------------------------------------------
def validate_guids(params):
    """Checks of ib_vf_guids' options before any I/O; InputError names the option."""
    pool_file = params["pool_file"]
    if not pool_file.startswith("/") or any(part in (".", "..") for part in pool_file.split("/")) \
            or any(c in pool_file for c in "\0\n\r"):
        raise InputError("pool_file must be an absolute path without . or .. components, got %r" % (pool_file,))


def unresolved_warnings(entries, pool_file):
    """pfGuid entries whose link is not there now: the operator resolves them when it starts, and refuses the whole
    file if the link is still missing then."""
    unresolved = [entry["pf_guid"] for entry in entries if entry.get("unresolved")]
    if unresolved:
        return ["%s names pfGuid %s, the address of no network interface on this node now: sriov-network-operator "
                "refuses the whole file if that link is still missing when it starts" % (pool_file, ", ".join(unresolved))]
    return []


def pool_warnings(other_ib_pfs, existed, text, operator, pool_file, links):
    """What a change of the pool file means for the operator: it reads the file when its daemon starts (host helpers
    created in pkg/host/manager.go), and a pool file that exists makes it take every IB VF's GUID from the file."""
    warnings = []
    entries = _guid.parse_pool(text, pool_file, links) if text is not None else None
    if entries is not None:
        warnings.extend(unresolved_warnings(entries, pool_file))
    if operator["running"]:
        warnings.append("sriov-network-config-daemon runs and reads %s only when it starts: restart its pod (or the "
                        "node) so that it assigns these GUIDs instead of the ones it holds" % pool_file)
    if not existed and entries is not None:
        listed = set(entry.get("pci_address") for entry in entries)
        missing = [pci for pci in other_ib_pfs or () if pci not in listed]
        if missing:
            warnings.append("%s did not exist: once it does, sriov-network-operator takes every InfiniBand VF's GUID "
                            "from it and fails VFs of a PF without an entry (%s); export their GUIDs too (every "
                            "InfiniBand PF in sriov_pfs)" % (pool_file, ", ".join(missing)))
    return warnings


def plan_guids(params, observed):
    """ib_vf_guids: ``{actions, steps, desired, rebind, unbound, pool_plan, export, warnings, diffs, observed,
    guids, operator}``; ``steps``: :func:`guid.plan`'s, ``rebind``: ``{index: action}`` of the VFs re-bound or
    bound (their actions get the netdev names found after the re-bind)."""
    validate_guids(params)
    pf = observed["pf"]
    if pf["link_layer"] != "InfiniBand":
        raise InputError("%s %s is an %s PF: VF node/port GUIDs only exist on InfiniBand (RoCE VFs use MAC addresses)"
                         % (pf["selected_by"], params.get(pf["selected_by"]), pf["link_layer"] or "unknown link layer"))
    if not pf["rdma_device"]:
        raise InputError("PF %s has no RDMA device (is mlx5_ib loaded?)" % pf["pci_address"])
    scheme = params["scheme"]
    prefix = _guid.parse_prefix(params["guid_prefix"])
    explicit = params.get("guids") or []
    if scheme == "list" and not explicit:
        raise InputError("scheme=list needs guids")
    if explicit and scheme != "list":
        raise InputError("guids is only used with scheme=list")
    if scheme == "pool_file" and params["export_pool_file"]:
        raise InputError("export_pool_file writes pool_file, which scheme=pool_file reads; use one or the other")
    operator = observed["operator"]
    export = params["export_pool_file"]
    if export is None:  # auto: on when the operator works on this node (it re-assigns IB VF GUIDs), never with pool_file
        export = operator["present"] and scheme != "pool_file"
    if scheme == "list":
        for index, text in enumerate(explicit):
            _guid.assignable(_guid.parse_guid(text, "guids[%d]" % index), "guids[%d] (%s)" % (index, text))
    pf_guid, state, links, warnings = observed["pf_guid"], observed["state"], observed["links"], []
    count = state["numvfs"] or 0
    pool_entry = None
    if scheme == "pool_file":
        text = observed["pool_text"]  # decoded as Go's encoding/json sees it (_guid.go_text)
        if text is None:
            raise InputError("scheme=pool_file but %s does not exist" % params["pool_file"])
        entries = _guid.parse_pool(text, params["pool_file"], links)
        warnings.extend(unresolved_warnings(entries, params["pool_file"]))
        pool_entry = _guid.pool_entry_for(entries, pf["pci_address"], [], params["pool_file"])
    desired = _guid.desired_guids(scheme, count, pf_guid, prefix, explicit, pool_entry)
    via = observed["via"]
    if via == "netlink" and count and not pf["netdev"]:
        raise InputError("PF %s has no IPoIB netdev (ib_ipoib not loaded?) and no OFED sriov sysfs: no way to set GUIDs"
                         % pf["pci_address"])
    admin = observed["admin"]
    seen = {}
    for vf in state["vfs"]:
        seen[vf["index"]] = dict(admin.get(vf["index"], {}), node=vf["node_guid"], port=vf["port_guid"])
    taken = dict(observed["taken"])
    taken.update(dict((guid, "the PF %s itself" % pf["pci_address"]) for guid in [pf_guid] if guid))
    for extra in params.get("exclude_guids") or []:
        taken.setdefault(_guid.parse_guid(extra, "exclude_guids entry"), "another node of the inventory (exclude_guids)")
    steps = _guid.plan(desired, seen, taken)
    used = observed["in_use"]
    busy = dict((step["vf"], used[step["vf"]]) for step in steps if step["vf"] in used)
    if busy and not params["allow_vf_reset"]:
        raise ConflictError("re-binding VFs to apply their GUIDs would disrupt VFs in use: %s; drain the node and rerun with "
                            "allow_vf_reset=true" % ", ".join("VF %d (%s)" % item for item in sorted(busy.items())),
                            {"in_use": dict((str(k), v) for k, v in busy.items())})
    vf_by_index = dict((vf["index"], vf) for vf in state["vfs"])
    actions, rebind = [], {}
    for step in steps:
        target = "%s vf %d" % (pf["netdev"] or pf["pci_address"], step["vf"])
        if step["set"]:
            actions.append(action("set_guid", target, node_guid=_guid.format_guid(step["guid"]),
                                  port_guid=_guid.format_guid(step["guid"]), via=via, reason=step["reason"]))
        if vf_by_index.get(step["vf"], {}).get("driver"):
            vf = vf_by_index[step["vf"]]
            rebind[step["vf"]] = action("rebind", vf["pci_address"], driver=vf["driver"], vf=step["vf"],
                                        netdevs=vf["netdevs"])
            actions.append(rebind[step["vf"]])
    # a VF left without its driver (an interrupted re-bind) gets no GUID and no RDMA device: bind it again, as the
    # kernel's autoprobe would have, so that a re-run repairs what a failed run left
    pf_driver = observed["driver"]
    unbound = [vf for vf in state["vfs"] if not vf["driver"]] if observed["autoprobe"] and pf_driver else []
    for vf in unbound:
        rebind[vf["index"]] = action("bind", vf["pci_address"], driver=pf_driver, reason="VF %d has no driver" % vf["index"])
        actions.append(rebind[vf["index"]])
    diffs, pool_plan = [], None
    if export:
        pool = observed["pool_file"]
        text = _guid.render_pool(pool["text"], pf["pci_address"], desired, links)
        pool_plan = plan_file(pool["state"], text, 0o644)
        if pool_plan.changed:
            actions.append(pool_plan.action())
            diffs.append(pool_plan.diff())
            warnings.extend(pool_warnings(pool["other_ib_pfs"], pool["state"].exists, text, operator,
                                          params["pool_file"], links))
    if steps:
        diffs.insert(0, {"before": "".join("vf %d: %s\n" % (i, _guid.format_guid(seen.get(i, {}).get("admin_node") or 0))
                                           for i in range(count)),
                         "after": "".join("vf %d: %s\n" % (i, _guid.format_guid(v)) for i, v in enumerate(desired)),
                         "before_header": "%s VF GUIDs" % pf["pci_address"],
                         "after_header": "%s VF GUIDs" % pf["pci_address"]})
    guid_rows = [{"index": index, "pci_address": vf_by_index[index]["pci_address"] if index in vf_by_index else None,
                  "guid": _guid.format_guid(value)} for index, value in enumerate(desired)]
    public = {"pf": pf_public(pf), "pf_node_guid": _guid.format_guid(pf_guid) if pf_guid else None, "num_vfs": count,
              "via": via, "vfs": [vf_public(vf, admin.get(vf["index"])) for vf in state["vfs"]],
              "zero_guid_vfs": sorted(i for i, got in seen.items() if not got.get("admin_node") and not got.get("node"))}
    return {"actions": actions, "steps": steps, "desired": desired, "rebind": rebind, "unbound": unbound,
            "pf_driver": pf_driver, "pool_plan": pool_plan, "export": export, "operator": operator,
            "warnings": warnings, "diffs": diffs, "observed": public, "guids": guid_rows, "count": count, "via": via,
            "admin": admin, "vf_by_index": vf_by_index}
