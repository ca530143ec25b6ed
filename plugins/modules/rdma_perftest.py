#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

DOCUMENTATION = r"""
module: rdma_perftest
short_description: The node side of the fabric acceptance - GID tables, ib_write_bw, port counters, NCCL log
version_added: 0.1.0
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
description:
  - V(probe) reads what a point-to-point test needs from sysfs (port state, the RoCE GID table and the right GID
    index, the IPv4 address behind it, the netdev's operational state) and whether perftest is installed. Read-only.
    With O(pod_image) it also starts a container through the node's own CRI runtime with C(crictl) and reads the
    C(ulimit -l) a pod gets; without C(crictl) on the node that check is reported as skipped. No device is passed
    to that container (a pod's RDMA devices come from the device plugin), so it says nothing about devices. It is
    also skipped where a kubelet runs, since the kubelet stops every CRI pod it did not create within seconds (its
    housekeeping of orphaned pods) and the verdict would be a race.
  - V(server) starts one C(ib_write_bw) server per job, detached, each under C(timeout) so it ends by itself
    even if the play dies, and waits until each listens on its TCP port (or exits, or O(start_timeout) passes).
  - V(client) runs the jobs' clients one after another, each killed after O(timeout) seconds, and parses the
    result in Gb/s.
  - V(stop) ends the servers still running (their whole process group), returns their output and removes the
    run files. Run it always, also after a failure, so no perftest is left running.
  - V(counters) reads the C(hw_counters) (retransmission and congestion counters) of the O(devices) ports, as the
    C(counters) layer of M(rdma.k8s_node.rdma_facts) does; validate reads them before and after each wave of tests
    (docs/counters.md). Read-only.
  - V(nccl) runs an nccl-tests command with C(NCCL_DEBUG=INFO) and parses which transport each channel used;
    the command missing on the node is a result (RV(nccl) has C(status=absent)), not a failure.
  - Commands are argument lists with timeouts; no action can hang the play.
extends_documentation_fragment:
  - rdma.k8s_node.host_root
  - rdma.k8s_node.attributes
attributes:
  check_mode:
    support: partial
    details:
      - V(probe) and V(counters) read in check mode as outside it (the CRI container is not started).
      - V(server), V(client), V(stop) and V(nccl) run traffic or processes; in check mode they run nothing and say
        so (RV(skipped)).
  diff_mode:
    support: none
  idempotent:
    support: none
    details:
      - V(probe) and V(counters) change nothing. V(server) starts processes each time; V(stop) ends them.
options:
  action:
    description: What to do (see the description).
    type: str
    required: true
    choices: [probe, counters, server, client, stop, nccl]
  devices:
    description: For V(probe) and V(counters), the RDMA device ports to read.
    type: list
    elements: dict
    default: []
    suboptions:
      device:
        description: RDMA device name (C(mlx5_0), C(rxe0)).
        type: str
        required: true
      port:
        description: Port number.
        type: int
        default: 1
      gid_index:
        description: A fixed GID index to check instead of choosing the RoCE v2 IPv4 entry.
        type: int
  jobs:
    description:
      - For V(server) and V(client), one entry per test; for V(stop), the ids of the servers to stop.
      - The client connects to O(jobs[].server_address):O(jobs[].tcp_port).
    type: list
    elements: dict
    default: []
    suboptions:
      id:
        description: Name of the job (letters, digits, C(.), C(_), C(-)); names the run files.
        type: str
        required: true
      device:
        description: Local RDMA device.
        type: str
      port:
        description: Local port number.
        type: int
        default: 1
      gid_index:
        description: GID index (C(-x)); omit on InfiniBand.
        type: int
      tcp_port:
        description: perftest's TCP port for the connection exchange (C(-p)).
        type: int
      server_address:
        description: For V(client), the server's address.
        type: str
      bind_source_ip:
        description:
          - With O(rdma_cm), this end's rail address for C(--bind_source_ip) (perftest 23.07+), which pins the
            connection to the rail; released perftest ignores C(-d) with C(-R).
        type: str
      cpus:
        description:
          - Run the process under C(taskset -c) on these CPUs (a C(local_cpulist), the NIC's own NUMA node's), so the
            memory perftest registers is local to the NIC.
        type: str
      netns:
        description: Run the process inside this named network namespace (C(ip netns exec)).
        type: str
      cuda_bus_id:
        description:
          - Register the buffers in the memory of the GPU at this PCI address (C(--use_cuda_bus_id), perftest
            4.4-0.36+; perftest must be built with CUDA).
        type: str
      cuda_index:
        description:
          - Register the buffers in the memory of CUDA device N (C(--use_cuda=N)), run with C(CUDA_DEVICE_ORDER=PCI_BUS_ID)
            so N counts in PCI order; for a perftest without C(--use_cuda_bus_id). Ignored with O(jobs[].cuda_bus_id).
        type: int
      cuda_dmabuf:
        description: With a GPU, register it through DMA-BUF (C(--use_cuda_dmabuf), perftest 4.5-0.18+, given after the device).
        type: bool
        default: false
  binary:
    description: The perftest program (looked up on PATH when not absolute).
    type: str
    default: ib_write_bw
  size:
    description: Message size in bytes (C(-s)).
    type: int
    default: 65536
  duration:
    description: Seconds of traffic per test (C(-D)); V(0) uses O(iterations) instead.
    type: int
    default: 5
  iterations:
    description: Iterations (C(-n)) when O(duration) is V(0).
    type: int
    default: 5000
  qps:
    description: Queue pairs (C(-q)).
    type: int
    default: 1
  rdma_cm:
    description: Connect through the RDMA connection manager (C(-R)).
    type: bool
    default: true
  timeout:
    description:
      - V(client) and V(nccl) - seconds before a run is killed.
      - V(server) - the servers' lifetime; C(timeout) kills a server still waiting after it.
    type: int
    default: 60
  start_timeout:
    description: For V(server), seconds to wait for each server to listen.
    type: int
    default: 20
  run_dir:
    description: Where V(server) keeps each job's pid and output file.
    type: path
    default: /run/rdma-validate
  pod_image:
    description: For V(probe), an image with a shell to start through CRI; unset skips the container check.
    type: str
  crictl:
    description: The C(crictl) program (looked up on PATH when not absolute).
    type: str
    default: crictl
  cri_endpoint:
    description: The CRI socket for C(crictl --runtime-endpoint); unset uses C(crictl)'s configuration.
    type: str
  command:
    description:
      - For V(nccl), the nccl-tests command line (the program is looked up on PATH); required for V(nccl).
      - Give it two or more ranks (C(-g <GPUs>), or a multi-node launcher); with one rank NCCL opens no transport.
    type: list
    elements: str
  environment:
    description: For V(nccl), extra environment variables (C(NCCL_DEBUG=INFO) is always set).
    type: dict
    default: {}
notes:
  - The server binds no address of its own choosing; with several rails, give each job its own O(jobs[].tcp_port).
  - Processes run in the module's own network namespace unless O(jobs[].netns) is set; sysfs is read under
    O(host_root).
seealso:
  - module: rdma.k8s_node.rdma_facts
  - name: perftest
    description: The RDMA bandwidth and latency tests.
    link: https://github.com/linux-rdma/perftest
"""

EXAMPLES = r"""
- name: Read the GID tables and check perftest is installed
  rdma.k8s_node.rdma_perftest:
    action: probe
    devices: [{device: mlx5_0}, {device: mlx5_1}]
  register: probe

- name: Start a server for rail 0
  rdma.k8s_node.rdma_perftest:
    action: server
    jobs: [{id: node1-node2-r0, device: mlx5_0, gid_index: 3, tcp_port: 18515}]
    timeout: 120

- name: Run the client against it (on the other node)
  rdma.k8s_node.rdma_perftest:
    action: client
    jobs: [{id: node1-node2-r0, device: mlx5_0, gid_index: 3, tcp_port: 18515, server_address: 192.0.2.2}]
  register: client

- name: Stop what is left (always)
  rdma.k8s_node.rdma_perftest:
    action: stop
    jobs: [{id: node1-node2-r0}]
"""

RETURN = r"""
changed:
  description: V(server) started, or V(stop) ended or removed, something.
  returned: always
  type: bool
actions:
  description: Processes started or stopped, run files removed.
  returned: always
  type: list
  elements: dict
reboot_required:
  description: Always false.
  returned: always
  type: bool
restart_required:
  description: Always empty.
  returned: always
  type: list
  elements: str
observed:
  description: Empty; the results are in the keys below.
  returned: always
  type: dict
skipped:
  description: Check mode, nothing ran (V(server), V(client), V(stop), V(nccl)).
  returned: always
  type: bool
perftest:
  description: For V(probe), the perftest program's path (null when not installed).
  returned: always
  type: dict
  sample: {"binary": "ib_write_bw", "path": "/usr/bin/ib_write_bw", "bind_source_ip": true, "cuda": true,
           "cuda_bus_id": true, "cuda_dmabuf": true}
ports:
  description: For V(probe), per device port what a test needs.
  returned: always
  type: list
  elements: dict
  sample: [{"device": "rxe0", "port": 1, "exists": true, "state": "ACTIVE", "phys_state": "LinkUp",
            "link_layer": "Ethernet", "rate": "10 Gb/sec (1X QDR)", "rate_gbps": 10.0, "netdev": "eth0",
            "operstate": "up", "mtu": 1500, "active_mtu": "1024", "gids": [], "gid_index": 1, "gid_problem": null,
            "ipv4": "10.0.2.15"}]
pod:
  description: For V(probe), the CRI container check.
  returned: always
  type: dict
  sample: {"status": "skipped", "reason": "no CRI client (crictl is not on the node)"}
jobs:
  description: Per job, for V(server) the start (C(status) listening, exited or not_started), for V(client) the run
    (C(rc), C(timed_out), C(seconds), C(output), C(result) with C(avg_gbps)), for V(stop) the server's output.
  returned: always
  type: list
  elements: dict
nccl:
  description: For V(nccl), C(status) (V(ran), V(absent), V(timed_out)), C(rc), C(output) (the tail) and C(result).
  returned: always
  type: dict
counters:
  description:
    - For V(counters), C(time) (epoch seconds of the reading) and per port of O(devices) C(device), C(port),
      C(counters) (each C(hw_counters) file but C(lifespan), a number or its text; V(null) without the directory)
      and C(problems).
  returned: when O(action=counters)
  type: dict
  sample: {"time": 1767225600.125, "ports": [{"device": "mlx5_0", "port": 1, "problems": [],
           "counters": {"out_of_sequence": 0, "packet_seq_err": 12, "local_ack_timeout_err": 0}}]}
"""

import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import stat
import struct
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdma.k8s_node.plugins.module_utils import _perftest
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as _kubelet_host
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot, check_name
from ansible_collections.rdma.k8s_node.plugins.module_utils._result import Result, action, exit_module
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters import observe as _counters_observe

JOB_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
OUTPUT_TAIL = 8000          # characters of a process's output kept in the result
KILL_GRACE = 3              # seconds between SIGTERM and SIGKILL
TCP_LISTEN = "0A"
SIOCGIFADDR = 0x8915


# -- processes ---------------------------------------------------------------------------------------------------
def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # a zombie of ours is not running any more
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (IOError, OSError, IndexError):
        return False


def identity(pid):
    """``{"start": ticks since boot, "cmdline": sha256}`` of a running process, or None when it is gone or its
    /proc entry is not what a process has: what a pid file is checked against before anything is signalled."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            text = handle.read(4096).decode("ascii", "replace")
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read(1 << 20)
    except (IOError, OSError):
        return None
    fields = text.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or not (fields[19].isascii() and fields[19].isdigit()) or fields[0] == "Z":
        return None
    return {"start": int(fields[19]), "cmdline": hashlib.sha256(cmdline).hexdigest()}


def write_pid_file(path, pid, argv):
    """The pid with the process's identity, in a new file (a link or anything else at the name is replaced,
    never written through).  The command line is the ``argv`` this module spawned, not a read of
    ``/proc/<pid>/cmdline``: right after posix_spawn() returns (the parent is released during the child's execve,
    before the kernel has set up the new argument area) that file can still read empty."""
    record = {"pid": pid, "start": (identity(pid) or {}).get("start"),
              "cmdline": hashlib.sha256(b"".join(os.fsencode(a) + b"\0" for a in argv)).hexdigest()}
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode("ascii"))
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_pid_file(path):
    """``(pid, why not)``: the pid of a job this module started, when /proc still shows that very process (same
    start time, same command line); otherwise None and the reason.  A pid file alone is never trusted: the pid
    may have been reused by another process, or the file written by someone else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (IOError, OSError) as exc:
        return None, "its pid file cannot be read (%s)" % (exc.strerror or exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "its pid file is not a regular file"
        text = os.read(fd, 4096).decode("ascii", "replace")
    finally:
        os.close(fd)
    try:
        record = json.loads(text)
        pid = record["pid"]
        if not (isinstance(pid, int) and 1 < pid < 1 << 22 and set(record) == {"pid", "start", "cmdline"}):
            raise ValueError(text)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None, "its pid file does not hold a job record of this module"
    now = identity(pid)
    if now is None:
        return None, "process %d has exited" % pid
    if now != {"start": record["start"], "cmdline": record["cmdline"]}:
        return None, "pid %d now belongs to another process (not signalled)" % pid
    return pid, None


def kill_group(pid):
    """SIGTERM the process group ``pid`` leads, SIGKILL it after KILL_GRACE seconds; True when it was running."""
    if not _alive(pid):
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except OSError:
            return True
        deadline = time.time() + KILL_GRACE
        while time.time() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return True
            except ChildProcessError:
                pass
            if not _alive(pid):
                return True
            time.sleep(0.1)
    return True


def run_bounded_split(module, argv, timeout, env=None):
    """``(rc, stdout, stderr, timed_out, seconds)``.  GNU ``timeout`` runs the command in its own process group
    and signals the whole group at ``timeout`` seconds (SIGKILL ``KILL_GRACE`` later)."""
    wrapper = module.get_bin_path("timeout", required=True)
    start = time.time()
    rc, out, err = module.run_command([wrapper, "--kill-after=%d" % KILL_GRACE, str(timeout)] + list(argv),
                                      check_rc=False, environ_update=env or {})
    seconds = round(time.time() - start, 2)
    # 124: timed out and ended by SIGTERM; 128+9: it needed the SIGKILL
    timed_out = rc in (124, 137) and seconds >= timeout
    return rc, out, err, timed_out, seconds


def run_bounded(module, argv, timeout, env=None):
    """``(rc, output, timed_out, seconds)``: run_bounded_split with stdout and stderr together."""
    rc, out, err, timed_out, seconds = run_bounded_split(module, argv, timeout, env)
    return rc, out + err, timed_out, seconds


def _listens_on(text, tcp_port):
    """True when a ``/proc/net/tcp``-format table has a listening socket on ``tcp_port``."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3] == TCP_LISTEN and ":" in fields[1] and \
                int(fields[1].rsplit(":", 1)[1], 16) == tcp_port:
            return True
    return False


def listening(pid, tcp_port):
    """True when the network namespace of ``pid`` has a TCP socket listening on ``tcp_port``."""
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name), encoding="ascii", errors="replace") as handle:
                if _listens_on(handle.read(), tcp_port):
                    return True
        except (IOError, OSError):
            continue
    return False


def port_in_use(module, job):
    """True when something already listens on the job's TCP port where its server would run (the module's
    network namespace, or the job's): the server's own listener could not be told from it."""
    if job.get("netns"):
        rc, out, dummy, dummy2 = run_bounded(module, _in_netns(module, job, [
            module.get_bin_path("cat", required=True), "/proc/self/net/tcp", "/proc/self/net/tcp6"]), 10)
        return _listens_on(out, job["tcp_port"])
    return listening(os.getpid(), job["tcp_port"])


def read_job_file(path, limit=1 << 22):
    """A job's log as text (the last ``limit`` bytes at most); never through a link, never blocking on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "%s is not a regular file" % path)
        size = os.fstat(fd).st_size
        if size > limit:
            os.lseek(fd, size - limit, os.SEEK_SET)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(fd)


def banner(path):
    """True when perftest's server printed that it waits for its client."""
    try:
        return "Waiting for client" in read_job_file(path)
    except (IOError, OSError):
        return False


def _exit_code(code):
    return os.waitstatus_to_exitcode(code) if hasattr(os, "waitstatus_to_exitcode") else code >> 8


def log_file_of(params, job):
    return _files(params, job["id"])[1]


def tail(text):
    return text if len(text) <= OUTPUT_TAIL else "...\n" + text[-OUTPUT_TAIL:]


# -- probe -------------------------------------------------------------------------------------------------------
def probe_port(host, device, port, wanted_gid):
    base = "/sys/class/infiniband/%s/ports/%d" % (device, port)
    out = {"device": device, "port": port, "exists": host.isdir(base)}
    if not out["exists"]:
        out.update(gid_index=None, gid_problem="no port %d on device %s" % (port, device), gids=[], ipv4=None)
        return out
    state = host.try_attr(base + "/state")
    phys = host.try_attr(base + "/phys_state")
    out.update(state=state.split(":")[-1].strip() if state else None,
               phys_state=phys.split(":")[-1].strip() if phys else None,
               link_layer=host.try_attr(base + "/link_layer"), rate=host.try_attr(base + "/rate"))
    out["rate_gbps"] = _perftest.rate_gbps(out["rate"])
    entries = []
    for index in sorted((i for i in host.listdir(base + "/gids") if i.isascii() and i.isdigit()), key=int):
        gid = host.try_attr("%s/gids/%s" % (base, index))
        if gid is None or gid.lower() == _perftest.ZERO_GID:
            continue
        # the kernel answers EINVAL for the attributes of an empty entry, and for InfiniBand ports
        entries.append((index, gid, host.try_attr("%s/gid_attrs/types/%s" % (base, index)),
                        host.try_attr("%s/gid_attrs/ndevs/%s" % (base, index))))
    out["gids"] = _perftest.gid_table(entries) if out["link_layer"] == "Ethernet" else [
        {"index": int(i), "gid": g.lower(), "type": "IB", "ndev": None, "ipv4": None} for i, g, dummy, dummy2 in entries]
    out["gid_index"], out["gid_problem"] = _perftest.choose_gid_index(out["gids"], out["link_layer"], wanted_gid)
    chosen = [e for e in out["gids"] if e["index"] == out["gid_index"]]
    out["ipv4"] = chosen[0]["ipv4"] if chosen else None
    if out["link_layer"] == "Ethernet":
        netdev = chosen[0]["ndev"] if chosen and chosen[0]["ndev"] else host.try_attr(base + "/gid_attrs/ndevs/0")
    else:
        # InfiniBand: no netdev in the GID attributes (EINVAL) and no address in a GID; the port's IPoIB
        # interface carries the address rdma_cm and perftest's TCP exchange use
        netdev = ipoib_netdev(host, device, port)
        out["ipv4"] = ipv4_of_netdev(netdev) if netdev else None
    out["netdev"] = netdev
    # the NIC's NUMA node and its CPUs: both ends of a test run on them (taskset), so that the host memory
    # perftest registers is the NIC's own node's (-1: the kernel knows no node, one-node machines)
    out["numa_node"] = host.read_int("/sys/class/infiniband/%s/device/numa_node" % device)
    out["local_cpulist"] = host.try_attr("/sys/class/infiniband/%s/device/local_cpulist" % device)
    out["operstate"] = host.try_attr("/sys/class/net/%s/operstate" % netdev) if netdev else None
    out["mtu"] = host.read_int("/sys/class/net/%s/mtu" % netdev, problems=[]) if netdev else None
    return out


def ipoib_netdev(host, device, port):
    """The IPoIB interface of an InfiniBand port: a netdev under the device's PCI function
    (``/sys/class/infiniband/<dev>/device/net/*``) of type 32 (ARPHRD_INFINIBAND) whose ``dev_port`` is the
    port number - 1 (as ipoib sets it); a parent interface before its P_Key children (``ib0`` before
    ``ib0.8001``)."""
    base = "/sys/class/infiniband/%s/device/net" % device
    found = []
    for name in host.listdir(base):
        path = "%s/%s" % (base, name)
        if host.try_attr(path + "/type") != "32":
            continue
        dev_port = host.try_attr(path + "/dev_port")
        if dev_port is not None and dev_port.isascii() and dev_port.isdigit() and int(dev_port) != port - 1:
            continue
        found.append(name)
    found.sort(key=lambda n: ("." in n, n))
    return found[0] if found else None


def ipv4_of_netdev(name):
    """The first IPv4 address of interface ``name`` in this network namespace (SIOCGIFADDR), else None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(packed[20:24])


def _crictl(module, crictl, endpoint, args, timeout):
    """``(rc, stdout, stderr, timed_out)``.  Apart: crictl prints the ID it made on stdout and its warnings on
    stderr (v1.34, a pod config without ``cgroup_parent``: ``level=warning msg="cgroup_parent is not set..."``,
    after the ID), so an ID is read from stdout alone."""
    argv = [crictl] + (["--runtime-endpoint", endpoint] if endpoint else []) + list(args)
    rc, out, err, timed_out, dummy = run_bounded_split(module, argv, timeout)
    return rc, out, err, timed_out


def _last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


#: the real kubelet (v1.35, pkg/kubelet/kubelet_pods.go HandlePodCleanups) stops every CRI pod it did not create
#: ("Clean up containers for orphaned pod we had not seen before", 1 s grace) at its housekeeping, every 2 s: a
#: crictl pod on such a node dies under the check (seen in molecule/node_vm at runp, create and start in turn)
KUBELET_RUNS = ("a kubelet runs on this node (pid %d): it stops within seconds every CRI pod it did not create "
                "(its housekeeping cleans up orphaned pods), so a pod started with crictl cannot be checked here; "
                "run step 1 where no kubelet runs (a node before it joins, or with the kubelet stopped)")


def probe_pod(module, params, host):
    """Step 1: the memlock limit (``ulimit -l``) of a container started through the node's CRI runtime.  No
    device is passed in: a pod gets its RDMA devices from the device plugin, which this check does not go
    through, so the devices it lists (``devices_seen``) are informational, not a verdict.  Skipped where a kubelet
    runs (:data:`KUBELET_RUNS`): a verdict that depends on a race with its housekeeping is no verdict."""
    if not params["pod_image"]:
        return {"status": "skipped", "reason": "no pod_image given"}
    crictl = params["crictl"] if os.path.isabs(params["crictl"]) else module.get_bin_path(params["crictl"])
    if not crictl or not os.access(crictl, os.X_OK):
        return {"status": "skipped", "reason": "no CRI client (%s is not on the node)" % params["crictl"]}
    kubelet = _kubelet_host.find_pid(host)
    if kubelet:
        return {"status": "skipped", "reason": KUBELET_RUNS % kubelet}
    if module.check_mode:
        return {"status": "skipped", "reason": "check mode: no container started"}
    endpoint, limit = params["cri_endpoint"], max(params["timeout"], 10)
    workdir = params["run_dir"]
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    name = "rdma-validate-%d" % os.getpid()
    pod_cfg, ctr_cfg = os.path.join(workdir, name + "-pod.json"), os.path.join(workdir, name + "-ctr.json")
    import json  # pylint: disable=import-outside-toplevel
    with open(pod_cfg, "w", encoding="utf-8") as handle:
        json.dump({"metadata": {"name": name, "namespace": "default", "uid": name, "attempt": 1},
                   "linux": {"security_context": {"namespace_options": {"network": 2}}}, "log_directory": workdir},
                  handle)
    with open(ctr_cfg, "w", encoding="utf-8") as handle:
        json.dump({"metadata": {"name": "probe"}, "image": {"image": params["pod_image"]},
                   "command": ["sleep", str(limit + 30)], "log_path": "probe.log"}, handle)
    out = {"status": "fail"}
    pod = None

    def step(args, timeout):
        """crictl's stdout, or None with ``out["reason"]`` set (its stdout and stderr) when it failed."""
        rc, stdout, stderr, timed_out = _crictl(module, crictl, endpoint, args, timeout)
        if rc == 0 and not timed_out:
            return stdout
        said = (stdout + stderr).strip()[-500:]
        out["reason"] = "crictl %s %s: %s" % (args[0], "timed out" if timed_out else "failed", said)
        return None

    try:
        text = step(["runp", pod_cfg], limit)
        if text is None or not _last_line(text):
            out.setdefault("reason", "crictl runp printed no pod sandbox ID")
            return out
        pod = _last_line(text)
        text = step(["create", pod, ctr_cfg, pod_cfg], limit)
        if text is None or not _last_line(text):
            out.setdefault("reason", "crictl create printed no container ID")
            return out
        ctr = _last_line(text)
        if step(["start", ctr], limit) is None:
            # what the container printed before it ended (an image without the shell or sleep says so here)
            # (crictl logs prints the container's stderr lines on its stderr)
            rc, logs, errors, dummy = _crictl(module, crictl, endpoint, ["logs", "--tail", "20", ctr], limit)
            if rc == 0 and (logs + errors).strip():
                out["reason"] += "; the container's log: %s" % (logs + errors).strip()[-500:]
            return out
        text = step(["exec", "-s", "--timeout", str(limit), ctr, "sh", "-c",
                     "echo memlock=$(ulimit -l); ls /dev/infiniband 2>/dev/null | sed 's/^/dev=/'"], limit + 5)
        if text is None:
            return out
        out["output"] = text
        memlock = re.search(r"^memlock=(\S+)", text, re.M)
        seen = re.findall(r"^dev=(\S+)", text, re.M)
        out.update(memlock=memlock.group(1) if memlock else None, devices_seen=seen)
        ok = out["memlock"] == "unlimited"
        out["status"] = "pass" if ok else "fail"
        out["reason"] = None if ok else "ulimit -l in the container is %s, not unlimited" % out["memlock"]
        return out
    finally:
        if pod:
            _crictl(module, crictl, endpoint, ["stopp", pod], limit)
            _crictl(module, crictl, endpoint, ["rmp", "-f", pod], limit)
        for path in (pod_cfg, ctr_cfg):
            if os.path.exists(path):
                os.unlink(path)


def perftest_options(module, path):
    """What this perftest's ``--help`` offers (_perftest.help_options): ``--bind_source_ip`` (23.07+), the only way to
    pin an rdma_cm (``-R``) connection to a rail, and the CUDA options it was built with."""
    dummy, out, dummy2, dummy3 = run_bounded(module, [path, "--help"], 5)
    return _perftest.help_options(out)


def perftest_binds(module, path):
    """True when this perftest has ``--bind_source_ip`` (23.07+): released perftest ignores ``-d`` with ``-R``."""
    return perftest_options(module, path)["bind_source_ip"]


def do_probe(module, params, result):
    host = HostRoot(params["host_root"])
    binary = params["binary"]
    path = binary if os.path.isabs(binary) and os.access(binary, os.X_OK) else module.get_bin_path(binary)
    options = perftest_options(module, path) if path else _perftest.help_options("")
    result.extra["perftest"] = dict(options, binary=binary, path=path)
    result.extra["ports"] = [probe_port(host, d["device"], d["port"], d["gid_index"]) for d in params["devices"]]
    result.extra["pod"] = probe_pod(module, params, host)


# -- server / client / stop --------------------------------------------------------------------------------------
def _perftest_path(module, params):
    binary = params["binary"]
    if os.path.isabs(binary):
        return binary if os.access(binary, os.X_OK) else None
    return module.get_bin_path(binary)


def _test_args(params, job):
    return dict(gid_index=job["gid_index"], size=params["size"], duration=params["duration"] or None,
                iterations=params["iterations"], qps=params["qps"], rdma_cm=params["rdma_cm"],
                bind_source_ip=job.get("bind_source_ip"), cuda_bus_id=job.get("cuda_bus_id"),
                cuda_index=job.get("cuda_index"), cuda_dmabuf=bool(job.get("cuda_dmabuf")))


def _cuda_env(job):
    """A GPU-memory job's environment: CUDA numbers devices FASTEST_FIRST unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and
    ``cuda_index`` is an index in PCI order (``--use_cuda_bus_id`` needs no order)."""
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if job.get("cuda_bus_id") or job.get("cuda_index") is not None else {}


def job_problem(action_name, job):
    """Why ``job`` cannot run (a missing field, a bad port), else None; checked per job so one bad job does not
    stop the node's others."""
    needed = ("device", "tcp_port") + (("server_address",) if action_name == "client" else ())
    missing = [k for k in needed if job.get(k) in (None, "")]
    if missing:
        return "job %s: %s needs %s" % (job["id"], action_name, ", ".join(missing))
    if not 0 < job["tcp_port"] < 65536:
        return "job %s: tcp_port %s is not a TCP port" % (job["id"], job["tcp_port"])
    return None


def _in_netns(module, job, argv):
    if not job.get("netns"):
        return argv
    return [module.get_bin_path("ip", required=True), "netns", "exec", job["netns"]] + argv


def _pinned(module, job, argv):
    """``argv`` under ``taskset -c <the NIC's local CPUs>`` when the job names them."""
    if not job.get("cpus"):
        return argv
    return [module.get_bin_path("taskset", required=True), "-c", job["cpus"]] + argv


def own_run_dir(path):
    """Create ``run_dir`` (0700) or check that it is this user's private directory: a link, another owner or a
    directory others can write are refused, because job files there are created, truncated and removed."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except (IOError, OSError) as exc:
        raise InputError("run_dir %s cannot be created (%s)" % (path, exc.strerror or exc)) from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise InputError("run_dir %s is not a private directory of this user (a link, another owner, or writable "
                         "by others): pick another run_dir or fix its owner and mode" % path)


def _files(params, job_id):
    base = os.path.join(params["run_dir"], job_id)
    return base + ".pid", base + ".log"


def do_server(module, params, result):
    binary = _perftest_path(module, params)
    timeout_cmd = module.get_bin_path("timeout", required=True)
    jobs = []
    own_run_dir(params["run_dir"])
    started = []
    for job in params["jobs"]:
        problem = job_problem("server", job)
        if binary is None or problem:
            jobs.append({"id": job["id"], "status": "not_started",
                         "output": problem or "%s is not installed" % params["binary"]})
            continue
        if not params["rdma_cm"] and port_in_use(module, job):
            # without -R the server listens on this TCP port; with -R it uses the RDMA CM's own port space
            jobs.append({"id": job["id"], "status": "not_started", "port_in_use": True,
                         "output": "TCP port %d is already in use on the node" % job["tcp_port"]})
            continue
        pid_file, log_file = _files(params, job["id"])
        # stdbuf: perftest's stdout is a file here, and its banner must reach the log when printed, not at exit
        perftest = _perftest.server_argv(binary, job["device"], job["port"], job["tcp_port"],
                                         **_test_args(params, job))
        argv = _in_netns(module, job, [timeout_cmd, "--kill-after=%d" % KILL_GRACE, str(params["timeout"]),
                                       module.get_bin_path("stdbuf", required=True), "-oL", "-eL"]
                         + _pinned(module, job, perftest))
        # detached (its own session), output to the log; GNU timeout ends it even if nobody calls stop
        pid = os.posix_spawn(argv[0], argv, dict(os.environ, LC_ALL="C", **_cuda_env(job)), setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2)])
        write_pid_file(pid_file, pid, argv)
        result.add(action("start", job["id"], argv=argv, pid=pid))
        started.append((job, pid))
    deadline = time.time() + params["start_timeout"]
    for job, pid in started:
        status, rc = None, None
        while status is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                status, rc = "exited", _exit_code(code)
            elif listening(pid, job["tcp_port"]):
                status = "listening"
            elif params["rdma_cm"] and banner(log_file_of(params, job)):
                # with -R the server listens through the RDMA connection manager, not a TCP socket: its banner
                # is printed before it binds; a moment's grace covers the gap, and a server that exited in it
                # (its bind failed) is not listening.  Without -R only the TCP socket counts: perftest prints
                # "Waiting for client to connect" before establish_connection() creates it (src/write_bw.c), and
                # a loaded node (the CI's emulated VM) let a client connect in that gap and fail
                time.sleep(0.5)
                done, code = os.waitpid(pid, os.WNOHANG)
                status, rc = ("exited", _exit_code(code)) if done == pid else ("listening", None)
            elif time.time() > deadline:
                status = "not_started"
            else:
                time.sleep(0.2)
        entry = {"id": job["id"], "status": status, "pid": pid, "rc": rc, "port_in_use": False}
        if status != "listening":
            if status == "not_started":
                kill_group(pid)
                entry["waited"] = params["start_timeout"]
            with open(_files(params, job["id"])[1], encoding="utf-8", errors="replace") as handle:
                entry["output"] = tail(handle.read())
        jobs.append(entry)
    result.extra["jobs"] = jobs


def do_client(module, params, result):
    binary = _perftest_path(module, params)
    jobs = []
    for job in params["jobs"]:
        problem = job_problem("client", job)
        if problem:
            jobs.append({"id": job["id"], "rc": None, "timed_out": False, "seconds": 0, "output": problem,
                         "result": {"avg_gbps": None, "errors": [problem]}, "invalid": True})
            continue
        if binary is None:
            jobs.append({"id": job["id"], "rc": 127, "timed_out": False, "seconds": 0,
                         "output": "%s is not installed" % params["binary"], "result": None, "missing": True})
            continue
        argv = _in_netns(module, job, _pinned(module, job, _perftest.client_argv(
            binary, job["device"], job["port"], job["tcp_port"], job["server_address"], **_test_args(params, job))))
        rc, out, timed_out, seconds = run_bounded(module, argv, params["timeout"], env=_cuda_env(job))
        jobs.append({"id": job["id"], "argv": argv, "rc": rc, "timed_out": timed_out, "seconds": seconds,
                     "output": tail(out), "result": _perftest.parse_perftest(out)})
    result.extra["jobs"] = jobs


def do_stop(module, params, result):  # pylint: disable=unused-argument
    jobs = []
    for job in params["jobs"]:
        pid_file, log_file = _files(params, job["id"])
        entry = {"id": job["id"], "was_running": False, "output": None}
        if os.path.lexists(pid_file):
            pid, why = read_pid_file(pid_file)
            if pid is not None and kill_group(pid):
                entry["was_running"] = True
                result.add(action("kill", job["id"], pid=pid))
            elif why:
                entry["gone"] = why
            os.unlink(pid_file)
            result.add(action("remove", pid_file))
        if os.path.lexists(log_file):
            try:
                entry["output"] = tail(read_job_file(log_file))
            except (IOError, OSError) as exc:
                entry["output"] = "(the log cannot be read: %s)" % (exc.strerror or exc)
            entry["result"] = _perftest.parse_perftest(entry["output"])
            os.unlink(log_file)
            result.add(action("remove", log_file))
        jobs.append(entry)
    result.extra["jobs"] = jobs


def do_nccl(module, params, result):
    command = list(params["command"])
    path = command[0] if os.path.isabs(command[0]) else module.get_bin_path(command[0])
    if not path or not os.access(path, os.X_OK):
        result.extra["nccl"] = {"status": "absent", "reason": "nccl-tests not installed (%s not found)" % command[0]}
        return
    env = dict((k, str(v)) for k, v in params["environment"].items())
    env["NCCL_DEBUG"] = "INFO"
    rc, out, timed_out, seconds = run_bounded(module, [path] + command[1:], params["timeout"], env=env)
    result.extra["nccl"] = {"status": "timed_out" if timed_out else "ran", "rc": rc, "seconds": seconds,
                            "output": tail(out), "result": _perftest.parse_nccl(out)}


def do_counters(module, params, result):  # pylint: disable=unused-argument
    """The ports' hw_counters, one reading (the counters layer's own reader)."""
    host = HostRoot(params["host_root"])
    result.extra["counters"] = _counters_observe.read_ports(host, [(d["device"], d["port"]) for d in params["devices"]])


ACTIONS = {"probe": do_probe, "counters": do_counters, "server": do_server, "client": do_client, "stop": do_stop,
           "nccl": do_nccl}
#: the actions that only read: they run in check mode as outside it
READ_ONLY = ("probe", "counters")


#: upper bounds of the numeric options: a day for anything timed, perftest's own limits for the rest
LIMITS = {"timeout": 86400, "start_timeout": 3600, "size": 1 << 30, "qps": 65536, "iterations": 10 ** 9,
          "duration": 86400}
_PEER = re.compile(r"^[A-Za-z0-9_.:%-]{1,253}\Z")
_BDF = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\Z")
_NETNS = re.compile(r"^[A-Za-z0-9_.@+-]{1,255}\Z")
_CPUS = re.compile(r"^[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?){0,1023}\Z")


def validate(params):
    """Every option checked before the node is touched; the InputError names the option and the value."""
    for device in params["devices"]:
        check_name("devices: device", device["device"], "rdma")
        if not 0 < device["port"] < 256:
            raise InputError("devices: port %s of %s is not an RDMA port number" % (device["port"], device["device"]))
    for job in params["jobs"]:
        if not JOB_ID.match(job["id"]) or job["id"] in (".", ".."):
            raise InputError("job id %r: use 1-100 letters, digits, '.', '_' or '-'" % job["id"])
        if job.get("device"):
            check_name("job %s: device" % job["id"], job["device"], "rdma")
        for key in ("server_address", "bind_source_ip"):
            value = job.get(key)
            if value is not None and (not _PEER.match(value) or value.startswith("-")):
                raise InputError("job %s: %s %r is not an address or host name" % (job["id"], key, value))
        if job.get("netns") is not None and (not _NETNS.match(job["netns"]) or job["netns"] in (".", "..")):
            raise InputError("job %s: netns %r is not a network namespace name" % (job["id"], job["netns"]))
        if job.get("cpus") is not None and not _CPUS.match(job["cpus"]):
            raise InputError("job %s: cpus %r is not a CPU list such as 0-7,16" % (job["id"], job["cpus"]))
        if not 0 < job["port"] < 256:
            raise InputError("job %s: port %s is not an RDMA port number" % (job["id"], job["port"]))
        if job.get("cuda_bus_id") is not None and not _BDF.match(job["cuda_bus_id"]):
            raise InputError("job %s: cuda_bus_id %r is not a PCI address such as 0000:1b:00.0" % (job["id"], job["cuda_bus_id"]))
        if job.get("cuda_index") is not None and not 0 <= job["cuda_index"] < 1024:
            raise InputError("job %s: cuda_index %s is not a CUDA device index" % (job["id"], job["cuda_index"]))
    for key in ("timeout", "start_timeout", "size", "qps", "iterations"):
        if not 0 < params[key] <= LIMITS[key]:
            raise InputError("%s must be between 1 and %d, got %s" % (key, LIMITS[key], params[key]))
    if not 0 <= params["duration"] <= LIMITS["duration"]:
        raise InputError("duration must be between 0 and %d, got %s" % (LIMITS["duration"], params["duration"]))
    run_dir = params["run_dir"]
    if not run_dir.startswith("/") or run_dir != os.path.normpath(run_dir) or run_dir == "/" or "\0" in run_dir:
        raise InputError("run_dir must be an absolute, normalised directory path other than /, got %r" % run_dir)
    if params["action"] == "nccl" and not params["command"]:
        raise InputError("command must name the nccl-tests program")


def run_module(module):
    params = module.params
    validate(params)
    result = Result()
    result.extra["skipped"] = False
    if module.check_mode and params["action"] not in READ_ONLY:
        result.extra["skipped"] = True
        result.extra["msg"] = "check mode: %s runs traffic or processes, nothing ran" % params["action"]
        return result.as_dict()
    ACTIONS[params["action"]](module, params, result)
    return result.as_dict()


def main():
    job_spec = dict(
        id=dict(type="str", required=True),
        device=dict(type="str"),
        port=dict(type="int", default=1),
        gid_index=dict(type="int"),
        tcp_port=dict(type="int"),
        server_address=dict(type="str"),
        bind_source_ip=dict(type="str"),
        cpus=dict(type="str"),
        netns=dict(type="str"),
        cuda_bus_id=dict(type="str"),
        cuda_index=dict(type="int"),
        cuda_dmabuf=dict(type="bool", default=False),
    )
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", required=True, choices=sorted(ACTIONS)),
            devices=dict(type="list", elements="dict", default=[], options=dict(
                device=dict(type="str", required=True),
                port=dict(type="int", default=1),
                gid_index=dict(type="int"),
            )),
            jobs=dict(type="list", elements="dict", default=[], options=job_spec),
            binary=dict(type="str", default="ib_write_bw"),
            size=dict(type="int", default=65536),
            duration=dict(type="int", default=5),
            iterations=dict(type="int", default=5000),
            qps=dict(type="int", default=1),
            rdma_cm=dict(type="bool", default=True),
            timeout=dict(type="int", default=60),
            start_timeout=dict(type="int", default=20),
            run_dir=dict(type="path", default="/run/rdma-validate"),
            pod_image=dict(type="str"),
            crictl=dict(type="str", default="crictl"),
            cri_endpoint=dict(type="str"),
            command=dict(type="list", elements="str"),
            environment=dict(type="dict", default={}),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    exit_module(module, run_module)


if __name__ == "__main__":
    main()
