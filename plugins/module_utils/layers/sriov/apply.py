# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sriov`` layer's apply: exactly the planned actions (:mod:`.plan`), verified, the PF restored on a failure;
and the two runs, observe -> plan -> (check mode: the plan) -> apply, shared by the modules and the boot unit.

``run_sriov_vfs(module)`` and ``run_ib_vf_guids(module)`` are the whole logic of ``rdma.k8s_node.sriov_vfs`` and
``rdma.k8s_node.ib_vf_guids``.  They only need a *module-like* object (``params``, ``check_mode``, ``_diff``,
``warn``, ``run_command``, ``get_bin_path``), so the boot-time applier the ``sriov`` role installs runs the very same
code with a small stdlib stand-in instead of AnsibleModule.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileTransaction
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid, rules as _sriov
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as _host
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import observe as _observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import plan as _plan


def _result(module, planned):
    result = Result()
    for step in planned["actions"]:
        result.add(step)
    if module._diff:
        result.diffs.extend(planned["diffs"])
    result.observed = planned["observed"]
    for message in planned["warnings"]:
        module.warn(message)
    return result


# -- sriov_vfs ---------------------------------------------------------------------------------------------------------
def apply_vfs(host, commands, pf, planned, params, result):
    """The ``sriov_numvfs`` writes, the wait for the VFs, the ``ip link`` changes; on a failure the PF goes back to
    what it was (ApplyError saying so).  Returns the VFs as they are now; VerifyError when they are not as planned."""
    writes, changes = planned["writes"], planned["changes"]
    state_before = {"numvfs": planned["observed"]["num_vfs"], "admin": planned["admin"]}
    numvfs_path, want, timeout = planned["numvfs_path"], params["num_vfs"], params["timeout"]
    done = []
    try:
        for value in writes:
            _host.write_with_timeout(host, numvfs_path, str(value), timeout)
            done.append(value)
        if writes and writes[-1]:
            _host.wait_for_vfs(host, pf, want, timeout)
        for index, attrs in changes:
            _host.run_ip(commands, _sriov.ip_vf_argv(pf["netdev"], index, attrs))
    except (OSError, ApplyError) as exc:
        what = ("writing %s to %s failed: %s" % (writes[len(done)], numvfs_path, _host.describe_oserror(exc))
                if isinstance(exc, OSError) else exc.msg)
        outcome = _host.restore(host, commands, pf, state_before, timeout)
        raise ApplyError("%s; %s" % (what, outcome), {"pf": pf["pci_address"], "restore": outcome},
                         result=result.as_dict(with_diff=False)) from exc
    final = _host.observe(host, pf)
    final_admin = _host.ip_vfs(commands, pf["netdev"]) if final["numvfs"] else {}
    left = _sriov.plan_vf_attrs(planned["desired_attrs"], final_admin)
    if final["numvfs"] != want or left:
        raise VerifyError("after the change %s has %s VFs (wanted %d)%s" % (
            pf["pci_address"], final["numvfs"], want, "; attributes still differ: %s" % left if left else ""))
    return [_plan.vf_public(vf, final_admin.get(vf["index"])) for vf in final["vfs"]]


def _observed_and_planned(module, name, validate, plan):
    """A module's options checked, the node observed and the plan made: ``(host, commands, observed, planned,
    result)``."""
    params = module.params
    validate(params)
    host = HostRoot(params["host_root"])
    commands = HostCommands(module, host)
    observed = _observe.collect(host, commands, name, params)
    planned = plan(params, observed)
    return host, commands, observed, planned, _result(module, planned)


def run_sriov_vfs(module):
    """The ``sriov_vfs`` module: VF count, per-VF attributes, waits; restores the PF when a write fails."""
    params = module.params
    host, commands, observed, planned, result = _observed_and_planned(module, "sriov_vfs", _plan.validate_vfs,
                                                                      _plan.plan_vfs)
    if module.check_mode or not result.changed:
        result.extra["vfs"] = result.observed["vfs"]
        return result.as_dict(with_diff=module._diff)
    result.extra["vfs"] = apply_vfs(host, commands, observed["pf"], planned, params, result)
    return result.as_dict(with_diff=module._diff)


# -- ib_vf_guids --------------------------------------------------------------------------------------------------------
def apply_guids(module, host, commands, pf, planned, params, result):
    """The GUIDs set, the VFs re-bound (or bound), the wait for them, the pool file; on a failure the GUIDs already
    changed go back (ApplyError saying so).  Reports the netdev renames; VerifyError when a GUID is not as planned."""
    steps, vf_by_index, admin, via = planned["steps"], planned["vf_by_index"], planned["admin"], planned["via"]
    count, timeout, pool_plan = planned["count"], params["timeout"], planned["pool_plan"]
    touched = []
    expect_udev = _host.udev_expected(host, vf_by_index, planned["rebind"])
    try:
        for step in steps:
            index = step["vf"]
            if step["set"]:
                touched.append(index)
                _host.set_guid(host, commands, pf, index, step["guid"], step["guid"], via, timeout)
            vf = vf_by_index.get(index)
            if vf and vf["driver"]:
                try:
                    _host.rebind(host, vf, timeout)
                except OSError as exc:
                    raise ApplyError("re-binding VF %d (%s) failed: %s" % (index, vf["pci_address"],
                                                                           _host.describe_oserror(exc)),
                                     {"errno": exc.errno}) from exc
        for vf in planned["unbound"]:
            try:
                _host.write_with_timeout(host, "/sys/bus/pci/drivers/%s/bind" % planned["pf_driver"], vf["pci_address"],
                                         timeout)
            except OSError as exc:
                what = "binding VF %d (%s) to %s" % (vf["index"], vf["pci_address"], planned["pf_driver"])
                raise ApplyError("%s failed: %s" % (what, _host.describe_oserror(exc)), {"errno": exc.errno}) from exc
        if vf_by_index:
            _host.wait_for_vfs(host, pf, count, timeout)
    except ApplyError as exc:
        outcome = _host.restore_guids(host, commands, pf, touched, admin, vf_by_index, via, timeout)
        raise ApplyError("%s; %s" % (exc.msg, outcome), dict(exc.details, restore=outcome),
                         result=result.as_dict(with_diff=False)) from exc
    if pool_plan is not None and pool_plan.changed:
        try:
            result.extra["backup_files"] = FileTransaction(host, backup=bool(params.get("backup"))).apply_all([pool_plan])
        except ApplyError as exc:
            # the pool file must not disagree with the VFs: put the previous GUIDs back as for any other failure
            outcome = _host.restore_guids(host, commands, pf, touched, admin, vf_by_index, via, timeout)
            if vf_by_index and touched:
                try:
                    _host.wait_for_vfs(host, pf, count, timeout)
                except ApplyError as wait_exc:
                    outcome += "; %s" % wait_exc.msg
            raise ApplyError("%s; %s" % (exc.msg, outcome), dict(exc.details, restore=outcome),
                             result=result.as_dict(with_diff=False)) from exc

    _host.report_renames(module, host, pf, vf_by_index, planned["rebind"], expect_udev, result, timeout)
    final = _host.observe(host, pf)
    final_admin = _host.admin_guids(host, commands, pf, count, via)
    after = dict((vf["index"], dict(final_admin.get(vf["index"], {}), node=vf["node_guid"], port=vf["port_guid"]))
                 for vf in final["vfs"])
    left = _guid.plan(planned["desired"], after)
    if left:
        raise VerifyError("GUIDs were set but %s" % "; ".join("VF %d: %s" % (s["vf"], s["reason"]) for s in left))
    for row in result.extra["guids"]:
        vf = next((v for v in final["vfs"] if v["index"] == row["index"]), None)
        if vf is not None:
            row.update({"pci_address": vf["pci_address"], "netdevs": vf["netdevs"], "rdma_device": vf["rdma_device"]})


def run_ib_vf_guids(module):
    """The ``ib_vf_guids`` module: non-zero, unique, deterministic GUIDs on every VF of an InfiniBand PF."""
    params = module.params
    host, commands, observed, planned, result = _observed_and_planned(module, "ib_vf_guids", _plan.validate_guids,
                                                                      _plan.plan_guids)
    result.extra["sriov_network_operator"] = planned["operator"]
    result.extra["export_pool_file"] = planned["export"]
    result.extra["guids"] = planned["guids"]
    result.extra["netdev_renames"] = []
    result.extra["backup_files"] = {}
    if module.check_mode or not result.changed:
        return result.as_dict(with_diff=module._diff)
    apply_guids(module, host, commands, observed["pf"], planned, params, result)
    return result.as_dict(with_diff=module._diff)
