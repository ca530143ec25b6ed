"""ib_vf_guids on simulated nodes: OFED sysfs and netlink paths, drift, schemes, pool file, conflicts, faults."""

import json
import pathlib
import shutil
import subprocess

import pytest
import yaml

import hwsim

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import guid as _guid, host as _sriov_host
from ansible_collections.rdma.k8s_node.plugins.module_utils import _host as _hostio
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError
from ansible_collections.rdma.k8s_node.plugins.modules import ib_vf_guids, sriov_vfs
from unit.plugins.modules.harness import ModuleFail, run_module
from unit.plugins.modules.simnode import sim_node

IB_PF = "0000:18:00.0"
PF_GUID = 0xA088C20300551E20
POOL = "sriov-operator/infiniband/guids"


def inbox_spec(tmp_path):
    """dgx-h100 with inbox drivers: no OFED, so no sriov/<n>/ sysfs and GUIDs go through netlink."""
    spec = yaml.safe_load(pathlib.Path(hwsim.load("dgx-h100").path).read_text())
    del spec["ofed"]
    path = tmp_path / "dgx-inbox.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(params=["ofed", "inbox"])
def node(request, tmp_path, monkeypatch):
    spec = "dgx-h100" if request.param == "ofed" else inbox_spec(tmp_path)
    with sim_node(spec, tmp_path, monkeypatch) as sim:
        sim.via = "ofed_sysfs" if request.param == "ofed" else "netlink"
        make_vfs(monkeypatch, sim, 3)
        yield sim


@pytest.fixture
def dgx(tmp_path, monkeypatch):
    with sim_node("dgx-h100", tmp_path, monkeypatch) as sim:
        make_vfs(monkeypatch, sim, 2)
        yield sim


def make_vfs(monkeypatch, sim, count, netdev="ibp24s0"):
    args = {"host_root": str(sim.root), "netdev": netdev, "num_vfs": count, "vf_defaults": {"link_state": "auto"}}
    run_module(monkeypatch, sriov_vfs.main, args)


def run(monkeypatch, sim, check=False, expect=None, **args):
    args.setdefault("host_root", str(sim.root))
    kwargs = {"expect": expect} if expect else {}
    return run_module(monkeypatch, ib_vf_guids.main, args, check=check, diff=True, **kwargs)


def admin(sim, bdf=IB_PF):
    return dict((int(k), v["node_guid"]) for k, v in sim.call({"cmd": "dump"})["pfs"][bdf]["admin"].items())


def vf_state(sim, index, pf_bdf=IB_PF):
    vf = sim.root / "sys/bus/pci/devices" / pf_bdf / ("virtfn%d" % index)
    ibdev = next((vf / "infiniband").iterdir())
    return (ibdev / "node_guid").read_text().strip(), (ibdev / "ports/1/state").read_text().strip()


def test_zero_guid_is_drift_then_set_then_idempotent(monkeypatch, node):
    drift = run(monkeypatch, node, check=True, netdev="ibp24s0")
    assert drift["changed"] is True and drift["observed"]["zero_guid_vfs"] == [0, 1, 2]
    assert drift["observed"]["via"] == node.via
    assert [a["action"] for a in drift["actions"]] == ["set_guid", "rebind"] * 3
    assert "vf 0: 00:00:00:00:00:00:00:00" in drift["diff"]["before"]
    assert set(admin(node).values()) == {"00:00:00:00:00:00:00:00"}
    assert vf_state(node, 0) == ("0000:0000:0000:0000", "1: DOWN")

    result = run(monkeypatch, node, netdev="ibp24s0")
    wanted = [_guid.format_guid(_guid.derive(PF_GUID, i)) for i in range(3)]
    assert [row["guid"] for row in result["guids"]] == wanted
    assert [admin(node)[i] for i in range(3)] == wanted
    assert vf_state(node, 1) == ("02ea:0300:551e:2001", "4: ACTIVE"), "re-bound: the VF shows the GUID, port comes up"
    assert result["guids"][0]["netdevs"] == ["ibp24s0v0"] and result["guids"][0]["rdma_device"]

    again = run(monkeypatch, node, rdma_device="mlx5_0")
    assert again["changed"] is False and again["actions"] == []


def test_guids_survive_nothing_but_come_back_identical_after_reboot(monkeypatch, dgx):
    first = run(monkeypatch, dgx, netdev="ibp24s0")["guids"]
    dgx.reboot()
    make_vfs(monkeypatch, dgx, 2)
    assert run(monkeypatch, dgx, check=True, netdev="ibp24s0")["changed"] is True
    assert run(monkeypatch, dgx, netdev="ibp24s0")["guids"] == first


def test_guid_set_but_not_rebound_is_drift(monkeypatch, dgx):
    dgx.call({"cmd": "ip_link_set_vf", "dev": "ibp24s0", "vf": 0, "node_guid": _guid.format_guid(_guid.derive(PF_GUID, 0)),
              "port_guid": _guid.format_guid(_guid.derive(PF_GUID, 0))})
    drift = run(monkeypatch, dgx, check=True, netdev="ibp24s0")
    steps = [(a["action"], a.get("reason")) for a in drift["actions"]][:2]
    assert steps == [("rebind", None), ("set_guid", "zero GUID")]


def test_list_scheme_and_prefix(monkeypatch, dgx):
    wanted = ["06:00:00:00:00:00:00:0a", "06:00:00:00:00:00:00:0b"]
    result = run(monkeypatch, dgx, netdev="ibp24s0", scheme="list", guids=wanted + ["06:00:00:00:00:00:00:0c"])
    assert [row["guid"] for row in result["guids"]] == wanted
    prefixed = run(monkeypatch, dgx, netdev="ibp24s0", guid_prefix="0a")
    assert prefixed["guids"][1]["guid"] == "0a:ea:03:00:55:1e:20:01"


def test_operator_pool_file_read_and_export(monkeypatch, dgx):
    (dgx.etc / "sriov-operator/infiniband").mkdir(parents=True)
    pool = dgx.etc / POOL
    # the operator resolves pfGuid by comparing it with each link's hardware address: the IPoIB netdev's 20 octets
    address = (dgx.root / "sys/class/net/ibp24s0/address").read_text().strip()
    pool.write_text(json.dumps([{"pfGuid": address,
                                 "guidsRange": {"start": "06:00:00:00:00:aa:00:00", "end": "06:00:00:00:00:aa:00:0f"}}]))
    result = run(monkeypatch, dgx, netdev="ibp24s0", scheme="pool_file")
    assert [row["guid"] for row in result["guids"]] == ["06:00:00:00:00:aa:00:00", "06:00:00:00:00:aa:00:01"]
    # the PF's 8-octet node GUID is no link's address: the operator refuses the whole file
    pool.write_text(json.dumps([{"pfGuid": "a0:88:c2:03:00:55:1e:20", "guids": ["06:00:00:00:00:00:00:01"]}]))
    failure = run(monkeypatch, dgx, netdev="ibp24s0", scheme="pool_file", expect=ModuleFail)
    assert "matches no network interface's hardware address" in failure["msg"]
    pool.write_text(json.dumps([{"pci_address": IB_PF, "guids": ["06:00:00:00:00:00:00:01"]}]))
    failure = run(monkeypatch, dgx, netdev="ibp24s0", scheme="pool_file", expect=ModuleFail)
    assert "'pci_address', which the operator's code does not read" in failure["msg"]

    pool.unlink()
    exported = run(monkeypatch, dgx, netdev="ibp24s0", export_pool_file=True)
    assert any(a["action"] == "create_file" for a in exported["actions"])
    entries = json.loads(pool.read_text())
    assert entries == [{"pciAddress": IB_PF, "guids": [row["guid"] for row in exported["guids"]]}]
    assert run(monkeypatch, dgx, netdev="ibp24s0", export_pool_file=True)["changed"] is False
    # the operator, reading that file, would assign exactly our GUIDs
    assert run(monkeypatch, dgx, netdev="ibp24s0", scheme="pool_file")["changed"] is False


def test_backup_files_map_the_pool_file_to_a_copy_of_its_old_content(monkeypatch, dgx):
    """backup_files is ``{edited path: backup path}`` on a run that replaces the pool file with backup=true, ``{}`` on
    a check-mode, no-op, new-file or backup=false run (RETURN)."""
    (dgx.etc / "sriov-operator/infiniband").mkdir(parents=True)
    pool = dgx.etc / POOL
    created = run(monkeypatch, dgx, netdev="ibp24s0", export_pool_file=True, backup=True)
    assert any(a["action"] == "create_file" for a in created["actions"]) and created["backup_files"] == {}
    old = pool.read_text()
    check = run(monkeypatch, dgx, netdev="ibp24s0", export_pool_file=True, guid_prefix="0a", backup=True, check=True)
    assert check["changed"] is True and check["backup_files"] == {} and pool.read_text() == old
    result = run(monkeypatch, dgx, netdev="ibp24s0", export_pool_file=True, guid_prefix="0a", backup=True)
    assert any(a["action"] == "update_file" for a in result["actions"])
    assert list(result["backup_files"]) == ["/etc/" + POOL]
    copy = result["backup_files"]["/etc/" + POOL]
    assert copy.startswith(str(dgx.root) + "/etc/" + POOL + ".") and copy.endswith("~")
    assert pathlib.Path(copy).read_text() == old and pool.read_text() != old
    again = run(monkeypatch, dgx, netdev="ibp24s0", export_pool_file=True, guid_prefix="0a", backup=True)
    assert again["changed"] is False and again["backup_files"] == {}
    plain = run(monkeypatch, dgx, netdev="ibp24s0", export_pool_file=True)
    assert plain["changed"] is True and plain["backup_files"] == {}
    assert len([p for p in pool.parent.iterdir() if p.name.endswith("~")]) == 1, "backup=false keeps no copy"


@pytest.mark.parametrize("args, message", [
    ({"netdev": "enp41s0f0np0"}, "is an Ethernet PF: VF node/port GUIDs only exist on InfiniBand"),
    ({"netdev": "ib7"}, "netdev: there is no network interface 'ib7'"),
    ({"netdev": "ibp24s0v0"}, "is a VF (of PF 0000:18:00.0)"),
    ({"netdev": "ibp24s0", "scheme": "list", "guids": ["02:00:00:00:00:00:00:01", "nonsense"]}, "guids[1]"),
    ({"netdev": "ibp24s0", "scheme": "list", "guids": ["02:00:00:00:00:00:00:01", "00:00:00:00:00:00:00:00"]}, "all zero"),
    ({"netdev": "ibp24s0", "scheme": "list", "guids": ["ff:ff:ff:ff:ff:ff:ff:ff", "02:00:00:00:00:00:00:01"]}, "all FF"),
    ({"netdev": "ibp24s0", "scheme": "list", "guids": ["02:00:00:00:00:00:00:01", "02:00:00:00:00:00:00:01"]},
     "VF 0 and VF 1 would both get GUID 02:00:00:00:00:00:00:01"),
    ({"netdev": "ibp24s0", "scheme": "list", "guids": ["02:00:00:00:00:00:00:01"]}, "lists 1 GUIDs but the PF has 2"),
    ({"netdev": "ibp24s0", "scheme": "list"}, "scheme is list but all of the following are missing: guids"),
    ({"netdev": "ibp24s0", "guids": ["02:00:00:00:00:00:00:01"]}, "guids is only used with scheme=list"),
    ({"netdev": "ibp24s0", "guid_prefix": "01"}, "locally-administered bit"),
    ({"netdev": "ibp24s0", "scheme": "pool_file"}, "does not exist"),
    ({"netdev": "ibp24s0", "scheme": "pool_file", "export_pool_file": True}, "use one or the other"),
    ({"netdev": "ibp24s0", "scheme": "random"}, "value of scheme must be one of"),
    ({"netdev": "ibp24s0", "exclude_guids": ["02:ea:03:00:55:1e:20:01"]}, "another node of the inventory"),
    ({"netdev": "ibp24s0", "scheme": "list", "guids": ["a0:88:c2:03:00:55:1e:20", "02:00:00:00:00:00:00:01"]},
     "is already used by the PF 0000:18:00.0 itself"),
    ({"netdev": "ibp24s0", "scheme": "list", "guids": ["a0:88:c2:03:00:55:1e:28", "02:00:00:00:00:00:00:01"]},
     "already used by mlx5_3 (node GUID)"),
])
def test_bad_input_fails_before_any_write(monkeypatch, dgx, args, message):
    failure = run(monkeypatch, dgx, expect=ModuleFail, **args)
    assert message in failure["msg"]
    assert set(admin(dgx).values()) == {"00:00:00:00:00:00:00:00"}


def test_guid_of_another_pfs_vf_is_a_conflict(monkeypatch, dgx):
    make_vfs(monkeypatch, dgx, 1, netdev="ibp64s0")
    taken = "02:00:00:00:00:00:00:42"
    dgx.call({"cmd": "ip_link_set_vf", "dev": "ibp64s0", "vf": 0, "node_guid": taken, "port_guid": taken})
    failure = run(monkeypatch, dgx, netdev="ibp24s0", scheme="list", guids=[taken, "02:00:00:00:00:00:00:43"],
                  expect=ModuleFail)
    assert "already used by VF 0 of ibp64s0" in failure["msg"]


def test_vf_in_use_is_not_rebound_without_allow_vf_reset(monkeypatch, dgx):
    dgx.call({"cmd": "ip_link_set", "dev": "ibp24s0v1", "up": True})
    failure = run(monkeypatch, dgx, netdev="ibp24s0", expect=ModuleFail)
    assert "VF 1 (netdev ibp24s0v1 is up)" in failure["msg"] and "allow_vf_reset=true" in failure["msg"]
    assert run(monkeypatch, dgx, netdev="ibp24s0", allow_vf_reset=True)["changed"] is True


FAULTS = [
    ("ofed", {"path": "sys/bus/pci/devices/%s/sriov/1/node" % IB_PF, "errno": "EIO"}, "EIO"),
    ("ofed", {"path": "sys/bus/pci/devices/%s/sriov/1/port" % IB_PF, "errno": "EACCES"}, "EACCES"),
    ("ofed", {"path": "sys/bus/pci/devices/%s/sriov/1/node" % IB_PF, "action": "hang", "seconds": 1.5}, "ETIMEDOUT"),
    ("inbox", {"path": "rtnl/ibp24s0/vf/1", "errno": "ENOSPC"}, "No space left on device"),
    ("inbox", {"path": "rtnl/ibp24s0/vf/1", "errno": "EBUSY"}, "Device or resource busy"),
    ("ofed", {"path": "sys/bus/pci/drivers/mlx5_core/bind", "errno": "EIO"}, "binding it again failed: EIO"),
    ("inbox", {"path": "sys/bus/pci/drivers/mlx5_core/unbind", "errno": "EBUSY"}, "re-binding VF 0"),
]


@pytest.mark.parametrize("flavour, fault, message", FAULTS)
def test_write_faults_restore_previous_guids(monkeypatch, tmp_path, flavour, fault, message):
    spec = "dgx-h100" if flavour == "ofed" else inbox_spec(tmp_path)
    with sim_node(spec, tmp_path, monkeypatch, threads=fault.get("action") == "hang") as sim:
        make_vfs(monkeypatch, sim, 3)
        old = "02:00:00:00:00:00:00:0%d"
        run(monkeypatch, sim, netdev="ibp24s0", scheme="list", guids=[old % i for i in range(1, 4)])
        before = admin(sim)
        sim.call(dict(fault, cmd="fault_add", op="write", count=1))
        # a hang needs the short timeout to end; an errno fault must not meet it while the restore runs on a loaded
        # machine (a CI run saw the restore's own write time out after 1 s)
        timeout = 1 if fault.get("action") == "hang" else 60
        failure = run(monkeypatch, sim, netdev="ibp24s0", timeout=timeout, expect=ModuleFail)
        assert message in failure["msg"], failure["msg"]
        assert "previous GUIDs restored" in failure["msg"] or "no GUID had been changed yet" in failure["msg"]
        assert admin(sim) == before
        shown = [vf_state(sim, i)[0] for i in range(3)]
        assert shown == ["0200:0000:0000:000%d" % i for i in range(1, 4)], "every VF bound again, showing its old GUID"


def naming_spec(tmp_path, naming, udev_rename=0.0):
    """dgx-h100 with a VF netdev naming scheme (hwsim README "VF netdev names") and udev's rename delay."""
    spec = yaml.safe_load(pathlib.Path(hwsim.load("dgx-h100").path).read_text())
    spec["vf_netdev_naming"] = naming
    spec.setdefault("delays", {})["udev_rename"] = udev_rename
    path = tmp_path / ("dgx-%s.yaml" % naming)
    path.write_text(yaml.safe_dump(spec))
    return path


def vf_netdevs(sim, index):
    return sorted(p.name for p in (sim.root / "sys/bus/pci/devices" / IB_PF / ("virtfn%d" % index) / "net").iterdir())


def test_kernel_names_renamed_by_the_rebind_are_found_by_pci_address(monkeypatch, tmp_path):
    """No udev rule names VFs: each re-bound VF takes the lowest free ib%d, so with VF 0 left unbound (an
    interrupted run) VF 1 and VF 2 come back one number lower and VF 0 takes what is left."""
    with sim_node(naming_spec(tmp_path, "kernel"), tmp_path, monkeypatch) as sim:
        make_vfs(monkeypatch, sim, 3)
        assert [vf_netdevs(sim, i) for i in range(3)] == [["ib0"], ["ib1"], ["ib2"]]
        (sim.root / "sys/bus/pci/drivers/mlx5_core/unbind").write_text("0000:18:00.1")
        result = run(monkeypatch, sim, netdev="ibp24s0")
        assert result["netdev_renames"] == [
            {"vf": 0, "pci_address": "0000:18:00.1", "old": [], "new": ["ib2"]},
            {"vf": 1, "pci_address": "0000:18:00.2", "old": ["ib1"], "new": ["ib0"]},
            {"vf": 2, "pci_address": "0000:18:00.3", "old": ["ib2"], "new": ["ib1"]},
        ]
        rebinds = dict((a["vf"], (a["netdevs"], a["netdevs_after"])) for a in result["actions"]
                       if a["action"] in ("rebind", "bind"))
        assert rebinds == {0: ([], ["ib2"]), 1: (["ib1"], ["ib0"]), 2: (["ib2"], ["ib1"])}
        assert [row["netdevs"] for row in result["guids"]] == [["ib2"], ["ib0"], ["ib1"]]
        assert [vf_netdevs(sim, i) for i in range(3)] == [["ib2"], ["ib0"], ["ib1"]]
        assert "warnings" not in result
        assert run(monkeypatch, sim, netdev="ibp24s0")["changed"] is False


def test_predictable_names_come_back_after_udev_renames_the_new_netdev(monkeypatch, tmp_path):
    """udev renames each re-bound VF's new netdev from ib0 to ibp24s0vN 0.3 s later: the module waits for it and
    reports the final names (unchanged), never the transient kernel name."""
    with sim_node(naming_spec(tmp_path, "predictable"), tmp_path, monkeypatch) as sim:
        make_vfs(monkeypatch, sim, 2)
        before = [vf_netdevs(sim, i) for i in range(2)]
        assert before == [["ibp24s0v0"], ["ibp24s0v1"]]
        sim.call({"cmd": "set_delay", "name": "udev_rename", "seconds": 0.3})
        result = run(monkeypatch, sim, netdev="ibp24s0")
        assert result["netdev_renames"] == [] and "warnings" not in result
        assert [a["netdevs_after"] for a in result["actions"] if a["action"] == "rebind"] == before
        assert [row["netdevs"] for row in result["guids"]] == before


def test_udev_rename_that_never_comes_is_a_warning_with_the_kernel_name(monkeypatch, tmp_path):
    monkeypatch.setattr(_sriov_host, "RENAME_SETTLE", 0.5)
    with sim_node(naming_spec(tmp_path, "predictable"), tmp_path, monkeypatch) as sim:
        make_vfs(monkeypatch, sim, 1)
        sim.call({"cmd": "set_delay", "name": "udev_rename", "seconds": 30})
        result = run(monkeypatch, sim, netdev="ibp24s0")
        assert result["netdev_renames"] == [{"vf": 0, "pci_address": "0000:18:00.1", "old": ["ibp24s0v0"],
                                             "new": ["ib0"]}]
        assert any("udev has not renamed the new netdev of VF 0" in w and "ib0" in w for w in result["warnings"])
        assert vf_state(sim, 0)[1] == "4: ACTIVE", "the GUID took effect whatever the netdev is called"


class _Commands:
    """What host_guids uses of a module: get_bin_path and run_command (``ip`` can be made to be missing)."""

    def __init__(self, without=()):
        self.without = without
        self.calls = []

    def get_bin_path(self, name, required=False):  # pylint: disable=unused-argument
        return None if name in self.without else shutil.which(name)

    def run_command(self, argv, data=None, check_rc=False):  # pylint: disable=unused-argument
        self.calls.append(argv[1:])
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr


def test_host_guids_sees_other_pfs_and_devices_never_this_pfs_own(monkeypatch, dgx):
    """Every other RDMA device's node GUID and every other IB PF's VF admin GUIDs (one ``ip -j link show`` for all
    of them); this PF, its VFs and their GUIDs are never 'taken' - given as own_vfs or found by their physfn link."""
    make_vfs(monkeypatch, dgx, 2, netdev="ibp64s0")
    run(monkeypatch, dgx, netdev="ibp24s0")
    other = "02:00:00:00:00:00:00:42"
    dgx.call({"cmd": "ip_link_set_vf", "dev": "ibp64s0", "vf": 1, "node_guid": other, "port_guid": other})
    host = _hostio.HostRoot(str(dgx.root))
    module = _Commands()
    own = _sriov_host.observe(host, _sriov_host.resolve_pf(host, {"netdev": "ibp24s0"}))["vfs"]
    taken = _sriov_host.host_guids(host, _hostio.HostCommands(module, host), IB_PF, own)
    assert module.calls == [["-j", "link", "show"]], "one dump for every PF"
    assert taken[_guid.parse_guid(other)] == "VF 1 of ibp64s0"
    classes = dgx.root / "sys/class/infiniband"
    others = dict((name, int((classes / name / "node_guid").read_text().strip().replace(":", ""), 16))
                  for name in sorted(p.name for p in classes.iterdir())
                  if not (classes / name / "device").resolve().name.startswith("0000:18:00."))
    assert len(others) >= 13, "the other PFs' and the other PF's VFs' RDMA devices"
    assert all(taken.get(guid) == "%s (node GUID)" % name for name, guid in others.items() if guid), taken
    mine = [_guid.derive(PF_GUID, i) for i in range(2)] + [PF_GUID]
    assert not [guid for guid in mine if guid in taken], "this PF's own GUIDs are not taken"
    assert _sriov_host.host_guids(host, _hostio.HostCommands(_Commands(), host), IB_PF) == taken, \
        "without own_vfs the physfn links tell the same"
    missing = _Commands(without=("ip",))
    with pytest.raises(HostReadError, match="ip is not installed: the VF GUIDs of ibp64s0 cannot be read"):
        _sriov_host.host_guids(host, _hostio.HostCommands(missing, host), IB_PF, own)
    dgx.call({"cmd": "reset"})
    assert _sriov_host.host_guids(host, _hostio.HostCommands(missing, host), IB_PF, []), \
        "no other PF has VFs: nothing needs ip"


def test_observe_vf_path_is_the_resolved_virtfn_link(dgx):
    host = _hostio.HostRoot(str(dgx.root))
    pf = _sriov_host.resolve_pf(host, {"netdev": "ibp24s0"})
    vfs = _sriov_host.observe(host, pf)["vfs"]
    assert [vf["path"] for vf in vfs] == [host.resolve("%s/virtfn%d" % (pf["path"], i)) for i in range(2)]
    assert [vf["pci_address"] for vf in vfs] == ["0000:18:00.1", "0000:18:00.2"]
    assert _sriov_host.observe_vf(host, pf, 2) is None
