# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sriov room's planners, directly: options + observed (as observe.collect gives it) -> actions or refusals."""

from __future__ import absolute_import, annotations, division, print_function

import copy

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, ConflictError, HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._fileedit import FileState
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid, plan as _plan

PF_PATH = "/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0"


def _pf(link_layer="Ethernet", netdev="ens1f0", rdma="mlx5_0"):
    return {"pci_address": "0000:18:00.0", "path": PF_PATH, "netdev": netdev, "rdma_device": rdma,
            "link_layer": link_layer, "selected_by": "netdev"}


def _vf(index, driver="mlx5_core", netdevs=None, rdma=None, node=None, port=None):
    return {"index": index, "pci_address": "0000:18:00.%d" % (index + 2), "driver": driver,
            "netdevs": ["ens1f0v%d" % index] if netdevs is None else netdevs,
            "rdma_device": "mlx5_%d" % (index + 2) if rdma is None else rdma, "node_guid": node, "port_guid": port,
            "path": "%s/../0000:18:00.%d" % (PF_PATH, index + 2)}


def _vfs_observed(numvfs=0, totalvfs=8, admin=None, in_use=None, firmware=None, eswitch="legacy", vfs=None):
    return {"pf": _pf(), "eswitch_mode": eswitch,
            "state": {"numvfs": numvfs, "totalvfs": totalvfs,
                      "vfs": [_vf(i) for i in range(numvfs)] if vfs is None else vfs},
            "firmware": firmware, "in_use": in_use or {}, "admin": admin or {}, "admin_error": None}


def _vfs_params(**kw):
    params = {"netdev": "ens1f0", "rdma_device": None, "pci_address": None, "num_vfs": 2, "allow_vf_reset": False,
              "vf_defaults": None, "vfs": None, "firmware_check": "auto", "timeout": 120, "host_root": "/"}
    params.update(kw)
    return params


def test_vfs_create_then_nothing_to_do():
    params = _vfs_params(vf_defaults={"trust": True, "link_state": None, "spoofchk": None, "vlan": None, "qos": None,
                                      "mac": None})
    planned = _plan.plan_vfs(params, _vfs_observed())
    assert [(a["action"], a["target"]) for a in planned["actions"]] == [
        ("write", PF_PATH + "/sriov_numvfs"), ("wait_for_vfs", "0000:18:00.0"),
        ("set_vf", "ens1f0 vf 0"), ("set_vf", "ens1f0 vf 1")]
    assert planned["writes"] == [2] and planned["actions"][0]["value"] == "2"
    assert planned["diffs"] and "num_vfs: 2" in planned["diffs"][0]["after"]
    admin = dict((i, {"trust": True}) for i in range(2))
    again = _plan.plan_vfs(params, _vfs_observed(numvfs=2, admin=admin))
    assert again["actions"] == [] and again["diffs"] == [] and again["warnings"] == []
    assert "path" not in again["observed"]["pf"] and len(again["observed"]["vfs"]) == 2


def test_vfs_change_count_refused_naming_vfs_in_other_namespaces():
    used = {0: "its netdev is not in the host network namespace", 1: "bound to vfio-pci"}
    with pytest.raises(ConflictError) as caught:
        _plan.plan_vfs(_vfs_params(num_vfs=4), _vfs_observed(numvfs=2, in_use=used))
    assert "VF 0 (its netdev is not in the host network namespace)" in caught.value.msg
    planned = _plan.plan_vfs(_vfs_params(num_vfs=4, allow_vf_reset=True), _vfs_observed(numvfs=2, in_use=used))
    assert planned["writes"] == [0, 4]
    removed = _plan.plan_vfs(_vfs_params(num_vfs=0), _vfs_observed(numvfs=2, in_use=used))
    assert removed["writes"] == [0] and "look in use" in removed["warnings"][0]


def test_vfs_refusals_in_order():
    with pytest.raises(InputError, match="num_vfs must be a whole number"):
        _plan.plan_vfs(_vfs_params(num_vfs=-1), _vfs_observed())
    with pytest.raises(ConflictError, match="switchdev"):
        _plan.plan_vfs(_vfs_params(), {"pf": _pf(), "eswitch_mode": "switchdev"})
    with pytest.raises(InputError, match="above sriov_totalvfs"):
        _plan.plan_vfs(_vfs_params(num_vfs=9), _vfs_observed())
    with pytest.raises(InputError, match="netdev ens1f0 .PCI 0000:18:00.0.: the PF has no SR-IOV capability"):
        _plan.plan_vfs(_vfs_params(), _vfs_observed(totalvfs=None))
    broken = _vfs_observed(numvfs=2)
    broken["admin_error"] = HostReadError("ip -j link show ens1f0 failed (rc=1): boom")
    with pytest.raises(HostReadError, match="boom"):
        _plan.plan_vfs(_vfs_params(), broken)


def test_vfs_firmware_verdicts():
    query = {"tool": "mstconfig", "rc": 0, "err": "",
             "out": "Configurations:  Default Current Next\n SRIOV_EN  False(0)  False(0)  True(1)\n"
                    " NUM_OF_VFS  0  0  16\n"}
    with pytest.raises(InputError) as caught:  # both refusals in one message, the firmware's details
        _plan.plan_vfs(_vfs_params(num_vfs=4), _vfs_observed(totalvfs=0, firmware=query))
    assert "above sriov_totalvfs 0" in caught.value.msg and "is staged for the next boot" in caught.value.msg
    assert caught.value.details["reboot_required"] is True
    failed = {"tool": "mstconfig", "rc": 3, "out": "", "err": "no device"}
    planned = _plan.plan_vfs(_vfs_params(), _vfs_observed(firmware=failed))
    assert planned["warnings"] == ["mstconfig could not query 0000:18:00.0 (rc=3), firmware not checked: no device"]
    with pytest.raises(ApplyError, match="mstconfig -e -d 0000:18:00.0 q failed"):
        _plan.plan_vfs(_vfs_params(firmware_check="always"), _vfs_observed(firmware=failed))
    with pytest.raises(InputError, match="neither mstconfig nor mlxconfig"):
        _plan.plan_vfs(_vfs_params(firmware_check="always"),
                       _vfs_observed(firmware={"tool": None, "rc": None, "out": "", "err": ""}))


PF_GUID = 0x0c42a10300123456


def _guids_observed(vfs, admin=None, in_use=None, operator=None, pool=None, taken=None):
    return {"pf": _pf("InfiniBand", "ibp24s0"), "pf_guid": PF_GUID,
            "operator": operator or {"present": False, "running": False},
            "state": {"numvfs": len(vfs), "totalvfs": 8, "vfs": vfs}, "links": None, "pool_text": None,
            "via": "netlink", "admin": admin or {}, "taken": taken or {}, "in_use": in_use or {},
            "driver": "mlx5_core", "autoprobe": True, "pool_file": pool}


def _guids_params(**kw):
    params = {"netdev": "ibp24s0", "rdma_device": None, "pci_address": None, "scheme": "pf_guid", "guid_prefix": "02",
              "guids": None, "pool_file": _guid.OPERATOR_POOL_FILE, "export_pool_file": False, "exclude_guids": None,
              "backup": False, "allow_vf_reset": False, "timeout": 60, "host_root": "/"}
    params.update(kw)
    return params


def test_guids_set_rebind_then_nothing_to_do():
    vfs = [_vf(0, netdevs=["ibp24s0v0"], node=0, port=0), _vf(1, driver=None, netdevs=[])]
    planned = _plan.plan_guids(_guids_params(), _guids_observed(vfs))
    want = [_guid.derive(PF_GUID, i) for i in range(2)]
    assert planned["desired"] == want
    assert [(a["action"], a["target"]) for a in planned["actions"]] == [
        ("set_guid", "ibp24s0 vf 0"), ("rebind", "0000:18:00.2"), ("set_guid", "ibp24s0 vf 1"), ("bind", "0000:18:00.3")]
    assert planned["observed"]["zero_guid_vfs"] == [0, 1]
    done = [_vf(i, netdevs=["ibp24s0v%d" % i], node=want[i], port=want[i]) for i in range(2)]
    admin = dict((i, {"admin_node": want[i], "admin_port": want[i]}) for i in range(2))
    again = _plan.plan_guids(_guids_params(), _guids_observed(done, admin=admin))
    assert again["actions"] == [] and again["diffs"] == []


def test_guids_refusals():
    vfs = [_vf(0, node=0, port=0)]
    eth = dict(_guids_observed(vfs), pf=_pf())
    with pytest.raises(InputError, match="is an Ethernet PF"):
        _plan.plan_guids(_guids_params(), eth)
    with pytest.raises(InputError, match="pool_file must be an absolute path"):
        _plan.plan_guids(_guids_params(pool_file="guids"), _guids_observed(vfs))
    with pytest.raises(InputError, match="scheme=pool_file but"):
        _plan.plan_guids(_guids_params(scheme="pool_file"), _guids_observed(vfs))
    used = {0: "its RDMA device is not in the host network namespace"}
    with pytest.raises(ConflictError, match="VF 0 .its RDMA device is not in the host network namespace."):
        _plan.plan_guids(_guids_params(), _guids_observed(vfs, in_use=used))
    assert _plan.plan_guids(_guids_params(allow_vf_reset=True), _guids_observed(vfs, in_use=used))["actions"]
    clash = {_guid.derive(PF_GUID, 0): "VF 3 of ibp25s0"}
    with pytest.raises(ConflictError, match="already used by VF 3 of ibp25s0"):
        _plan.plan_guids(_guids_params(), _guids_observed(vfs, taken=clash))


def test_guids_export_pool_file_with_the_operator():
    vfs = [_vf(0, node=0, port=0)]
    operator = {"present": True, "running": True}
    pool = {"state": FileState(_guid.OPERATOR_POOL_FILE, exists=False), "text": None, "other_ib_pfs": ["0000:19:00.0"]}
    observed = _guids_observed(vfs, operator=operator, pool=pool)
    observed["links"] = []
    before = copy.deepcopy(observed)
    planned = _plan.plan_guids(_guids_params(export_pool_file=None), observed)
    assert planned["export"] is True and planned["pool_plan"].changed
    assert planned["actions"][-1]["target"] == _guid.OPERATOR_POOL_FILE
    assert any("restart its pod" in w for w in planned["warnings"])
    assert any("0000:19:00.0" in w for w in planned["warnings"])
    assert dict(observed, pool_file=None) == dict(before, pool_file=None)  # pure: the observation is not changed


class _Commands:
    """HostCommands' interface for eswitch_mode: devlink on PATH, every call recorded."""

    def __init__(self):
        self.calls = []
        self.module = self

    @staticmethod
    def get_bin_path(name):
        return "/usr/sbin/" + name

    def run_kernel(self, argv):
        self.calls.append(argv)
        return 0, '{"dev": {"pci/0000:29:00.0": {"mode": "legacy"}}}', ""


def test_eswitch_mode_asks_devlink_only_for_a_pf_that_can_have_an_eswitch():
    """An InfiniBand PF has no eswitch (mlx5_eswitch_check: EOPNOTSUPP unless the port type is Ethernet; tests/hwsim
    models the same), so devlink is not run for it: None, as when devlink fails."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as _host  # pylint: disable=import-outside-toplevel
    commands = _Commands()
    assert _host.eswitch_mode(commands, "0000:18:00.0", "InfiniBand") is None
    assert commands.calls == []
    assert _host.eswitch_mode(commands, "0000:29:00.0", "Ethernet") == "legacy"
    assert _host.eswitch_mode(commands, "0000:29:00.0") == "legacy"  # link layer unknown: devlink is asked
    assert commands.calls == [["devlink", "-j", "dev", "eswitch", "show", "pci/0000:29:00.0"]] * 2
