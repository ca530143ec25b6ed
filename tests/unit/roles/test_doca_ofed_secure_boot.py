"""The doca_ofed role stops before any change on a Secure Boot node without a MOK key: the role's own tasks run
in check mode by ansible-playbook against host roots in tmp_path (efivarfs files with the real layout: 4 attribute
bytes, then the value), one local host per case in one run. The message names Secure Boot, the variables and how to
enroll the key; a MOK key that is not on the node is refused too; Secure Boot off (or the check turned off) is no
reason, while the role's other checks still run."""

import json
import pathlib
import subprocess

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.module_utils import _secureboot

REPO = pathlib.Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
STOP = "Stop before any change when the node is not ready for DOCA-OFED"
UNREADABLE = "drivers_unreadable"
CASES = {
    "sb_no_key": (b"\x01", {}),
    "sb_key_missing": (b"\x01", {"doca_ofed_mok_signing_key": "/etc/MOK.priv", "doca_ofed_mok_certificate": "/etc/MOK.der"}),
    "sb_off": (b"\x00", {}),
    "sb_check_off": (b"\x01", {"doca_ofed_secure_boot_check": False}),
}


@pytest.fixture(scope="module")
def messages(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("doca_sb")
    repo = tmp_path / "mirror"
    repo.mkdir()
    (repo / "Release").write_text("Origin: test\n", encoding="utf-8")
    hosts = {}
    for name, (value, extra) in CASES.items():
        root = tmp_path / name
        efivars = root / "sys" / "firmware" / "efi" / "efivars"
        efivars.mkdir(parents=True)
        (efivars / ("SecureBoot-" + _secureboot.GLOBAL_GUID)).write_bytes(b"\x06\x00\x00\x00" + value)
        (efivars / ("SetupMode-" + _secureboot.GLOBAL_GUID)).write_bytes(b"\x06\x00\x00\x00\x00")
        (root / "etc").mkdir()
        (root / "etc" / "MOK.priv").write_text("key\n", encoding="utf-8")
        hosts[name] = dict({"ansible_connection": "local", "doca_ofed_host_root": str(root)}, **extra)
    # a node whose driver stack rdma_facts cannot read (modules-load.d is a link loop: the drivers layer's reader
    # fails, the rest of the facts come back): the role stops at its facts task, not in a template error later
    unreadable = tmp_path / UNREADABLE
    (unreadable / "etc").mkdir(parents=True)
    (unreadable / "etc" / "modules-load.d").symlink_to("modules-load.d")
    hosts[UNREADABLE] = {"ansible_connection": "local", "doca_ofed_host_root": str(unreadable)}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}), encoding="utf-8")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "all", "gather_facts": False,
        "vars": {"doca_ofed_repo_url": "file://%s/" % repo, "doca_ofed_gpg_key": "not a key"},
        "roles": ["rdma.k8s_node.doca_ofed"]}]), encoding="utf-8")
    env = {"ANSIBLE_COLLECTIONS_PATH": str(REPO / ".cache" / "collections"), "ANSIBLE_HOME": str(tmp_path / "home"),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"), "ANSIBLE_CONFIG": str(tmp_path / "none.cfg"),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_NOCOLOR": "1", "PATH": "/usr/bin:/bin",
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
    (tmp_path / "none.cfg").write_text("[defaults]\n", encoding="utf-8")
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), "--check", "-i", str(tmp_path / "inventory.yml"), str(playbook)],
                          env=env, capture_output=True, text=True, check=False, cwd=str(tmp_path), timeout=600)
    assert done.returncode != 0, "the role must stop (no kernel headers, no key): " + done.stdout[-2000:]
    tasks = json.loads(done.stdout)["plays"][0]["tasks"]
    out = {}
    for name in CASES:
        failed = [t for t in tasks if t["hosts"].get(name, {}).get("failed")]
        assert [t["task"]["name"].split(" : ")[-1] for t in failed] == [STOP], name
        ran = [t["task"]["name"] for t in tasks if name in t["hosts"] and not t["hosts"][name].get("skipped")]
        assert not [t for t in ran if "DKMS sign" in t or "Install" in t], "nothing is written before the checks"
        out[name] = failed[0]["hosts"][name]["msg"]
    out[UNREADABLE] = [(t["task"]["name"].split(" : ")[-1], t["hosts"][UNREADABLE]) for t in tasks
                       if t["hosts"].get(UNREADABLE, {}).get("failed")]
    return out


def test_secure_boot_without_a_key_is_refused(messages):
    msg = messages["sb_no_key"]
    assert "Secure Boot: SecureBoot enabled" in msg
    assert "doca_ofed_mok_signing_key" in msg and "mokutil --import" in msg and "MokManager" in msg
    assert msg.endswith("Nothing was changed.")


def test_a_mok_key_not_on_the_node_is_refused(messages):
    msg = messages["sb_key_missing"]
    assert "Secure Boot: " not in msg
    assert "the MOK file(s) /etc/MOK.der do not exist" in msg


@pytest.mark.parametrize("case", ["sb_off", "sb_check_off"])
def test_secure_boot_off_or_check_disabled_is_no_reason(messages, case):
    msg = messages[case]
    assert "Secure Boot" not in msg and "MOK" not in msg
    assert "is refused" in msg, "the other checks still ran: " + msg


def test_a_driver_stack_rdma_facts_cannot_read_stops_the_role_at_its_facts_task(messages):
    [(task, result)] = messages[UNREADABLE]
    assert task == "Read the driver stack before any change (ofed_info, running modules, DKMS, kernel headers)"
    assert result["ansible_facts"]["rdma"]["drivers"] is None
    assert [p for p in result["ansible_facts"]["rdma"]["problems"] if p["path"] == "layers.drivers"], result
