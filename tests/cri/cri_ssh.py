#!/usr/bin/env python
"""cri_ulimit.py against a containerd on a remote machine (the QEMU VM of molecule/kernel_vm), over ssh.

ssh forwards a local unix socket to the remote containerd socket (``ssh -N -L LOCAL:REMOTE``, one connection
for every probe), and cri_ulimit.probe drives the real crictl through it exactly as it does a local socket
(``crictl exec --sync``: ExecSync, so containerd's streaming server, which listens in the VM, is not needed).  crictl
stays on the controller, so the remote machine needs nothing but containerd.

    cri_ssh.py --ssh-config FILE --host NAME --image localhost/cri-test:1 [--uid 0 --uid 1000]

Prints a JSON list with cri_ulimit.probe's object for each uid, in order.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cri_ulimit  # noqa: E402  pylint: disable=wrong-import-position

REMOTE_SOCKET = "/run/containerd/containerd.sock"


def probe_over_ssh(ssh_config, host, image, uids=(0,), remote_socket=REMOTE_SOCKET, timeout=120):
    """cri_ulimit.probe for each uid through one ssh-forwarded socket; the forward is always torn down."""
    with tempfile.TemporaryDirectory(prefix="cri-ssh-") as tmp:
        local = os.path.join(tmp, "containerd.sock")
        argv = ["ssh", "-F", ssh_config, "-N", "-o", "ExitOnForwardFailure=yes", "-o", "ControlMaster=no",
                "-o", "ControlPath=none", "-L", "%s:%s" % (local, remote_socket), host]
        forward = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)  # pylint: disable=consider-using-with
        try:
            deadline = time.monotonic() + timeout
            while not os.path.exists(local):
                if forward.poll() is not None:
                    raise RuntimeError("ssh forwarding %s from %s failed (rc %s): %s"
                                       % (remote_socket, host, forward.returncode, forward.stderr.read().decode()))
                if time.monotonic() > deadline:
                    raise RuntimeError("ssh did not forward %s from %s within %s s" % (remote_socket, host, timeout))
                time.sleep(0.2)
            return [cri_ulimit.probe(local, image, uid=uid, timeout=timeout) for uid in uids]
        finally:
            forward.terminate()
            try:
                forward.wait(timeout=10)
            except subprocess.TimeoutExpired:
                forward.kill()
                forward.wait()
            forward.stderr.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--ssh-config", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--uid", type=int, action="append", help="repeatable; default: 0")
    parser.add_argument("--remote-socket", default=REMOTE_SOCKET)
    parser.add_argument("--timeout", type=int, default=120)
    args = parser.parse_args()
    results = probe_over_ssh(args.ssh_config, args.host, args.image, tuple(args.uid or [0]), args.remote_socket,
                             args.timeout)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
