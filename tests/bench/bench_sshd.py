"""A throwaway OpenSSH server on 127.0.0.1 for ``scripts/bench fleet --ssh``: the audit over real SSH, measured.

    scripts/bench sshd start [--suite bookworm|bookworm-backports] [--port 2222]   # prints the bench's options
    scripts/bench sshd stop [--suite ...]

The machines this project runs on have an SSH client but no server.  This fetches Debian's own ``openssh-server``
and ``openssh-client`` of one suite (``apt-get download``: the archive's signatures and checksums as apt checks
them; ``libwrap0`` beside them for 9.2's sshd) into a cache outside the clone, unpacks them with ``dpkg-deb -x``
(nothing is installed), makes a host key and a client key, and starts that sshd on 127.0.0.1 with a configuration of
its own: public keys only, the key made here, root allowed with it (the simulated nodes' roots are root's),
``MaxStartups``/``MaxSessions`` high enough for a fleet's forks.  The client of the same suite is printed as
``ANSIBLE_SSH_EXECUTABLE``, so both ends are one OpenSSH version (its default key exchange is what
docs/scale.md measures).  sshd's privilege separation needs the ``sshd`` user and ``/run/sshd``; they are created
when missing (root only, as is this whole helper).

``stop`` ends the server (its PID file).  Nothing here is used by the tests: it is for measurements by hand.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import pwd
import shutil
import socket
import subprocess
import sys
import time

CACHE = pathlib.Path(os.environ.get("RDMA_K8S_NODE_CACHE", "/var/cache/rdma-k8s-node")) / "bench-sshd"
PACKAGES = ("openssh-server", "openssh-client", "openssh-sftp-server", "libwrap0")
SUITES = ("bookworm", "bookworm-backports")


def paths(suite: str, cache: pathlib.Path = CACHE) -> dict:
    """Where one suite's server lives: its unpacked packages, keys, configuration, log and PID file."""
    base = cache / suite
    return {"base": base, "root": base / "root", "host_key": base / "host_key", "client_key": base / "client_key",
            "config": base / "sshd_config", "log": base / "sshd.log", "pid": base / "sshd.pid"}


def sshd_config(where: dict, port: int) -> str:
    """The server's configuration (``sshd -f``)."""
    lines = ["Port %d" % port, "ListenAddress 127.0.0.1", "HostKey %s" % where["host_key"],
             "AuthorizedKeysFile %s.pub" % where["client_key"], "PermitRootLogin prohibit-password",
             "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
             # a fleet's forks open their connections at once: sshd's default 10:30:100 drops some of them
             "MaxStartups 500", "MaxSessions 500", "PidFile %s" % where["pid"]]
    session = where["root"] / "usr" / "lib" / "openssh"
    if (session / "sshd-session").exists():  # OpenSSH >= 9.8 runs each connection in this binary
        lines.append("SshdSessionPath %s" % (session / "sshd-session"))
    if (session / "sshd-auth").exists():  # OpenSSH >= 10.0
        lines.append("SshdAuthPath %s" % (session / "sshd-auth"))
    return "\n".join(lines) + "\n"


def fetch(suite: str, where: dict) -> None:
    """Download the suite's packages (once) and unpack them into ``where["root"]``."""
    debs = where["base"] / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob("openssh-server_*.deb")):
        subprocess.run(["apt-get", "download", "-t", suite] + list(PACKAGES), cwd=debs, check=True)
    if not (where["root"] / "usr" / "sbin" / "sshd").exists():
        for deb in sorted(debs.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(where["root"])], check=True)


def start(suite: str, port: int, cache: pathlib.Path = CACHE) -> dict:
    """Start the suite's sshd on 127.0.0.1:``port``; what ``scripts/bench fleet`` needs to use it."""
    where = paths(suite, cache)
    fetch(suite, where)
    for key in ("host_key", "client_key"):
        if not where[key].exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(where[key])], check=True)
    try:
        pwd.getpwnam("sshd")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/run/sshd",
                        "--shell", "/usr/sbin/nologin", "sshd"], check=True)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    where["config"].write_text(sshd_config(where, port), encoding="utf-8")
    stop(suite, cache)
    libraries = ":".join(str(where["root"] / d) for d in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"))
    subprocess.run([str(where["root"] / "usr" / "sbin" / "sshd"), "-f", str(where["config"]), "-E", str(where["log"])],
                   env=dict(os.environ, LD_LIBRARY_PATH=libraries), check=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("sshd did not listen on port %d: %s" % (
                    port, where["log"].read_text(encoding="utf-8", errors="replace")))
            time.sleep(0.1)
    client = where["root"] / "usr" / "bin" / "ssh"
    version = subprocess.run([str(client), "-V"], capture_output=True, text=True, check=False).stderr.strip()
    subprocess.run([str(client), "-p", str(port), "-i", str(where["client_key"]), "-o", "BatchMode=yes",
                    "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                    "root@127.0.0.1", "true"], check=True)
    return {"client": str(client), "version": version, "port": port, "key": str(where["client_key"])}


def stop(suite: str, cache: pathlib.Path = CACHE) -> bool:
    """End the suite's sshd if its PID file names a live one; whether it did."""
    pid_file = paths(suite, cache)["pid"]
    try:
        pid = int(pid_file.read_text(encoding="ascii").split()[0])
        os.kill(pid, 15)
    except (OSError, ValueError, IndexError):
        return False
    pid_file.unlink(missing_ok=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--suite", choices=SUITES, default="bookworm",
                        help="Debian suite of the OpenSSH packages (bookworm: 9.2p1; bookworm-backports: 10.0p2)")
    parser.add_argument("--port", type=int, default=2222)
    args = parser.parse_args(argv)
    if args.action == "stop":
        print("stopped" if stop(args.suite) else "no sshd of %s was running" % args.suite)
        return 0
    if os.geteuid() != 0:
        parser.error("start needs root (sshd's privilege separation)")
    if not 1024 < args.port < 65536:
        parser.error("--port %d: use an unprivileged port (1025-65535)" % args.port)
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        parser.error("start needs apt-get and dpkg-deb (a Debian machine)")
    server = start(args.suite, args.port)
    print("sshd %s listening on 127.0.0.1:%d" % (server["version"], server["port"]))
    print("ANSIBLE_SSH_EXECUTABLE=%s scripts/bench fleet --only audit --roots hardlink --ssh root@127.0.0.1:%d "
          "--ssh-key %s" % (server["client"], server["port"], server["key"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
