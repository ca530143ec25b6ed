"""tests/bench/bench_sshd.py: the throwaway sshd's configuration and stop (its start is for measurements by hand)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_sshd as S  # noqa: E402  pylint: disable=wrong-import-position


def test_config_names_its_own_keys_and_the_session_binaries_it_has(tmp_path):
    where = S.paths("bookworm", tmp_path)
    text = S.sshd_config(where, 2299)
    assert "Port 2299\nListenAddress 127.0.0.1\n" in text
    assert "HostKey %s\n" % where["host_key"] in text and "AuthorizedKeysFile %s.pub\n" % where["client_key"] in text
    assert "PasswordAuthentication no" in text and "MaxStartups 500" in text and "SshdSessionPath" not in text
    session = where["root"] / "usr" / "lib" / "openssh"
    session.mkdir(parents=True)
    (session / "sshd-session").touch()  # OpenSSH 9.8 and later
    text = S.sshd_config(where, 2299)
    assert "SshdSessionPath %s\n" % (session / "sshd-session") in text and "SshdAuthPath" not in text


def test_stop_ends_the_process_its_pid_file_names(tmp_path):
    where = S.paths("bookworm", tmp_path)
    assert S.stop("bookworm", tmp_path) is False  # nothing started
    where["base"].mkdir(parents=True)
    with subprocess.Popen(["sleep", "30"]) as proc:
        where["pid"].write_text("%d\n" % proc.pid, encoding="ascii")
        assert S.stop("bookworm", tmp_path) is True
        assert proc.wait(timeout=10) == -15
    assert not where["pid"].exists()
    where["pid"].write_text("not a pid\n", encoding="ascii")
    assert S.stop("bookworm", tmp_path) is False


def test_start_refuses_a_privileged_port_and_a_user(capsys):
    with pytest.raises(SystemExit) as exc:
        S.main(["start", "--port", "22"])
    assert exc.value.code == 2
    assert ("--port 22: use an unprivileged port" if os.geteuid() == 0 else "start needs root") in (
        capsys.readouterr().err)
