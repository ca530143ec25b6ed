# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sriov`` layer's audit judgement: the modules' planners run on the facts (``layers.sriov``).

* ``sriov.num_vfs`` (the VF count against ``sriov_pfs[].num_vfs``, live and in the boot unit's state file),
  ``sriov.vf_attrs`` (the VFs' admin attributes against ``vf_defaults``/``vfs``) and ``sriov.vf_guids`` (no
  all-zero or duplicate GUID on an InfiniBand PF's VFs), as the audit judged them before the room;
* ``sriov.config`` per ``sriov_pfs`` entry: the plans of sriov_vfs and (for an InfiniBand PF) ib_vf_guids, as
  roles/sriov/tasks calls the modules in check mode: ``ok`` when neither has work, else ``drift`` with their actions
  as the evidence (``detail``: ``planned: [...]``); ``fail`` when a module would refuse (its message) or the entry
  is not what the role and the module accept; ``unknown`` when the facts do not hold what a plan reads (the
  firmware query, which rdma_facts does not run; a pool file other than the default; a PF that could not be read).
  Not judged on facts without ``layers.sriov.observed``.
* ``sriov.guid_inventory`` (:func:`inventory_judge`): no VF GUID of a host on another host of the inventory.

Facts gathered before the layer was a room (no ``layers.sriov``) are judged through :func:`section_of`, from
``devices`` and ``persisted.sriov``; they get no ``sriov.config`` check.  Controller-side only: the boot applier's
bundle does not carry this file.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible.module_utils.common.validation import check_type_bool, check_type_int

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import MissingFacts, check, role_params
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as _host
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import plan as _plan
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import rules as _rules

ZERO_GUID = "0000:0000:0000:0000"
REMEDY = "run the sriov role (sriov_pfs; sriov_allow_vf_reset=true where VFs in use must be re-created)"
#: per-VF attributes sriov_vfs sets (``vf_defaults`` / ``vfs`` of an ``sriov_pfs`` entry) and rdma_facts reads back
VF_ATTR_KEYS = _observe.VF_ATTR_KEYS
#: the sriov role's defaults (roles/sriov/defaults/main.yml) where the desired state has none
ROLE_DEFAULTS = {
    "sriov_allow_vf_reset": False,
    "sriov_firmware_check": "auto",
    "sriov_timeout": 120,
    "sriov_guid_prefix": "02",
    "sriov_guid_pool_file": _observe.POOL_FILE,
    "sriov_export_operator_pool": "auto",
}


def _link_layer(device):
    layers = set(p.get("link_layer") for p in device.get("ports") or [])
    if "InfiniBand" in layers:
        return "InfiniBand"
    return (sorted(layers - {None}) or [None])[0]


def section_of(facts):
    """The ``layers.sriov`` section from facts without it (an older collection, or its observer failed): the PFs of
    ``devices`` as the per-PF checks read them and ``persisted.sriov``; without ``observed``."""
    pfs = []
    for device in facts.get("devices") or []:
        if device.get("is_vf"):
            continue
        pfs.append({"name": device.get("name"), "pci_address": device.get("pci_address"),
                    "netdevs": device.get("netdevs") or [], "rdma_devices": [device["name"]] if device.get("name") else [],
                    "link_layer": _link_layer(device), "numvfs": (device.get("sriov") or {}).get("numvfs"),
                    "totalvfs": (device.get("sriov") or {}).get("totalvfs"), "vfs": device.get("vfs") or []})
    return {"pfs": pfs, "persisted": (facts.get("persisted") or {}).get("sriov")}


# -- sriov.num_vfs, vf_attrs, vf_guids (moved from _audit) -------------------------------------------------------------
def _find_pf(pfs, spec):
    for pf in pfs:
        if spec.get("pci_address") and pf.get("pci_address") == spec["pci_address"]:
            return pf
        if spec.get("rdma_device") and spec["rdma_device"] in (pf.get("rdma_devices") or []):
            return pf
        if spec.get("netdev") and spec["netdev"] in (pf.get("netdevs") or []):
            return pf
    return None


def _pf_label(spec):
    return spec.get("netdev") or spec.get("rdma_device") or spec.get("pci_address")


def _vf_attr(key, value):
    """A VF attribute as sriov_vfs sees it after its argument spec's conversion (``trust: "yes"`` is True,
    ``vlan: "100"`` is 100); a value the module would refuse is kept as given (and differs)."""
    try:  # the converters of the module's argument spec (type bool / type int)
        if key in ("trust", "spoofchk"):
            return check_type_bool(value)
        if key in ("vlan", "qos"):
            return check_type_int(value)
    except TypeError:
        return value
    return value.lower() if key in ("link_state", "mac") and isinstance(value, str) else value


def desired_vf_attrs(spec, count):
    """``{index: {attr: value}}`` a ``sriov_pfs`` entry asks for: ``vf_defaults`` overlaid with the ``vfs`` entry of
    each index, as sriov_vfs applies them (only the attributes that are set; VFs asking for none are left out)."""
    base = dict((k, _vf_attr(k, v)) for k, v in (spec.get("vf_defaults") or {}).items()
                if k in VF_ATTR_KEYS and v is not None)
    out = dict((index, dict(base)) for index in range(count or 0))
    for entry in spec.get("vfs") or []:
        index = entry.get("index") if isinstance(entry, dict) else None
        if index in out:
            out[index].update((k, _vf_attr(k, v)) for k, v in entry.items() if k in VF_ATTR_KEYS and v is not None)
    return dict((index, attrs) for index, attrs in out.items() if attrs)


def _vf_attrs(pf, spec, label):
    """``sriov.vf_attrs``: the VF admin attributes rdma_facts read (``ip link show <pf>``) against the desired ones."""
    wanted = desired_vf_attrs(spec, spec.get("num_vfs"))
    if not wanted:
        return []
    vfs = dict((vf.get("index"), vf) for vf in pf.get("vfs") or [])
    differ, unknown, missing = {}, [], []
    live = {}
    for index, attrs in sorted(wanted.items()):
        vf = vfs.get(index)
        if vf is None:
            missing.append(index)
            continue
        live[str(index)] = dict((key, vf.get(key)) for key in attrs)
        for key, value in sorted(attrs.items()):
            have = vf.get(key)
            if have is None:
                unknown.append("VF %d %s" % (index, key))
            elif (have.lower() if key == "mac" else have) != (value.lower() if key == "mac" else value):
                differ.setdefault(str(index), []).append(key)
    desired = dict((str(index), attrs) for index, attrs in sorted(wanted.items()))
    if differ or missing:
        detail = "; ".join(["VF %s: %s differ" % (index, ", ".join(keys)) for index, keys in sorted(differ.items())]
                           + (["VF %s absent" % ", ".join(str(i) for i in missing)] if missing else []))
        return [check("sriov.vf_attrs", "drift", subject=label, desired=desired, live=live,
                      remedy="run the sriov role (sriov_vfs sets VF trust, spoofchk, link state, VLAN/QoS, MAC)",
                      detail=detail)]
    if unknown:
        return [check("sriov.vf_attrs", "unknown", subject=label, desired=desired, live=live,
                      detail="not read (ip link show of the PF failed or the driver does not report them): %s"
                      % ", ".join(unknown))]
    return [check("sriov.vf_attrs", "ok", subject=label, desired=desired, live=live)]


def pf_checks(section, desired):
    """``sriov.num_vfs`` and ``sriov.vf_attrs`` per ``sriov_pfs`` entry, as before the room."""
    checks = []
    for spec in _specs(desired):
        if not isinstance(spec, dict):
            continue  # the role refuses it: sriov.config says so
        try:
            checks.extend(_pf_checks_of(section, spec))
        except _MALFORMED as exc:
            checks.append(check("sriov.num_vfs", "unknown", subject=_pf_label(spec), desired=spec.get("num_vfs"),
                                detail=_malformed(exc)))
    return checks


def _specs(desired):
    """``sriov_pfs`` as a list (anything else: no entries here; sriov.config fails it)."""
    specs = (desired or {}).get("sriov_pfs") or []
    return specs if isinstance(specs, list) else []


def _pf_checks_of(section, spec):
    checks = []
    pfs = [pf for pf in section.get("pfs") or [] if isinstance(pf, dict)]
    state = section.get("persisted")
    label = _pf_label(spec)
    pf = _find_pf(pfs, spec)
    want = spec.get("num_vfs")
    persisted = None
    for entry in (state or {}).get("pfs") or []:
        if any(entry.get(k) and entry.get(k) == spec.get(k) for k in ("netdev", "rdma_device", "pci_address")):
            persisted = entry.get("num_vfs")
    if pf is None:
        unreadable = _unreadable(section.get("observed"))
        if unreadable:
            checks.append(check("sriov.num_vfs", "unknown", subject=label, desired=want, persisted=persisted,
                                detail="no PF read is this one, and rdma_facts could not read %s" % unreadable))
            return checks
        checks.append(check("sriov.num_vfs", "fail", subject=label, desired=want, persisted=persisted,
                            remedy="check sriov_pfs: no such physical function on this node"))
        return checks
    live = pf.get("numvfs")
    if live is None:
        checks.append(check("sriov.num_vfs", "unknown", subject=label, desired=want, persisted=persisted,
                            detail="sriov_numvfs could not be read"))
        return checks
    remedy = None
    if live != want:
        remedy = "run the sriov role" + (" with sriov_allow_vf_reset=true (VFs in use are destroyed)"
                                         if live and want else "")
    elif persisted != want:
        remedy = "run the sriov role (the boot unit's state file does not recreate these VFs)"
    status = "ok" if live == want and persisted == want else "drift"
    checks.append(check("sriov.num_vfs", status, subject=label, desired=want, live=live, persisted=persisted,
                        remedy=remedy if status != "ok" else None))
    checks.extend(_vf_attrs(pf, spec, label))
    return checks


def _admin_guids(section, pf):
    """``{VF index: [node GUID, port GUID]}`` (sysfs spelling) the PF's driver holds for its VFs (``ip link show``
    NODE_GUID/PORT_GUID, or the OFED ``sriov/<vf>/`` files: what ib_vf_guids set), from the section's ``observed``;
    {} when the facts have none (an older collection, no node tools)."""
    entry = (((section.get("observed") or {}).get("pfs") or {}).get(pf.get("pci_address")) or {})
    guids = entry.get("guids") or {}
    out = {}
    for index, admin in _observe.unpairs(guids.get("admin")).items():
        if isinstance(admin, dict):
            out[index] = [_observe.sysfs_spelling(admin.get("admin_node")), _observe.sysfs_spelling(admin.get("admin_port"))]
    return out


def guid_checks(section):
    """``sriov.vf_guids`` per InfiniBand PF with VFs, as before the room (also in a facts-only audit).

    A VF bound to its driver whose RDMA device the host does not see is in a pod: in exclusive mode the RDMA CNI
    moved its RDMA device into the pod's network namespace, and sysfs lists an RDMA device only in its own namespace
    (drivers/infiniband/core/device.c: ib_class's ``ns_type``; docs/sriov.md "VFs in pods").  Its GUIDs are then the
    ones its PF's driver holds for it (mlx5 gives a VF the administrative GUIDs when it binds, which ib_vf_guids
    sets): those are judged, and the VF is named in ``live.in_pods``.  Only a VF with neither is unknown."""
    checks, seen = [], {}
    for pf in section.get("pfs") or []:
        if not pf.get("vfs") or pf.get("link_layer") != "InfiniBand":
            continue
        zero, unbound, dup, in_pods = [], [], [], []
        admin = None
        for vf in pf["vfs"]:
            guids = [vf.get("node_guid"), vf.get("port_guid")]
            if any(g is None for g in guids) and vf.get("driver") and not vf.get("name"):
                admin = _admin_guids(section, pf) if admin is None else admin
                held = admin.get(vf.get("index"))
                if held and all(held):
                    guids = held
                    in_pods.append(vf.get("index"))
            if any(g is None for g in guids):
                unbound.append(vf.get("index"))
            if ZERO_GUID in guids:
                zero.append(vf.get("index"))
            for guid in guids:
                if guid and guid != ZERO_GUID:
                    if guid in seen and seen[guid] != (pf["name"], vf.get("index")):
                        dup.append(guid)
                    seen.setdefault(guid, (pf["name"], vf.get("index")))
        if dup:
            checks.append(check("sriov.vf_guids", "fail", subject=pf["name"], desired="unique", live=sorted(set(dup)),
                                remedy="run the sriov role (ib_vf_guids assigns unique GUIDs)",
                                detail="the same GUID on two VFs: the subnet manager gives only one of them a LID"))
        elif zero:
            checks.append(check("sriov.vf_guids", "drift", subject=pf["name"], desired="non-zero", live={"zero": zero},
                                remedy="run the sriov role (ib_vf_guids)",
                                detail="VFs with an all-zero GUID get no LID: their pods' ports stay DOWN"))
        elif unbound:
            checks.append(check("sriov.vf_guids", "unknown", subject=pf["name"], desired="non-zero",
                                live={"unbound": unbound},
                                detail="VFs not bound to mlx5_core: their GUIDs cannot be read"))
        else:
            live = {"vfs": len(pf["vfs"])}
            if in_pods:
                live["in_pods"] = in_pods
            checks.append(check("sriov.vf_guids", "ok", subject=pf["name"], desired="non-zero, unique", live=live))
    return checks


# -- sriov.config: the modules' planners on the facts ------------------------------------------------------------------
def _role(desired, var):
    value = desired.get(var)
    return ROLE_DEFAULTS.get(var) if value is None else value


def _spec_problem(spec):
    """What the role's first task (``Check the PF list``) refuses in an ``sriov_pfs`` entry, or None."""
    if not isinstance(spec, dict):
        return "it is not a mapping"
    named = [key for key in _plan.PF_OPTIONS if key in spec]
    num_vfs = spec.get("num_vfs")
    if len(named) != 1:
        return "it must name its PF by exactly one of netdev, rdma_device, pci_address"
    if not spec[named[0]] or not isinstance(spec[named[0]], str):
        return "%s must be a non-empty string, got %r" % (named[0], spec[named[0]])
    if isinstance(num_vfs, bool) or not isinstance(num_vfs, int) or num_vfs < 0:
        return "num_vfs must be a whole number >= 0, got %r" % (num_vfs,)
    if spec.get("guid_scheme", "pf_guid") not in ("pf_guid", "list", "pool_file"):
        return "guid_scheme must be pf_guid, list or pool_file, got %r" % (spec.get("guid_scheme"),)
    return None


def vfs_params(spec, desired):
    """sriov_vfs' options for one ``sriov_pfs`` entry exactly as roles/sriov/tasks/main.yml passes them (the role's
    defaults where ``desired`` has none), checked and converted by the module's own argument spec (InputError)."""
    params = dict((key, spec.get(key)) for key in _plan.PF_OPTIONS + ("num_vfs", "vf_defaults", "vfs"))
    params.update(allow_vf_reset=_role(desired, "sriov_allow_vf_reset"),
                  firmware_check=_role(desired, "sriov_firmware_check"), timeout=_role(desired, "sriov_timeout"),
                  host_root="/")
    return role_params(_plan.vfs_argument_spec(), params, "sriov_")


def guids_params(spec, pci_address, desired):
    """ib_vf_guids' options as the role's planning call passes them (``Work out the VF GUIDs``: no timeout or
    exclude_guids, the module's defaults; the other hosts' GUIDs are ``sriov.guid_inventory``'s)."""
    export = _role(desired, "sriov_export_operator_pool")
    if str(export) != "auto":
        try:
            export = check_type_bool(export)
        except TypeError as exc:
            raise InputError("sriov_export_operator_pool must be auto or a boolean, got %r" % (export,)) from exc
    return role_params(_plan.guids_argument_spec(), {
        "pci_address": pci_address, "scheme": spec.get("guid_scheme", "pf_guid"),
        "guid_prefix": _role(desired, "sriov_guid_prefix"), "guids": spec.get("guids"),
        "pool_file": _role(desired, "sriov_guid_pool_file"), "allow_vf_reset": _role(desired, "sriov_allow_vf_reset"),
        "export_pool_file": None if str(export) == "auto" else export, "host_root": "/"}, "sriov_")


def _entry_for(observed, spec):
    """The facts' PF the entry names, as :func:`host.resolve_pf` finds it: ``(entry, option)``; None when the facts
    hold no such PF."""
    option = next(key for key in _plan.PF_OPTIONS if spec.get(key))
    value = spec[option]
    for entry in observed["pfs"].values():
        if "error" in entry:
            continue
        if option == "pci_address" and entry["pf"]["pci_address"] == _host.pci_address_of(value) \
                or option == "netdev" and value in entry["netdevs"] \
                or option == "rdma_device" and value in entry["rdma_devices"]:
            return entry, option
    if option == "pci_address" and _host.pci_address_of(value) in observed["pfs"]:
        raise MissingFacts("rdma_facts could not read PF %s: %s" % (
            value, observed["pfs"][_host.pci_address_of(value)]["error"]))
    unreadable = _unreadable(observed)
    if unreadable:  # the PF the entry names may be one of them
        raise MissingFacts("no PF read has %s %s, and rdma_facts could not read %s: the plan is unknown"
                           % (option.replace("_", " "), value, unreadable))
    return None, option


def _unreadable(observed):
    """``"<pci> (<error>), ..."`` of the PFs rdma_facts could not read, or ``""``."""
    return ", ".join("%s (%s)" % (bdf, entry["error"]) for bdf, entry in sorted((observed or {}).get("pfs", {}).items())
                     if isinstance(entry, dict) and "error" in entry)


def vfs_observed(entry, option, params):
    """What :func:`plan.plan_vfs` reads, from the facts' entry of the PF (MissingFacts for what they lack)."""
    pf = dict(entry["pf"], selected_by=option)
    observed = {"pf": pf, "eswitch_mode": entry["eswitch_mode"]}
    if entry["eswitch_mode"] == "switchdev":
        return observed
    state = entry["state"]
    if _rules.firmware_query_needed(params["num_vfs"], params["firmware_check"], state["totalvfs"]):
        raise MissingFacts("sriov_vfs asks the firmware of %s (mstconfig/mlxconfig -e -d %s q) for %d VFs with "
                           "firmware_check=%s (sriov_totalvfs is %s), and rdma_facts does not run that query: the plan "
                           "is unknown" % (pf["pci_address"], pf["pci_address"], params["num_vfs"],
                                           params["firmware_check"], state["totalvfs"]))
    observed.update(state=state, firmware=None, in_use=_observe.unpairs(entry["in_use"]),
                    admin=_observe.unpairs(entry["admin"]), admin_error=None)
    if entry["admin_error"]:
        observed["admin_error"] = MissingFacts("the VF attributes of %s could not be read (%s): the plan is unknown"
                                               % (pf["pci_address"], entry["admin_error"]))
    return observed


def guids_observed(entry, observed_node, params):
    """What :func:`plan.plan_guids` reads, from the facts (MissingFacts for what they lack)."""
    pf = dict(entry["pf"], selected_by="pci_address")
    observed = {"pf": pf}
    guids = entry["guids"]
    if guids is None:  # not an InfiniBand PF with an RDMA device: the planner refuses it
        return observed
    if guids.get("error"):
        raise MissingFacts("the VF GUIDs of %s could not be read: %s" % (pf["pci_address"], guids["error"]))
    scheme, operator = params["scheme"], observed_node["operator"]
    export = params["export_pool_file"]
    if export is None:
        export = operator["present"] and scheme != "pool_file"
    pool = observed_node["pool_file"]
    if (scheme == "pool_file" or export) and params["pool_file"] != pool["path"]:
        raise MissingFacts("the facts hold the pool file %s, not %s (sriov_guid_pool_file): the plan is unknown"
                           % (pool["path"], params["pool_file"]))
    if (scheme == "pool_file" or export) and pool.get("error"):
        raise MissingFacts("%s could not be read: %s" % (pool["path"], pool["error"]))
    links = [tuple(link) for link in observed_node["links"]]
    state = entry["state"]
    pool_state = FileState(**pool["state"]) if pool.get("state") is not None else None
    observed.update(
        operator=operator, pf_guid=guids["pf_guid"], state=state,
        links=links if scheme == "pool_file" or export else None,
        pool_text=pool["text"] if scheme == "pool_file" else None,
        via=guids["via"], admin=_observe.unpairs(guids["admin"]),
        taken=dict((guid, where) for guid, where in guids["taken"]),
        in_use=_observe.unpairs(entry["in_use"]), driver=guids["driver"], autoprobe=guids["autoprobe"], pool_file=None)
    if export:
        observed["pool_file"] = {"state": pool_state, "text": pool["text"],
                                 "other_ib_pfs": None if pool_state.exists else guids["other_ib_pfs"]}
    return observed


def configcheck(section, spec, desired):
    """``sriov.config`` of one ``sriov_pfs`` entry: sriov_vfs' plan, then ib_vf_guids' for an InfiniBand PF, as the
    role's check mode makes them."""
    label = _pf_label(spec) if isinstance(spec, dict) else None
    problem = _spec_problem(spec)
    try:
        if problem:
            raise InputError("sriov_pfs entry %s: %s" % (label, problem))
        params = vfs_params(spec, desired)
    except InputError as exc:
        return check("sriov.config", "fail", label, remedy="correct sriov_pfs and the sriov role's variables: the "
                     "role fails on them before any change", detail=exc.msg)
    want = {"num_vfs": params["num_vfs"]}
    observed = section["observed"]
    if observed is None:
        return check("sriov.config", "unknown", label, desired=want, detail="the facts hold no planner input (rdma_facts "
                     "ran without node tools: no eswitch mode, VF attributes or GUIDs): the plan is unknown")
    try:
        entry, option = _entry_for(observed, spec)
        if entry is None:
            if option == "pci_address":
                raise MissingFacts("the facts hold no PF %s (rdma_facts reads the PCI functions of the node's network "
                                   "interfaces and RDMA devices): the plan is unknown" % spec[option])
            return check("sriov.config", "fail", label, desired=want, remedy="check sriov_pfs: sriov_vfs refuses it",
                         detail="%s: there is no physical function %r on this node (no such %s, or a VF or a virtual "
                                "interface)" % (option, spec[option], option.replace("_", " ")))
        vfs_plan = _plan.plan_vfs(params, vfs_observed(entry, option, params))
        actions = list(vfs_plan["actions"])
        if entry["pf"]["link_layer"] == "InfiniBand":
            gparams = guids_params(spec, entry["pf"]["pci_address"], desired)
            actions.extend(_plan.plan_guids(gparams, guids_observed(entry, observed, gparams))["actions"])
    except MissingFacts as exc:
        return check("sriov.config", "unknown", label, desired=want, detail=exc.msg)
    except RdmaNodeError as exc:
        return check("sriov.config", "fail", label, desired=want, remedy="see docs/sriov.md: the sriov role's modules "
                     "refuse this PF with the role's variables", detail=exc.msg)
    live = {"num_vfs": entry["state"]["numvfs"]} if "state" in entry else None
    return check("sriov.config", "drift" if actions else "ok", label, desired=want, live=live,
                 remedy=REMEDY if actions else None, detail="planned: %s" % actions if actions else None)


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, persisted, remedy, detail}]``) of the layer."""
    if section is None:
        return []
    checks = pf_checks(section, desired)
    try:
        checks.extend(guid_checks(section))
    except _MALFORMED as exc:
        checks.append(check("sriov.vf_guids", "unknown", detail=_malformed(exc)))
    specs = (desired or {}).get("sriov_pfs")
    if specs and not isinstance(specs, list):
        checks.append(check("sriov.config", "fail", desired=specs, remedy="correct sriov_pfs: the role fails on it "
                            "before any change", detail="sriov_pfs must be a list of PF entries, got %s"
                            % type(specs).__name__))
    elif desired is not None and "observed" in section:  # (not on facts of an older collection version)
        for spec in specs or []:
            try:
                checks.append(configcheck(section, spec, desired))
            except _MALFORMED as exc:
                checks.append(check("sriov.config", "unknown", _pf_label(spec) if isinstance(spec, dict) else None,
                                    detail=_malformed(exc)))
    return checks


# what facts or variables of another shape raise in the judgement: that host's check is unknown, never a crash of
# the whole audit
_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError)


def _malformed(exc):
    return "the facts or the entry are not what the audit reads (%s: %s)" % (type(exc).__name__, exc)


# -- sriov.guid_inventory ------------------------------------------------------------------------------------------------
def vf_guids(section):
    """``[(guid, where)]`` of every non-zero VF node/port GUID of a host's section."""
    out = []
    for pf in (section or {}).get("pfs") or []:
        for vf in pf.get("vfs") or []:
            for kind in ("node_guid", "port_guid"):
                guid = vf.get(kind)
                if guid and guid != ZERO_GUID:
                    out.append((guid, "%s VF %s %s" % (pf.get("name"), vf.get("index"), kind)))
    return out


def inventory_judge(sections):
    """``{host: [sriov.guid_inventory]}``: VF GUIDs unique across the inventory (``sections``: ``{host: its
    section or None}``); ``ok`` on hosts with an InfiniBand PF that has VFs."""
    owners = {}
    for name, section in sections.items():
        for guid, where in vf_guids(section):
            owners.setdefault(guid, []).append((name, where))
    out = {}
    for name, section in sections.items():
        if section is None:
            continue
        clashes = sorted(set(guid for guid, where in vf_guids(section) if len(set(o[0] for o in owners[guid])) > 1))
        if clashes:
            others = sorted(set(o[0] for g in clashes for o in owners[g] if o[0] != name))
            out[name] = [check("sriov.guid_inventory", "fail", desired="unique in the inventory",
                               live={"duplicates": clashes, "also_on": others},
                               remedy="run the sriov role on all hosts together (sriov_guid_inventory_check)")]
        elif any(pf.get("vfs") and pf.get("link_layer") == "InfiniBand" for pf in section.get("pfs") or []):
            out[name] = [check("sriov.guid_inventory", "ok", desired="unique in the inventory")]
    return out
