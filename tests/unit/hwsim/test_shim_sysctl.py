"""The sysctl shim: simulated netdevs' keys in the simulator, all/default in both, the rest untouched.

The real sysctl is replaced by a recorder (HWSIM_REAL_SYSCTL), so these tests never write the host's own
sysctls; what the shim hands to the real tool is asserted from the record.
"""

import os
import subprocess

import pytest

from conftest import SHIMS

RECORDER = """#!/bin/sh
echo "$*" >> "$RECORD"
case "$*" in
  *-n*net.ipv4.conf.all.arp_ignore*) echo 0 ;;
  *nonexistent*) echo "sysctl: cannot stat /proc/sys/net/nonexistent: No such file or directory" >&2; exit 255 ;;
  *-w*) case "$*" in *-q*) ;; *) echo "${@##*-w }" | sed 's/=/ = /' ;; esac ;;
esac
"""


@pytest.fixture
def real(tmp_path):
    tool = tmp_path / "real-sysctl"
    tool.write_text(RECORDER)
    tool.chmod(0o755)
    return tmp_path / "record", tool


def run(dgx, real, *args):
    record, tool = real
    env = dict(os.environ, HWSIM_ROOT=str(dgx.root), HWSIM_REAL_SYSCTL=str(tool), RECORD=str(record))
    return subprocess.run([str(SHIMS / "sysctl"), *args], env=env, capture_output=True, text=True, check=False)


def recorded(real):
    return real[0].read_text().splitlines() if real[0].exists() else []


def conf(dgx, iface, key):
    return (dgx.root / "proc/sys/net/ipv4/conf" / iface / key).read_text(encoding="utf-8").strip()


def test_simulated_interface_keys_live_in_the_simulator(dgx, real):
    done = run(dgx, real, "-w", "net.ipv4.conf.ibp24s0.arp_ignore=2")
    assert done.returncode == 0 and done.stdout == "net.ipv4.conf.ibp24s0.arp_ignore = 2\n"
    assert conf(dgx, "ibp24s0", "arp_ignore") == "2"
    assert run(dgx, real, "-n", "net.ipv4.conf.ibp24s0.arp_ignore").stdout == "2\n"
    assert run(dgx, real, "net/ipv4/conf/ibp24s0/arp_ignore").stdout == "net.ipv4.conf.ibp24s0.arp_ignore = 2\n"
    assert recorded(real) == [], "a simulated netdev's key must not reach the real kernel"


def test_all_and_default_go_to_both(dgx, real):
    done = run(dgx, real, "-q", "-w", "net.ipv4.conf.all.rp_filter=2")
    assert done.returncode == 0 and done.stdout == ""
    assert recorded(real) == ["-q -w net.ipv4.conf.all.rp_filter=2"]
    assert conf(dgx, "all", "rp_filter") == "2"
    assert run(dgx, real, "-n", "net.ipv4.conf.all.arp_ignore").stdout == "0\n"
    assert recorded(real)[-1] == "-n net.ipv4.conf.all.arp_ignore", "all/default are read from the real kernel"


def test_other_keys_pass_through(dgx, real):
    assert run(dgx, real, "-w", "net.core.somaxconn=1024").returncode == 0
    missing = run(dgx, real, "net.nonexistent")
    assert missing.returncode == 255 and "cannot stat" in missing.stderr
    assert recorded(real) == ["-w net.core.somaxconn=1024", "net.nonexistent"]


def test_unknown_interface_is_not_simulated(dgx, real):
    run(dgx, real, "-w", "net.ipv4.conf.eth9.arp_ignore=1")
    assert recorded(real) == ["-w net.ipv4.conf.eth9.arp_ignore=1"]


def test_load_file_mixes_both_and_honours_dash(dgx, real, tmp_path):
    conf_file = tmp_path / "90-rdma.conf"
    conf_file.write_text("# RDMA\nnet.ipv4.conf.all.arp_announce = 2\n; comment\nnet.ipv4.conf.ibp24s0.rp_filter=2\n"
                         "-net.ipv4.conf.nosuch0.rp_filter = 1\n")
    done = run(dgx, real, "-p", str(conf_file))
    assert done.returncode == 0, done.stderr
    assert conf(dgx, "ibp24s0", "rp_filter") == "2" and conf(dgx, "all", "arp_announce") == "2"
    assert recorded(real) == ["-w net.ipv4.conf.all.arp_announce=2", "-e -w net.ipv4.conf.nosuch0.rp_filter=1"]


def test_bad_value_is_the_kernels_einval(dgx, real):
    done = run(dgx, real, "-w", "net.ipv4.conf.ibp24s0.arp_ignore=banana")
    assert done.returncode == 255 and "Invalid argument" in done.stderr
    assert conf(dgx, "ibp24s0", "arp_ignore") != "banana"


def test_write_without_value_is_an_error(dgx, real):
    done = run(dgx, real, "-w", "net.ipv4.conf.ibp24s0.arp_ignore")
    assert done.returncode == 255 and "must be of the form name=value" in done.stderr
