"""sriov_vfs on simulated nodes: creation, attributes, the 0-first rule, bad inputs, every injected write fault."""

import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids, sriov_vfs
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.simnode import sim_node

IB_PF = "0000:18:00.0"


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as node:
        yield node


@pytest.fixture
def dgx_threads(tmp_path, monkeypatch):
    """dgx-h100 served by a daemon with threads: a test that injects a hang needs them (simnode.sim_node)."""
    with sim_node("dgx-h100", tmp_path, monkeypatch, threads=True) as node:
        yield node


@pytest.fixture
def roce(tmp_path, monkeypatch):
    with sim_node("roce-cx6dx", tmp_path, monkeypatch) as node:
        yield node


def run(monkeypatch, node, check=False, expect=None, **args):
    args.setdefault("host_root", str(node.root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, sriov_vfs.main, args, check=check, diff=True, **kwargs)


def guids(monkeypatch, node, **args):
    args.setdefault("host_root", str(node.root))
    return run_module(monkeypatch, ib_vf_guids.main, args, diff=True)


def pf_state(node, bdf=IB_PF):
    return node.call({"cmd": "dump"})["pfs"][bdf]


def test_check_mode_plans_without_writing(monkeypatch, dgx):
    result = run(monkeypatch, dgx, check=True, netdev="ibp24s0", num_vfs=4, vf_defaults={"link_state": "auto"})
    assert result["changed"] is True
    assert [a["action"] for a in result["actions"]] == ["write", "wait_for_vfs"] + ["set_vf"] * 4
    assert result["actions"][0]["value"] == "4" and result["actions"][0]["target"].endswith("/0000:18:00.0/sriov_numvfs")
    assert result["diff"]["before"] == "num_vfs: 0\n" and "vf 3: link_state=auto" in result["diff"]["after"]
    assert result["observed"]["totalvfs"] == 16 and result["observed"]["firmware"] is None, \
        "auto: sriov_totalvfs 16 already says the firmware allows 4 VFs"
    asked = run(monkeypatch, dgx, check=True, netdev="ibp24s0", num_vfs=4, firmware_check="always")
    assert asked["observed"]["firmware"]["NUM_OF_VFS"]["current"] == "16"
    assert pf_state(dgx)["numvfs"] == 0


def test_auto_asks_the_firmware_only_when_the_kernel_shows_too_few_vfs(monkeypatch, dgx):
    """sriov_totalvfs is what the firmware's Current values expose: enough of them is the firmware's verdict; fewer,
    and the firmware is asked why (its Current and Next values go into the failure)."""
    dgx.call({"cmd": "mstconfig_set", "bdf": IB_PF, "params": {"NUM_OF_VFS": "4"}})  # staged in Next only
    assert run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=8)["observed"]["firmware"] is None
    dgx.reboot()
    assert run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=4)["observed"]["firmware"] is None
    failure = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=8, allow_vf_reset=True, expect=ModuleFail)
    assert "above sriov_totalvfs 4" in failure["msg"] and "too few for 8 VFs" in failure["msg"], failure["msg"]
    assert failure["details"]["firmware"]["NUM_OF_VFS"]["current"] == "4"


def test_create_then_idempotent(monkeypatch, dgx):
    result = run(monkeypatch, dgx, rdma_device="mlx5_0", num_vfs=4, vf_defaults={"link_state": "auto"})
    assert result["changed"] is True
    state = pf_state(dgx)
    assert state["numvfs"] == 4 and all(vf["link_state"] == "auto" for vf in state["admin"].values())
    assert [vf["netdevs"] for vf in result["vfs"]] == [["ibp24s0v%d" % i] for i in range(4)]
    assert all(vf["rdma_device"] and vf["driver"] == "mlx5_core" for vf in result["vfs"])
    again = run(monkeypatch, dgx, pci_address="18:00.0", num_vfs=4, vf_defaults={"link_state": "auto"})
    assert again["changed"] is False and again["actions"] == []
    checked = run(monkeypatch, dgx, check=True, netdev="ibp24s0", num_vfs=4, vf_defaults={"link_state": "auto"})
    assert checked["changed"] is False


def test_ethernet_attributes(monkeypatch, roce):
    args = dict(netdev="ens1f0np0", num_vfs=3, vf_defaults={"trust": True, "spoofchk": False},
                vfs=[{"index": 0, "vlan": 100, "qos": 3}, {"index": 2, "mac": "02:11:22:33:44:55", "link_state": "enable"}])
    run(monkeypatch, roce, **args)
    shown = json.loads(__import__("subprocess").run(["ip", "-j", "link", "show", "ens1f0np0"], capture_output=True,
                                                    text=True, check=True).stdout)[0]["vfinfo_list"]
    assert shown[0]["vlan_list"] == [{"vlan": 100, "qos": 3}] and shown[0]["trust"] is True
    assert shown[2]["address"] == "02:11:22:33:44:55" and shown[2]["link_state"] == "enable"
    assert run(monkeypatch, roce, **args)["changed"] is False
    args["vfs"][0]["vlan"] = 200
    changed = run(monkeypatch, roce, **args)
    assert changed["actions"] == [{"action": "set_vf", "target": "ens1f0np0 vf 0", "vlan": 200, "qos": 3}]


def test_count_change_needs_allow_vf_reset_and_names_vfs_in_use(monkeypatch, dgx):
    run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=2)
    dgx.call({"cmd": "ip_link_set", "dev": "ibp24s0v1", "up": True})
    failure = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=4, expect=ModuleFail)
    assert "from 2 to 4" in failure["msg"] and "VF 1 (netdev ibp24s0v1 is up)" in failure["msg"]
    assert "allow_vf_reset=true" in failure["msg"]
    assert pf_state(dgx)["numvfs"] == 2
    result = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=4, allow_vf_reset=True)
    assert [a["value"] for a in result["actions"] if a["action"] == "write"] == ["0", "4"]
    assert pf_state(dgx)["numvfs"] == 4


def test_removing_all_vfs_warns_about_vfs_in_use(monkeypatch, dgx):
    run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=2)
    dgx.call({"cmd": "ip_link_set", "dev": "ibp24s0v0", "up": True})
    result = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=0)
    assert pf_state(dgx)["numvfs"] == 0
    assert any("VF 0 (netdev ibp24s0v0 is up)" in w for w in result["warnings"])


@pytest.mark.parametrize("args, message", [
    ({"netdev": "ib9", "num_vfs": 1}, "netdev: there is no network interface 'ib9'"),
    ({"rdma_device": "mlx5_99", "num_vfs": 1}, "rdma_device: there is no RDMA device 'mlx5_99'"),
    ({"pci_address": "0000:77:00.0", "num_vfs": 1}, "pci_address: there is no PCI device 0000:77:00.0"),
    ({"pci_address": "zz", "num_vfs": 1}, "is not a PCI address"),
    ({"netdev": "../x", "num_vfs": 1}, "is not a valid network interface name"),
    ({"netdev": "lo", "num_vfs": 1}, "there is no network interface"),
    ({"netdev": "ibp24s0", "num_vfs": -1}, "num_vfs must be a whole number >= 0"),
    ({"netdev": "ibp24s0", "num_vfs": 17}, "above sriov_totalvfs 16"),
    ({"netdev": "ibp24s0", "num_vfs": "2.5"}, "num_vfs"),
    ({"netdev": "ibp24s0", "num_vfs": "many"}, "num_vfs"),
    ({"netdev": "ibp24s0", "pci_address": IB_PF, "num_vfs": 1}, "mutually exclusive"),
    ({"num_vfs": 1}, "one of the following is required: netdev, rdma_device, pci_address"),
    ({"netdev": "ibp24s0"}, "missing required arguments: num_vfs"),
    ({"netdev": "ibp24s0", "num_vfs": 1, "vf_defaults": {"vlan": 10}}, "only exist on Ethernet"),
    ({"netdev": "ibp24s0", "num_vfs": 1, "vfs": [{"index": 1, "link_state": "auto"}]}, "vfs[0].index"),
    ({"netdev": "ibp24s0", "num_vfs": 1, "vf_defaults": {"link_state": "up"}}, "link_state"),
    ({"netdev": "ibp24s0", "num_vfs": 1, "vf_defaults": {"colour": 1}}, "colour"),
    ({"netdev": "enp41s0f0np0", "num_vfs": 1},
     "no SR-IOV capability (no sriov_totalvfs): enable SRIOV_EN in the NIC firmware; firmware of 0000:29:00.0 is not ready"),
    ({"netdev": "ibp24s0", "num_vfs": 1, "host_root": "/nonexistent"}, "does not exist"),
])
def test_bad_input_fails_before_any_write(monkeypatch, dgx, args, message):
    failure = run(monkeypatch, dgx, expect=ModuleFail, **args)
    assert message in failure["msg"]
    assert all(pf["numvfs"] == 0 for pf in dgx.call({"cmd": "dump"})["pfs"].values())


def test_a_vf_instead_of_a_pf(monkeypatch, dgx):
    run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=1)
    for args in ({"netdev": "ibp24s0v0"}, {"pci_address": "0000:18:00.1"}):
        failure = run(monkeypatch, dgx, num_vfs=1, expect=ModuleFail, **args)
        assert "is a VF (of PF 0000:18:00.0); give its PF" in failure["msg"]


def test_switchdev_pf_is_refused(monkeypatch, roce):
    roce.call({"cmd": "devlink_eswitch_set", "bdf": "0000:01:00.0", "mode": "switchdev"})
    failure = run(monkeypatch, roce, netdev="ens1f0np0", num_vfs=2, expect=ModuleFail)
    assert "switchdev eswitch mode" in failure["msg"] and "mode legacy" in failure["msg"]
    assert pf_state(roce, "0000:01:00.0")["numvfs"] == 0
    assert run(monkeypatch, roce, netdev="ens1f1np1", num_vfs=1)["observed"]["eswitch_mode"] == "legacy"


def test_firmware_not_ready_is_a_failure(monkeypatch, dgx):
    dgx.call({"cmd": "mstconfig_set", "bdf": "0000:29:00.0", "params": {"SRIOV_EN": "1", "NUM_OF_VFS": "4"}})
    failure = run(monkeypatch, dgx, pci_address="0000:29:00.0", num_vfs=2, expect=ModuleFail)
    assert "not ready for SR-IOV" in failure["msg"] and "staged for the next boot" in failure["msg"]
    assert failure["details"]["reboot_required"] is True
    dgx.reboot()
    assert run(monkeypatch, dgx, pci_address="0000:29:00.0", num_vfs=2)["changed"] is True
    too_many = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=16, firmware_check="always")
    assert too_many["changed"] is True


def test_vfs_that_do_not_appear_are_reported(monkeypatch, dgx):
    dgx.call({"cmd": "set_delay", "name": "vf_probe", "seconds": 30})
    failure = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=2, timeout=1, expect=ModuleFail)
    assert "after 1s not every VF of 0000:18:00.0 appeared" in failure["msg"]
    assert "VF 0 (0000:18:00.1): no driver bound" in failure["msg"]


NUMVFS_FAULT = "sys/bus/pci/devices/%s/sriov_numvfs" % IB_PF


@pytest.mark.parametrize("errno_name", ["EBUSY", "ENOSPC", "EIO", "EACCES"])
def test_fault_on_the_zero_write_leaves_the_pf_as_it_was(monkeypatch, dgx, errno_name):
    run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=2, vf_defaults={"link_state": "auto"})
    guids(monkeypatch, dgx, netdev="ibp24s0")
    admin_before = pf_state(dgx)["admin"]
    dgx.call({"cmd": "fault_add", "path": NUMVFS_FAULT, "op": "write", "errno": errno_name, "count": 1})
    failure = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=4, allow_vf_reset=True, expect=ModuleFail)
    assert "writing 0 to" in failure["msg"] and errno_name in failure["msg"] and "restored: 2 VFs" in failure["msg"]
    assert pf_state(dgx)["numvfs"] == 2 and pf_state(dgx)["admin"] == admin_before


@pytest.mark.parametrize("fault", [{"errno": "EBUSY"}, {"errno": "ENOSPC"}, {"errno": "EIO"}, {"errno": "EACCES"},
                                   {"action": "hang", "seconds": 1.5}])
def test_fault_after_the_reset_puts_previous_vfs_and_guids_back(monkeypatch, dgx_threads, fault):
    """0 was written (the VFs and their GUIDs are gone), then writing the new count fails: the module recreates the
    previous VFs and gives them back their attributes and GUIDs, and says so."""
    dgx = dgx_threads
    run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=2, vf_defaults={"link_state": "auto"})
    set_guids = [row["guid"] for row in guids(monkeypatch, dgx, netdev="ibp24s0")["guids"]]
    admin_before = pf_state(dgx)["admin"]
    monkeypatch.setattr("ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov.host.write_with_timeout",
                        _fault_after_zero(dgx, dict(fault, path=NUMVFS_FAULT, op="write", count=1)))
    timeout = 1 if fault.get("action") == "hang" else 60  # only a hang needs the short timeout to end
    failure = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=4, allow_vf_reset=True, timeout=timeout, expect=ModuleFail)
    assert "writing 4 to" in failure["msg"] and "restored: 2 VFs" in failure["msg"], failure["msg"]
    assert pf_state(dgx)["numvfs"] == 2 and pf_state(dgx)["admin"] == admin_before
    after = guids(monkeypatch, dgx, netdev="ibp24s0", )
    assert after["changed"] is False and [row["guid"] for row in after["guids"]] == set_guids
    assert [vf["node_guid"] for vf in after["observed"]["vfs"]] == set_guids, "the VFs show them (re-bound)"


def _fault_after_zero(node, fault):
    """Let the first write of 0 through, then arm a simulator fault for the next write."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as _sriov_host  # pylint: disable=import-outside-toplevel
    real = _sriov_host.write_with_timeout
    armed = []

    def write(host, path, value, timeout):
        real(host, path, value, timeout)
        if value == "0" and path.endswith("sriov_numvfs") and not armed:
            armed.append(node.call(dict(fault, cmd="fault_add")))
    return write


def test_hung_write_times_out_and_restores(monkeypatch, dgx_threads):
    dgx = dgx_threads
    run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=2)
    dgx.call({"cmd": "fault_add", "path": "sys/bus/pci/devices/%s/sriov_numvfs" % IB_PF, "op": "write",
              "action": "hang", "seconds": 3, "count": 1})
    failure = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=0, timeout=1, expect=ModuleFail)
    assert "ETIMEDOUT" in failure["msg"]
    assert pf_state(dgx)["numvfs"] == 2


def test_restore_impossible_says_what_state_the_pf_is_in(monkeypatch, dgx):
    run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=2)
    # 0 goes through, then every write of a non-zero count fails: the PF cannot get its 2 VFs back
    dgx.call({"cmd": "fault_add", "path": "sys/bus/pci/devices/%s/sriov_numvfs" % IB_PF, "op": "write",
              "errno": "EIO", "count": 3})
    monkeypatch.setattr("ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov.host.write_with_timeout",
                        _pass_zero(dgx))
    failure = run(monkeypatch, dgx, netdev="ibp24s0", num_vfs=4, allow_vf_reset=True, expect=ModuleFail)
    assert "NOT restored" in failure["msg"] and "now reads 0 (it was 2)" in failure["msg"]
    assert pf_state(dgx)["numvfs"] == 0


def _pass_zero(node):
    """Writes of "0" bypass the injected fault (write it directly), others hit it."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import host as _sriov_host  # pylint: disable=import-outside-toplevel
    real = _sriov_host.write_with_timeout

    def write(host, path, value, timeout):
        if value == "0":
            node.call({"cmd": "fault_clear"})
            real(host, path, value, timeout)
            node.call({"cmd": "fault_add", "path": "sys/bus/pci/devices/%s/sriov_numvfs" % IB_PF, "op": "write",
                       "errno": "EIO"})
            return
        real(host, path, value, timeout)
    return write


def test_reboot_forgets_vfs_and_a_rerun_recreates_them(monkeypatch, dgx):
    args = dict(netdev="ibp24s0", num_vfs=2, vf_defaults={"link_state": "auto"})
    run(monkeypatch, dgx, **args)
    dgx.reboot()
    drift = run(monkeypatch, dgx, check=True, **args)
    assert drift["changed"] is True and drift["observed"]["num_vfs"] == 0
    assert run(monkeypatch, dgx, **args)["changed"] is True
    assert run(monkeypatch, dgx, **args)["changed"] is False
