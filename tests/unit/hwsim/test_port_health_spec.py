"""Port health in the simulator (issue 19 item 4): spec keys ``phys_state`` and ``counters`` per function and
``fw_ver`` per NIC card, and the PMA ``counters/`` directory every RDMA port has (drivers/infiniband/core/sysfs.c)."""

import json
from pathlib import Path

import pytest
import yaml

import hwsim
from hwsim import control, spec as hwspec

SPECS = Path(hwspec.__file__).resolve().parent / "specs"


def _spec(tmp_path, edit):
    data = yaml.safe_load((SPECS / "roce-cx6dx.yaml").read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "faulty.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _nic(data):
    """The first NIC entry of a spec (a dict), depth first."""
    todo = list(data["pci"])
    while todo:
        item = todo.pop(0)
        if "nic" in item:
            return item
        todo[:0] = item.get("children") or []
    raise AssertionError("no NIC in the spec")


def _faulty(data):
    nic = _nic(data)
    nic["fw_ver"] = "22.38.1002"
    nic["functions"][0].update({"phys_state": "Polling", "port_state": "DOWN",
                                "counters": {"symbol_error": 1234, "link_downed": 255}})


def test_defaults_every_port_has_zero_counters_and_linkup(tmp_path):
    hwsim.render("roce-cx6dx", tmp_path)
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    assert (port / "phys_state").read_text() == "5: LinkUp\n"
    names = sorted(p.name for p in (port / "counters").iterdir())
    assert names == sorted(hwspec.PMA_COUNTERS)
    assert set((port / "counters" / n).read_text() for n in names) == {"0\n"}
    assert (tmp_path / "sys/class/infiniband/mlx5_0/fw_ver").read_text() == "22.39.1002\n"


def test_phys_state_counters_and_fw_ver_from_the_spec(tmp_path):
    hwsim.render(str(_spec(tmp_path, _faulty)), tmp_path / "root")
    dev = tmp_path / "root/sys/class/infiniband/mlx5_0"
    assert (dev / "ports/1/phys_state").read_text() == "2: Polling\n"
    assert (dev / "ports/1/state").read_text() == "1: DOWN\n"
    assert (dev / "ports/1/counters/symbol_error").read_text() == "1234\n"
    assert (dev / "ports/1/counters/link_downed").read_text() == "255\n"
    assert (dev / "ports/1/counters/port_rcv_errors").read_text() == "0\n"
    assert (dev / "fw_ver").read_text() == "22.38.1002\n"
    # the other port of the card keeps the defaults; the firmware is the card's
    other = tmp_path / "root/sys/class/infiniband/mlx5_1"
    assert (other / "ports/1/phys_state").read_text() == "5: LinkUp\n"
    assert (other / "fw_ver").read_text() == "22.38.1002\n"
    node = hwsim.Node(hwsim.load(str(tmp_path / "faulty.yaml")))
    shown = json.loads(control.handle(node, json.dumps({"cmd": "rdma_dev_show"})))["result"]
    assert set(dev["fw"] for dev in shown) == {"22.38.1002"}


@pytest.mark.parametrize("edit,message", [
    (lambda f: f.update(phys_state="Down"), "phys_state must be one of"),
    (lambda f: f.update(counters={"symbol_errors": 1}), "unknown counter"),
    (lambda f: f.update(counters={"link_downed": 256}), "0..255"),
    (lambda f: f.update(counters={"excessive_buffer_overrun_errors": 16}), "0..15"),
    (lambda f: f.update(counters={"symbol_error": -1}), "0..65535"),
    (lambda f: f.update(counters=[1]), "must be a mapping"),
])
def test_bad_port_keys_are_spec_errors(tmp_path, edit, message):
    path = _spec(tmp_path, lambda data: edit(_nic(data)["functions"][0]))
    with pytest.raises(hwsim.SpecError, match=message):
        hwsim.load(str(path))


def test_bad_fw_ver_is_a_spec_error(tmp_path):
    path = _spec(tmp_path, lambda data: _nic(data).update(fw_ver=""))
    with pytest.raises(hwsim.SpecError, match="fw_ver"):
        hwsim.load(str(path))
