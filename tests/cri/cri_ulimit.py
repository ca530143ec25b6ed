#!/usr/bin/env python
"""Run a pod and a container through CRI with the real ``crictl`` (as kubelet does) and report the container's limits.

``base_runtime_spec`` only applies to containers created through CRI, not to ``ctr run``; ``crictl`` (cri-tools,
built from its Go module by scripts/build-kube, the CRI client Kubernetes' own node tests use) drives exactly the
calls the kubelet makes: ``runp`` (RunPodSandbox, host network), ``create`` + ``start`` of a container running
``sleep``, then ``exec --sync`` (ExecSync: no streaming server is needed, so it works through an ssh-forwarded
socket) reads ``/proc/1/limits`` (the container's main process, what the runtime set up) and ``ulimit -l`` /
``ulimit -Hl`` / ``ulimit -n`` of a shell in it.  Everything it created is removed again (``stopp`` + ``rmp``).

    cri_ulimit.py --socket /run/containerd/containerd.sock --image localhost/cri-test:1 [--uid 1000] [--runtime-handler nvidia]

Prints one JSON object: {"uid", "memlock_soft", "memlock_hard", "nofile", "shell": {"l", "Hl", "n"}, "image",
"runtime_handler", "client"} (``client``: the crictl that ran).  Limits are bytes (``unlimited`` kept as the word); the shell's ulimit values are in
KiB as the shell prints them.  ``crictl`` is ``$RDMA_CRICTL``, else scripts/build-kube's cached one.
"""

import argparse
import json
import os
import pathlib
import subprocess
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODE = 2  # runtime.v1.NamespaceMode NODE: the host's namespace (no CNI needed)


def crictl_path():
    """``$RDMA_CRICTL``, else the crictl scripts/build-kube built (its ``--list`` names the pinned version's path)."""
    if os.environ.get("RDMA_CRICTL"):
        return os.environ["RDMA_CRICTL"]
    listed = subprocess.run([str(ROOT / "scripts/build-kube"), "--list"], check=True, capture_output=True,
                            text=True).stdout
    for line in listed.splitlines():
        tool, _version, path = line.split()
        if tool == "crictl":
            if not os.access(path, os.X_OK):
                raise RuntimeError("%s is missing: run scripts/setup (scripts/build-kube builds crictl)" % path)
            return path
    raise RuntimeError("scripts/build-kube --list names no crictl")


def parse_limits(text):
    """``{"memlock": (soft, hard), "nofile": (soft, hard)}`` from /proc/PID/limits text."""
    out = {}
    for line in text.splitlines():
        for name, label in (("memlock", "Max locked memory"), ("nofile", "Max open files")):
            if line.startswith(label):
                soft, hard = line[len(label):].split()[:2]
                out[name] = tuple(v if v == "unlimited" else int(v) for v in (soft, hard))
    return out


class Crictl:
    """``crictl`` against one CRI socket, with no configuration file of the machine's (``--config`` points at an
    empty one) and the endpoint given on every call."""

    def __init__(self, socket, timeout, binary=None, workdir=None):
        self.binary = binary or crictl_path()
        self.workdir = workdir
        config = os.path.join(workdir, "crictl.yaml")
        with open(config, "w", encoding="utf-8"):
            pass
        endpoint = "unix://" + os.path.abspath(socket)
        self.base = [self.binary, "--config", config, "--runtime-endpoint", endpoint, "--image-endpoint", endpoint,
                     "--timeout", "%ds" % timeout]
        self.timeout = timeout

    def run(self, *args, check=True):
        done = subprocess.run(self.base + list(args), capture_output=True, text=True, timeout=self.timeout + 30,
                              check=False)
        if check and done.returncode != 0:
            output = (done.stderr or done.stdout).strip()[-2000:]
            raise RuntimeError("crictl %s failed (rc %d): %s" % (" ".join(args), done.returncode, output))
        return done

    def write(self, name, document):
        path = os.path.join(self.workdir, name)
        with open(path, "w", encoding="utf-8") as out:
            json.dump(document, out)
        return path


def probe(socket, image, uid=0, timeout=60, handler="", binary=None):  # pylint: disable=too-many-locals
    """Run the pod and container, return what the container sees.  Cleans up even on failure."""
    name = "rdma-cri-probe-%s" % uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="cri-ulimit-") as tmp:
        crictl = Crictl(socket, timeout, binary, tmp)
        pod = crictl.write("pod.json", {
            "metadata": {"name": name, "uid": uuid.uuid4().hex, "namespace": "rdma-test", "attempt": 0},
            "log_directory": "/var/log/pods/%s" % name,
            "linux": {"security_context": {"namespace_options": {"network": NODE}}}})
        container = crictl.write("container.json", {
            "metadata": {"name": "probe", "attempt": 0}, "image": {"image": image},
            "command": ["/bin/sh", "-c", "exec sleep 3600"], "log_path": "probe.log",
            "linux": {"security_context": {"namespace_options": {"network": NODE}, "run_as_user": {"value": uid}}}})
        pod_id = None
        try:
            pod_id = crictl.run("runp", *(["--runtime", handler] if handler else []), pod).stdout.strip()
            container_id = crictl.run("create", "--no-pull", pod_id, container, pod).stdout.strip()
            crictl.run("start", container_id)
            script = 'echo "$(id -u) $(ulimit -l) $(ulimit -Hl) $(ulimit -n)"; cat /proc/1/limits'
            deadline = time.time() + timeout
            while True:
                reply = crictl.run("exec", "--sync", "--timeout", "30", container_id, "/bin/sh", "-c", script,
                                   check=False)
                if reply.returncode == 0 or time.time() > deadline:
                    break
                time.sleep(0.5)
            if reply.returncode != 0:
                raise RuntimeError("crictl exec in the container failed (rc %s): %s"
                                   % (reply.returncode, (reply.stderr or reply.stdout).strip()[-2000:]))
            first, rest = reply.stdout.split("\n", 1)
            who, soft_kib, hard_kib, nofile = first.split()
            limits = parse_limits(rest)
            return {"uid": int(who), "memlock_soft": limits["memlock"][0], "memlock_hard": limits["memlock"][1],
                    "nofile": list(limits["nofile"]), "shell": {"l": soft_kib, "Hl": hard_kib, "n": nofile},
                    "image": image, "runtime_handler": handler or "default",
                    "client": crictl.binary}
        finally:
            if pod_id:
                crictl.run("stopp", pod_id, check=False)
                crictl.run("rmp", "--force", pod_id, check=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--uid", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--runtime-handler", default="", help="CRI runtime handler (e.g. nvidia); default: containerd's")
    parser.add_argument("--crictl", help="the crictl binary (default: $RDMA_CRICTL, else scripts/build-kube's)")
    args = parser.parse_args()
    print(json.dumps(probe(args.socket, args.image, args.uid, args.timeout, args.runtime_handler, args.crictl),
                     sort_keys=True))


if __name__ == "__main__":
    main()
