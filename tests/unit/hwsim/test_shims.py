"""The command shims, run as subprocesses against a FUSE mount with HWSIM_ROOT set."""

import ast
import json
import os
import subprocess
import sys

import pytest

from conftest import SHIMS


def run(dgx, tool, *args, stdin=None):
    """Run a shim; returns the CompletedProcess."""
    env = dict(os.environ, HWSIM_ROOT=str(dgx.root))
    return subprocess.run([str(SHIMS / tool), *args], env=env, capture_output=True, text=True, input=stdin,
                          check=False)


def test_shims_are_executable_stdlib_only_python():
    shims = sorted(SHIMS.iterdir())
    assert [shim.name for shim in shims] == ["dcb", "devlink", "ib_write_bw", "ip", "mlnx_qos", "mlxconfig", "mlxfwreset",
                                             "modprobe", "mstconfig", "mstfwreset", "ofed_info", "rdma", "setpci", "sysctl"]
    # mlxconfig is mstconfig and mstfwreset is mlxfwreset under the other name (each picks its layout from argv[0])
    assert (SHIMS / "mlxconfig").readlink().name == "mstconfig" and (SHIMS / "mstfwreset").readlink().name == "mlxfwreset"
    for shim in shims:
        assert os.access(shim, os.X_OK), shim
        text = shim.read_text(encoding="utf-8")
        assert text.startswith("#!/usr/bin/env python\n"), shim
        for node in ast.walk(ast.parse(text)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names, (shim, name)


def test_rdma_system_show_and_set(dgx):
    assert run(dgx, "rdma", "system", "show").stdout == "netns shared privileged-qkey off monitor off copy-on-fork on\n"
    assert json.loads(run(dgx, "rdma", "-j", "system", "show").stdout)[0]["netns"] == "shared"
    dgx.call({"cmd": "netns_add", "name": "pod"})
    busy = run(dgx, "rdma", "system", "set", "netns", "exclusive")
    assert busy.returncode == 1 and busy.stderr == "error: Device or resource busy\n"
    dgx.call({"cmd": "netns_del", "name": "pod"})
    assert run(dgx, "rdma", "system", "set", "netns", "exclusive").returncode == 0
    assert run(dgx, "rdma", "sys").stdout.startswith("netns exclusive ")
    bad = run(dgx, "rdma", "system", "set", "netns", "private")
    assert bad.returncode == 1 and "shared | exclusive" in bad.stderr


def test_rdma_dev_and_link(dgx):
    first = run(dgx, "rdma", "dev").stdout.splitlines()[0]
    assert first == ("0: mlx5_0: node_type ca fw 28.41.1000 node_guid a088:c203:0055:1e20 "
                     "sys_image_guid a088:c203:0055:1e20 ")
    links = run(dgx, "rdma", "link", "show").stdout.splitlines()
    assert "link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 257 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP " in links
    assert "link mlx5_1/1 state ACTIVE physical_state LINK_UP netdev enp41s0f0np0 " in links


def test_ip_vf_guid_lines(dgx):
    (dgx.root / "sys/class/net/ibp24s0/device/sriov_numvfs").write_text("2", encoding="utf-8")
    assert run(dgx, "ip", "link", "set", "ibp24s0", "vf", "1", "node_guid", "02:00:00:00:00:00:00:01",
               "port_guid", "02:00:00:00:00:00:00:01", "state", "auto").returncode == 0
    text = run(dgx, "ip", "link", "show", "ibp24s0").stdout.splitlines()
    assert text[0].startswith("2: ibp24s0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq state UP mode DEFAULT")
    assert text[1].startswith("    link/infiniband 00:00:")
    assert text[3].startswith("    vf 1     link/infiniband ")
    assert text[3].endswith(", spoof checking off, NODE_GUID 02:00:00:00:00:00:00:01, PORT_GUID 02:00:00:00:00:00:00:01, "
                            "link-state auto, trust off, query_rss off")
    assert "NODE_GUID 00:00:00:00:00:00:00:00, PORT_GUID 00:00:00:00:00:00:00:00, link-state disable" in text[2]
    data = json.loads(run(dgx, "ip", "-j", "link", "show", "dev", "ibp24s0").stdout)
    assert data[0]["vfinfo_list"][1]["node guid"] == "02:00:00:00:00:00:00:01"


def test_ip_errors(dgx):
    (dgx.root / "sys/class/net/ibp24s0/device/sriov_numvfs").write_text("1", encoding="utf-8")
    bad_guid = run(dgx, "ip", "link", "set", "ibp24s0", "vf", "0", "node_guid", "zz")
    assert bad_guid.returncode == 255 and "Invalid GUID format" in bad_guid.stderr
    out_of_range = run(dgx, "ip", "link", "set", "ibp24s0", "vf", "5", "node_guid", "02:00:00:00:00:00:00:01")
    assert out_of_range.returncode == 2 and out_of_range.stderr == "RTNETLINK answers: Invalid argument\n"
    eth = run(dgx, "ip", "link", "set", "enp41s0f0np0", "mtu", "9100")
    assert eth.returncode == 0
    assert (dgx.root / "sys/class/net/enp41s0f0np0/mtu").read_text(encoding="utf-8") == "9100\n"


def test_modprobe(dgx):
    missing = run(dgx, "modprobe", "nosuch")
    assert missing.returncode == 1
    assert missing.stderr == "modprobe: FATAL: Module nosuch not found in directory /lib/modules/6.1.0-28-amd64\n"
    assert run(dgx, "modprobe", "-q", "nosuch").stderr == ""
    assert run(dgx, "modprobe", "nvidia-peermem").returncode == 0
    assert "nvidia_peermem" in (dgx.root / "proc/modules").read_text(encoding="utf-8")
    assert run(dgx, "modprobe", "-r", "ib_core").stderr == "modprobe: FATAL: Module ib_core is in use.\n"
    assert run(dgx, "modprobe", "-r", "nvidia_peermem").returncode == 0
    assert run(dgx, "modprobe", "-r", "nvidia_peermem").stderr == "modprobe: FATAL: Module nvidia_peermem is not in kernel.\n"
    assert run(dgx, "modprobe", "-n", "mlx5_ib").returncode == 0


def test_mstconfig_query_and_set(dgx):
    query = run(dgx, "mstconfig", "-e", "-d", "0000:18:00.0", "q").stdout
    assert "Configurations:                              Default         Current         Next Boot\n" in query
    assert "*        NUM_OF_VFS                          0               16              16              \n" in query
    assert run(dgx, "mstconfig", "-d", "0000:18:00.0", "set", "NUM_OF_VFS=4", stdin="n\n").returncode == 1
    done = run(dgx, "mstconfig", "-d", "0000:18:00.0", "-y", "set", "NUM_OF_VFS=4")
    assert done.returncode == 0 and "Please reboot" in done.stdout
    assert "NUM_OF_VFS                          0               16              4               \n" in run(
        dgx, "mstconfig", "-e", "-d", "0000:18:00.0", "q").stdout
    assert "NUM_OF_VFS                          4               \n" in run(dgx, "mstconfig", "-d", "0000:18:00.0", "q").stdout
    dgx.call({"cmd": "reset"})
    assert (dgx.root / "sys/bus/pci/devices/0000:18:00.0/sriov_totalvfs").read_text(encoding="utf-8") == "4\n"
    assert run(dgx, "mstconfig", "-d", "0000:18:00.0", "set", "BOGUS=1").returncode == 1
    assert run(dgx, "mstconfig", "-d", "0000:1b:00.0", "q").returncode == 1


@pytest.mark.parametrize("flag, output", [("-s", "OFED-internal-24.10-1.1.4.0.200:\n"), ("-n", "24.10-1.1.4.0.200\n")])
def test_ofed_info(dgx, flag, output):
    assert run(dgx, "ofed_info", flag).stdout == output


def test_ip_link_dump_lists_every_simulated_link_with_its_vfs(dgx, tmp_path):
    """`ip [-j] link show` without a name is a dump: every simulated netdev (with VF lists, as the kernel sends them
    when iproute2 asks for RTEXT_FILTER_VF), then this machine's other links from the real ip."""
    (dgx.root / "sys/class/net/ibp24s0/device/sriov_numvfs").write_text("2", encoding="utf-8")
    assert run(dgx, "ip", "link", "set", "ibp24s0", "vf", "1", "node_guid", "02:00:00:00:00:00:00:01").returncode == 0
    dump = json.loads(run(dgx, "ip", "-j", "link", "show").stdout)
    by_name = dict((link["ifname"], link) for link in dump)
    single = json.loads(run(dgx, "ip", "-j", "link", "show", "dev", "ibp24s0").stdout)[0]
    assert by_name["ibp24s0"] == single, "a dump shows a link exactly as the single query does"
    assert [vf["node guid"] for vf in by_name["ibp24s0"]["vfinfo_list"]] == ["00:00:00:00:00:00:00:00",
                                                                             "02:00:00:00:00:00:00:01"]
    assert "ibp24s0v0" in by_name and "vfinfo_list" not in by_name["ibp24s0v0"], "a VF's own netdev has no VF list"
    assert "vfinfo_list" not in by_name["ibp64s0"], "a PF without VFs reports none"
    names = [link["ifname"] for link in dump]
    assert len(names) == len(set(names)), "a name the simulator has is not repeated from the real ip"
    text = run(dgx, "ip", "link", "show").stdout
    assert "ibp24s0v0:" in text and "    vf 1     link/infiniband " in text
    assert run(dgx, "ip", "link", "show", "dev", "ibp24s0").stdout in text


def test_ip_dump_adds_the_real_ip_links(dgx, tmp_path):
    """Links the simulator does not have come from the real ip (a stand-in here), minus the simulated names."""
    fake = tmp_path / "ip"
    fake.write_text("#!/bin/sh\n" + 'case "$1" in -j) echo \'[{"ifindex": 1, "ifname": "lo"}, {"ifindex": 7, '
                    '"ifname": "eth0"}]\';; *) printf "1: lo: <LOOPBACK> mtu 65536\\n    link/loopback x\\n'
                    '7: eth0@if8: <BROADCAST> mtu 1500\\n    link/ether y\\n";; esac\n', encoding="utf-8")
    fake.chmod(0o755)
    shim = tmp_path / "shim-ip"
    shim.write_text((SHIMS / "ip").read_text(encoding="utf-8").replace(
        'REAL = ("/usr/sbin/ip"', 'REAL = ("%s", "/usr/sbin/ip"' % fake), encoding="utf-8")
    env = dict(os.environ, HWSIM_ROOT=str(dgx.root))
    dump = json.loads(subprocess.run([sys.executable, str(shim), "-j", "link", "show"], env=env, capture_output=True,
                                     text=True, check=True).stdout)
    assert [link["ifname"] for link in dump if link["ifname"] in ("lo", "eth0")] == ["lo", "eth0"]
    assert [link.get("link_type") for link in dump if link["ifname"] == "lo"] == ["loopback"], "the simulator's lo"
    text = subprocess.run([sys.executable, str(shim), "link", "show"], env=env, capture_output=True, text=True,
                          check=True).stdout
    assert text.endswith("7: eth0@if8: <BROADCAST> mtu 1500\n    link/ether y\n")
    assert "link/loopback x" not in text, "the simulator's lo stands for the real one"
