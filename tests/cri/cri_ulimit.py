#!/usr/bin/env python
"""Run a pod and a container through CRI (as kubelet does) and report the container's resource limits.

``base_runtime_spec`` only applies to containers created through CRI, not to ``ctr run``; this client is the
smallest kubelet stand-in that shows it: RunPodSandbox (host network), CreateContainer + StartContainer running
``sleep``, then ExecSync reads ``/proc/1/limits`` (the container's main process, what the runtime set up) and
``ulimit -l`` / ``ulimit -Hl`` / ``ulimit -n`` of a shell in it.  Everything it created is removed again.

    cri_ulimit.py --socket /run/containerd/containerd.sock --image localhost/cri-test:1 [--uid 1000] [--runtime-handler nvidia]

Prints one JSON object: {"uid", "memlock_soft", "memlock_hard", "shell": {"l", "Hl", "n"}, "init_limits"}.
Limits are bytes (``unlimited`` kept as the word); the shell's ulimit values are in KiB as the shell prints them.
"""

import argparse
import json
import os
import pathlib
import sys
import time
import uuid

import grpc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import criproto  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_CACHE = pathlib.Path(__file__).resolve().parents[2] / ".cache" / "cri"


def parse_limits(text):
    """``{"memlock": (soft, hard), "nofile": (soft, hard)}`` from /proc/PID/limits text."""
    out = {}
    for line in text.splitlines():
        for name, label in (("memlock", "Max locked memory"), ("nofile", "Max open files")):
            if line.startswith(label):
                soft, hard = line[len(label):].split()[:2]
                out[name] = tuple(v if v == "unlimited" else int(v) for v in (soft, hard))
    return out


def probe(socket, image, uid=0, cache=DEFAULT_CACHE, timeout=60, handler=""):  # pylint: disable=too-many-locals
    """Run the pod and container, return what the container sees.  Cleans up even on failure."""
    api, rpc = criproto.load(cache)
    channel = grpc.insecure_channel("unix://" + os.path.abspath(socket))
    grpc.channel_ready_future(channel).result(timeout=timeout)
    runtime = rpc.RuntimeServiceStub(channel)
    name = "rdma-cri-probe-%s" % uuid.uuid4().hex[:8]
    meta = api.PodSandboxMetadata(name=name, uid=uuid.uuid4().hex, namespace="rdma-test", attempt=0)
    sandbox_config = api.PodSandboxConfig(
        metadata=meta,
        log_directory="/var/log/pods/%s" % name,
        linux=api.LinuxPodSandboxConfig(security_context=api.LinuxSandboxSecurityContext(
            namespace_options=api.NamespaceOption(network=api.NODE))),   # host network: no CNI needed, no hostname
    )
    pod_id = None
    try:
        pod_id = runtime.RunPodSandbox(api.RunPodSandboxRequest(config=sandbox_config, runtime_handler=handler),
                                       timeout=timeout).pod_sandbox_id
        security = api.LinuxContainerSecurityContext(
            namespace_options=api.NamespaceOption(network=api.NODE),
            run_as_user=api.Int64Value(value=uid))
        config = api.ContainerConfig(
            metadata=api.ContainerMetadata(name="probe", attempt=0),
            image=api.ImageSpec(image=image),
            command=["/bin/sh", "-c", "exec sleep 3600"],
            log_path="probe.log",
            linux=api.LinuxContainerConfig(security_context=security),
        )
        container_id = runtime.CreateContainer(api.CreateContainerRequest(
            pod_sandbox_id=pod_id, config=config, sandbox_config=sandbox_config), timeout=timeout).container_id
        runtime.StartContainer(api.StartContainerRequest(container_id=container_id), timeout=timeout)
        script = 'echo "$(id -u) $(ulimit -l) $(ulimit -Hl) $(ulimit -n)"; cat /proc/1/limits'
        deadline = time.time() + timeout
        while True:
            reply = runtime.ExecSync(api.ExecSyncRequest(container_id=container_id, cmd=["/bin/sh", "-c", script],
                                                         timeout=30), timeout=timeout)
            if reply.exit_code == 0 or time.time() > deadline:
                break
            time.sleep(0.5)
        if reply.exit_code != 0:
            raise RuntimeError("exec in the container failed (%s): %s" % (reply.exit_code, reply.stderr.decode()))
        first, rest = reply.stdout.decode().split("\n", 1)
        who, soft_kib, hard_kib, nofile = first.split()
        limits = parse_limits(rest)
        return {"uid": int(who), "memlock_soft": limits["memlock"][0], "memlock_hard": limits["memlock"][1],
                "nofile": list(limits["nofile"]), "shell": {"l": soft_kib, "Hl": hard_kib, "n": nofile},
                "image": image, "runtime_handler": handler or "default"}
    finally:
        if pod_id:
            runtime.StopPodSandbox(api.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=timeout)
            runtime.RemovePodSandbox(api.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=timeout)
        channel.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--uid", type=int, default=0)
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--runtime-handler", default="", help="CRI runtime handler (e.g. nvidia); default: containerd's")
    args = parser.parse_args()
    print(json.dumps(probe(args.socket, args.image, args.uid, args.cache, args.timeout, args.runtime_handler), sort_keys=True))


if __name__ == "__main__":
    main()
