"""One bench per module: its node, a request that changes that node, and every path the change writes through.

``WritePath`` names one place a module writes (a node file, a sysfs attribute, an rtnetlink VF call, a node tool, a
service start) and knows how to make it fail with an errno or a hang through the layer that carries it: the hwsim
fault table for sysfs/rtnetlink, :class:`FileFaults` for regular files, :class:`CommandFault` for tools,
:class:`FakeSystemd` for services.
"""

import json
import os
import pathlib
import subprocess

from ansible_collections.rdma.k8s_node.plugins.modules import (
    containerd_rdma, ib_vf_guids, kernel_cmdline, kubelet_topology, nvidia_peermem, rdma_facts, rdma_netns, sriov_vfs,
    sysctl_dropin,
)
from unit.safety.nodes import (
    Bench, CommandFault, FakeContainerd, FakeSystemd, FileFault, FileFaults, HealthServer, SimNodeBench, base_tree,
    tool,
)

ERRNOS = ("EBUSY", "ENOSPC", "EIO", "EACCES")
KINDS = ERRNOS + ("hang",)
STRERROR = {name: os.strerror(getattr(__import__("errno"), name)) for name in ERRNOS + ("ETIMEDOUT",)}
IB_PF = "0000:18:00.0"
IB_NETDEV = "ibp24s0"


class WritePath:
    """One place a module writes.  ``layer`` is file, sysfs, command or service; ``phases`` (files) or ``skip``
    values (sysfs writes that happen more than once) are the timings a fault can strike at."""

    def __init__(self, label, layer, target, phases=(0,), kinds=KINDS, says=None, match=None):
        self.match = match
        self.label = label
        self.layer = layer
        self.target = target
        self.phases = tuple(phases)
        self.kinds = tuple(kinds)
        self.says = says or target

    def __repr__(self):
        return self.label

    def inject(self, bench, kind, phase, skip=0, persistent=False):
        """Arm the fault (``skip`` matching operations pass first); returns a callable telling whether it fired."""
        count = None if persistent else 1
        if self.layer == "file":
            fault = bench.file_faults.add(FileFault(bench.root / self.target.lstrip("/"), phase,
                                                    "hang" if kind == "hang" else "errno", kind, skip=skip,
                                                    count=count, seconds=0.2))
            return lambda: fault.hits
        if self.layer == "command":
            fault = CommandFault(self.target, "hang" if kind == "hang" else "errno", kind, skip=phase + skip,
                                 count=count, seconds=0.2, match=self.match)
            bench.tools.faults.append(fault)
            return lambda: fault.hits
        if self.layer == "service":
            fired = []

            def fails(root):  # pylint: disable=unused-argument
                if bench.changed_on_disk():
                    fired.append(1)
                    return True
                return False

            bench.systemd.fail_start[self.target] = fails
            return lambda: len(fired)
        if self.layer == "reload":
            bench.systemd.fail_reload = True
            start = len(bench.systemd.log)
            return lambda: len([w for w in bench.systemd.log[start:] if w == ["daemon-reload"]])
        # simulator: a sysfs attribute or an rtnetlink pseudo path; the first ``phase + skip`` writes pass
        passes = phase + skip
        if passes:
            bench.call({"cmd": "fault_add", "path": self.target, "op": "write", "action": "delay", "seconds": 1e-6,
                        "count": passes})
        fault = {"cmd": "fault_add", "path": self.target, "op": "write"}
        if kind == "hang":
            fault.update(action="hang", seconds=bench.hang_seconds)
        else:
            fault.update(action="errno", errno=kind)
        fault["count"] = 10 ** 6 if persistent else 1
        ident = bench.call(fault)["id"]

        def fired():
            left = [f["count"] for f in bench.call({"cmd": "dump"})["faults"] if f["id"] == ident]
            return (10 ** 6 if persistent else 1) - (left[0] if left else 0)
        return fired


# -- kernel_cmdline ------------------------------------------------------------------------------------------------------
KERNEL = "/boot/vmlinuz-6.1.0-28-amd64"


def fake_update_grub(root):
    """grub-mkconfig in miniature: source the defaults like it does, write a normal and a recovery entry."""
    script = ('. ./etc/default/grub; for f in ./etc/default/grub.d/*.cfg; do [ -e "$f" ] && . "$f"; done; '
              'printf "%s\\n%s" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"')
    proc = subprocess.run(["/bin/sh", "-c", script], cwd=root, check=False, capture_output=True, text=True, env={})
    if proc.returncode != 0:  # as grub-mkconfig fails when the defaults cannot be sourced
        return proc.returncode, "", proc.stderr
    linux, default = proc.stdout.split("\n")
    (root / "boot/grub/grub.cfg").write_text(
        "menuentry 'Debian GNU/Linux' {\n\tlinux\t%s root=UUID=abcd ro %s %s\n}\n"
        "menuentry 'Debian GNU/Linux (recovery mode)' {\n\tlinux\t%s root=UUID=abcd ro single %s\n}\n"
        % (KERNEL, linux, default, KERNEL, linux))
    return 0, "Generating grub configuration file ...\ndone\n", ""


class GrubBench(Bench):
    """A Debian node: /etc/default/grub, a drop-in from an earlier run, a generated grub.cfg, update-grub."""

    main = staticmethod(kernel_cmdline.main)
    name = "kernel_cmdline"
    dropin = "/etc/default/grub.d/99-rdma-k8s-node.cfg"

    def __init__(self, tmp_path, monkeypatch, mode="grub_dropin"):
        super().__init__(tmp_path, monkeypatch)
        self.options = {"mode": mode}
        self.mode = mode
        root = self.root
        base_tree(root)
        for directory in ("etc/default/grub.d", "boot/grub"):
            (root / directory).mkdir(parents=True, exist_ok=True)
        (root / "etc/default/grub").write_text(
            'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="console=ttyS0"\n')
        (root / "etc/default/grub.d/init-select.cfg").write_text("# a file Debian ships; not ours\n")
        (root / "proc/cmdline").write_text("BOOT_IMAGE=%s root=UUID=abcd ro console=ttyS0 quiet\n" % KERNEL)
        (root / "proc/cpuinfo").write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n")
        tool(root, "/usr/sbin/update-grub")
        self.tools.handlers["update-grub"] = lambda argv: fake_update_grub(self.root)
        self.file_faults = FileFaults(monkeypatch)
        # an earlier run put iommu=pt in place
        self.run(self.args(present=["iommu=pt"], bootloader=mode))
        fake_update_grub(root)

    def request(self):
        return self.args(present=["iommu=pt", "intel_iommu=on", "ib_core.netns_mode=0"], absent=["quiet"],
                         bootloader=self.mode)

    @classmethod
    def paths(cls, mode="grub_dropin"):
        target = cls.dropin if mode == "grub_dropin" else "/etc/default/grub"
        return [WritePath(target, "file", target, ("write", "create", "replace", "backup")),
                WritePath("update-grub", "command", "update-grub")]


# -- simulated-node modules -----------------------------------------------------------------------------------------------
class SysctlBench(SimNodeBench):
    main = staticmethod(sysctl_dropin.main)
    name = "sysctl_dropin"
    conf = "/etc/sysctl.d/90-rdma-k8s-node.conf"
    sysctl_keys = tuple("net.ipv4.conf.%s.%s" % (i, k) for i in ("all", "default", IB_NETDEV)
                        for k in ("arp_ignore", "arp_announce", "rp_filter"))
    hang_seconds = 0.3

    def __init__(self, tmp_path, monkeypatch):
        super().__init__(tmp_path, monkeypatch)
        self.file_faults = FileFaults(monkeypatch)
        self.baseline_run()

    def baseline_run(self):
        self.run(self.args(settings={"net.ipv4.conf.all.arp_announce": 1}))

    def request(self):
        return self.args(settings={"net.ipv4.conf.all.arp_ignore": 1, "net.ipv4.conf.all.rp_filter": 2,
                                   "net.ipv4.conf.%s.arp_ignore" % IB_NETDEV: 2,
                                   "net.ipv4.conf.%s.rp_filter" % IB_NETDEV: 0})

    @classmethod
    def paths(cls):
        return [WritePath(cls.conf, "file", cls.conf, ("write", "create", "replace", "backup")),
                WritePath("live all.rp_filter", "sysfs", "proc/sys/net/ipv4/conf/all/rp_filter",
                          says="net.ipv4.conf.all.rp_filter"),
                WritePath("live %s.arp_ignore" % IB_NETDEV, "sysfs", "proc/sys/net/ipv4/conf/%s/arp_ignore" % IB_NETDEV,
                          says="net.ipv4.conf.%s.arp_ignore" % IB_NETDEV)]


class NetnsBench(SimNodeBench):
    main = staticmethod(rdma_netns.main)
    name = "rdma_netns"
    conf = "/etc/modprobe.d/rdma-k8s-node-ib_core.conf"
    hang_seconds = 0.3

    def __init__(self, tmp_path, monkeypatch):
        super().__init__(tmp_path, monkeypatch)
        self.file_faults = FileFaults(monkeypatch)
        tool(self.root, "/usr/sbin/update-initramfs")
        self.tools.handlers["update-initramfs"] = lambda argv: (0, "update-initramfs: Generating /boot/initrd.img\n", "")

    def request(self):
        return self.args(mode="exclusive", initramfs="always")

    @classmethod
    def paths(cls):
        return [WritePath(cls.conf, "file", cls.conf, ("write", "create", "replace")),
                WritePath("update-initramfs", "command", "update-initramfs")]


class SriovBench(SimNodeBench):
    """dgx-h100: 2 VFs with link state auto and GUIDs on the first IB rail; the request grows them to 4."""

    main = staticmethod(sriov_vfs.main)
    name = "sriov_vfs"
    hang_seconds = 1.5

    def __init__(self, tmp_path, monkeypatch, spec=None):
        super().__init__(tmp_path, monkeypatch, spec)
        self.baseline_run()

    def baseline_run(self):
        self.run_main(sriov_vfs.main, self.args(netdev=IB_NETDEV, num_vfs=2, vf_defaults={"link_state": "auto"}))
        self.run_guids(scheme="list", guids=["02:00:00:00:00:00:00:01", "02:00:00:00:00:00:00:02"])

    def run_guids(self, **args):
        return self.run_main(ib_vf_guids.main, self.args(netdev=IB_NETDEV, **args))

    def request(self):
        return self.args(netdev=IB_NETDEV, num_vfs=4, allow_vf_reset=True, vf_defaults={"link_state": "auto"},
                         timeout=1)

    @classmethod
    def paths(cls):
        numvfs = "sys/bus/pci/devices/%s/sriov_numvfs" % IB_PF
        return [WritePath("sriov_numvfs (0)", "sysfs", numvfs, (0,), says="sriov_numvfs"),
                WritePath("sriov_numvfs (4)", "sysfs", numvfs, (1,), says="sriov_numvfs"),
                WritePath("ip link set vf 3", "sysfs", "rtnl/%s/vf/3" % IB_NETDEV, (0,), says="vf 3")]


class GuidBench(SriovBench):
    """3 VFs with listed GUIDs; the request moves them to the deterministic pf_guid scheme and exports the pool."""

    main = staticmethod(ib_vf_guids.main)
    name = "ib_vf_guids"
    pool = "/etc/sriov-operator/infiniband/guids"

    def __init__(self, tmp_path, monkeypatch, inbox=False):
        self.inbox = inbox
        super().__init__(tmp_path, monkeypatch, sim_spec_inbox(tmp_path) if inbox else None)
        self.options = {"inbox": inbox}
        self.file_faults = FileFaults(monkeypatch)

    def baseline_run(self):
        from unit.plugins.modules.harness import run_module  # pylint: disable=import-outside-toplevel
        self.activate()
        run_module(self.monkeypatch, sriov_vfs.main,
                   self.args(netdev=IB_NETDEV, num_vfs=3, vf_defaults={"link_state": "auto"}))
        self.run_guids(scheme="list", guids=["02:00:00:00:00:00:00:0%d" % i for i in (1, 2, 3)])

    def request(self):
        return self.args(netdev=IB_NETDEV, timeout=1, export_pool_file=True)

    @classmethod
    def paths(cls, inbox=False):
        if inbox:
            # the netlink path; re-binding and the pool file are the same code as with OFED (covered there)
            return [WritePath("ip link set vf 1 guid", "sysfs", "rtnl/%s/vf/1" % IB_NETDEV, (0, 1), says="vf 1")]
        base = "sys/bus/pci/devices/%s/sriov/1/" % IB_PF
        return [WritePath("ofed sriov/1/node", "sysfs", base + "node", says="sriov/1/node"),
                WritePath("ofed sriov/1/port", "sysfs", base + "port", says="sriov/1/port"),
                WritePath("unbind", "sysfs", "sys/bus/pci/drivers/mlx5_core/unbind", (0, 1), says="VF"),
                WritePath("bind", "sysfs", "sys/bus/pci/drivers/mlx5_core/bind", (0, 2), says="VF"),
                WritePath(cls.pool, "file", cls.pool, ("write", "create", "replace"))]


class PeermemBench(SimNodeBench):
    """The first DGX rail with its GPU: nvidia_peermem loads (OFED present), an openibd unit is installed, so a run
    loads the module and writes the modules-load.d file and the openibd drop-in."""

    main = staticmethod(nvidia_peermem.main)
    name = "nvidia_peermem"
    conf = "/etc/modules-load.d/nvidia-peermem.conf"
    dropin = "/etc/systemd/system/openibd.service.d/10-rdma-k8s-node-nvidia-peermem.conf"
    hang_seconds = 0.3

    def __init__(self, tmp_path, monkeypatch):
        super().__init__(tmp_path, monkeypatch)
        self.file_faults = FileFaults(monkeypatch)
        (self.etc / "modules-load.d").mkdir(exist_ok=True)
        (self.etc / "systemd/system").mkdir(parents=True, exist_ok=True)
        (self.etc / "systemd/system/openibd.service").write_text("[Unit]\nDescription=openibd\n")

    def request(self):
        return self.args(method="peermem")

    @classmethod
    def paths(cls):
        return [WritePath(cls.conf, "file", cls.conf, ("write", "create", "replace")),
                WritePath(cls.dropin, "file", cls.dropin, ("write", "create")),
                WritePath("modprobe nvidia_peermem", "command", "modprobe", says="nvidia_peermem")]


class FactsBench(SimNodeBench):
    main = staticmethod(rdma_facts.main)
    name = "rdma_facts"


# -- containerd_rdma -----------------------------------------------------------------------------------------------------
CONTAINERD_CONFIG = """\
# the operator's containerd config: comments and other settings must survive
version = 2
root = "/var/lib/containerd"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
    username = "puller"
    password = "s3cret"
"""


class ContainerdBench(Bench):
    """containerd 1.7 with a version 2 config.toml, a running service under a fake systemd."""

    main = staticmethod(containerd_rdma.main)
    name = "containerd_rdma"
    config = "/etc/containerd/config.toml"
    dropin = "/etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf"
    spec_file = "/etc/containerd/rdma-k8s-node-base-spec.json"   # containerd_rdma's generated spec

    def __init__(self, tmp_path, monkeypatch, version=(1, 7)):
        super().__init__(tmp_path, monkeypatch)
        root = self.root
        base_tree(root)
        (root / "etc/containerd").mkdir(parents=True)
        (root / "etc/containerd/config.toml").write_text(CONTAINERD_CONFIG)
        os.chmod(root / "etc/containerd/config.toml", 0o600)
        (root / "lib/systemd/system/containerd.service").write_text(
            "[Unit]\nDescription=containerd container runtime\n[Service]\nExecStart=/usr/bin/containerd\n"
            "LimitNPROC=infinity\nLimitCORE=infinity\n")
        tool(root, "/usr/bin/containerd")
        tool(root, "/usr/bin/ctr")
        self.containerd = FakeContainerd(root, version)
        self.systemd = FakeSystemd(root, {"containerd": ["/usr/bin/containerd"]})
        self.tools.handlers.update(containerd=self.containerd, ctr=self.containerd, systemctl=self.systemd.systemctl,
                                   journalctl=self.systemd.journalctl)
        self.file_faults = FileFaults(monkeypatch)
        self.original_config = (root / "etc/containerd/config.toml").read_text()

    def changed_on_disk(self):
        return (self.root / self.config.lstrip("/")).read_text() != self.original_config

    def request(self):
        return self.args(restart=True, restart_timeout=1)

    def observe(self):
        out = super().observe()
        out["services"] = {"containerd": self.systemd.services["containerd"]["state"]}
        return out

    @classmethod
    def paths(cls):
        return [WritePath(cls.dropin, "file", cls.dropin, ("write", "create", "replace")),
                WritePath(cls.spec_file, "file", cls.spec_file, ("write", "create", "replace")),
                WritePath(cls.config, "file", cls.config, ("write", "create", "replace", "backup")),
                WritePath("containerd config dump (check)", "command", "containerd", (1,), says="config dump",
                          match="dump"),
                WritePath("daemon-reload", "reload", "daemon-reload", kinds=("EACCES",), says="daemon-reload"),
                WritePath("containerd start", "service", "containerd", kinds=("EIO",), says="containerd")]


# -- kubelet_topology ----------------------------------------------------------------------------------------------------
KUBELET_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# written by kubeadm
cgroupDriver: systemd
staticPodPath: /etc/kubernetes/manifests
cpuManagerPolicy: none
"""


class KubeletBench(Bench):
    """A kubeadm node: config.yaml, a cpu_manager_state, a running kubelet (1.29: config mode; 1.31 with
    --config-dir: drop-in mode) under a fake systemd, and its /healthz."""

    main = staticmethod(kubelet_topology.main)
    name = "kubelet_topology"
    config = "/var/lib/kubelet/config.yaml"
    state_file = "/var/lib/kubelet/cpu_manager_state"
    dropin_dir = "/etc/kubernetes/kubelet.conf.d"

    def __init__(self, tmp_path, monkeypatch, version="v1.29.6", dropin=False):
        super().__init__(tmp_path, monkeypatch)
        self.options = {"dropin": dropin}
        root = self.root
        base_tree(root)
        self.dropin = dropin
        (root / "var/lib/kubelet").mkdir(parents=True)
        (root / "var/lib/kubelet/config.yaml").write_text(KUBELET_CONFIG)
        (root / "var/lib/kubelet/cpu_manager_state").write_text(
            json.dumps({"policyName": "none", "defaultCpuSet": "", "checksum": 1353318690}))
        for cpu in range(4):
            (root / ("sys/devices/system/cpu/cpu%d" % cpu)).mkdir(parents=True)
        (root / "sys/devices/system/cpu/online").write_text("0-3\n")
        for node in (0, 1):
            (root / ("sys/devices/system/node/node%d" % node)).mkdir(parents=True)
        cmdline = ["/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "--kubeconfig=/etc/kubernetes/kubelet.conf"]
        if dropin:
            (root / self.dropin_dir.lstrip("/")).mkdir(parents=True)
            cmdline.append("--config-dir=" + self.dropin_dir)
        tool(root, "/usr/bin/kubelet")
        self.version = version
        self.systemd = FakeSystemd(root, {"kubelet": cmdline})
        self.health = HealthServer(self.systemd)
        self.tools.handlers.update(kubelet=lambda argv: (0, "Kubernetes %s\n" % self.version, ""),
                                   systemctl=self.systemd.systemctl, journalctl=self.systemd.journalctl)
        self.file_faults = FileFaults(monkeypatch)
        self.original = self.observe()["tree"]

    @classmethod
    def target_of(cls, dropin):
        return cls.dropin_dir + "/50-rdma-k8s-node-topology.conf" if dropin else cls.config

    def target(self):
        return self.target_of(self.dropin)

    def changed_on_disk(self):
        path = self.target().lstrip("/")
        return self.original.get(path) != self.observe()["tree"].get(path)

    def args(self, **extra):
        # settle_time 0: the fake kubelet never dies after answering healthz (test_kubelet_topology.py covers that)
        out = super().args(healthz_url=self.health.url, settle_time=0)
        out.update(extra)
        return out

    def request(self):
        return self.args(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                         reserved_system_cpus="0", restart=True, restart_timeout=1)

    def observe(self):
        out = super().observe()
        out["services"] = {"kubelet": self.systemd.services["kubelet"]["state"]}
        return out

    @classmethod
    def paths(cls, dropin=False, version=None):  # pylint: disable=unused-argument
        return [WritePath(cls.target_of(dropin), "file", cls.target_of(dropin), ("write", "create", "replace") if dropin
                          else ("write", "create", "replace", "backup")),
                WritePath(cls.state_file, "file", cls.state_file, ("move",)),
                WritePath("kubelet start", "service", "kubelet", kinds=("EIO",), says="kubelet")]

    def close(self):
        self.health.close()


def safety_spec(tmp_path, inbox=False):
    """The dgx-h100 archetype cut to its first two PCIe trees - the first InfiniBand rail (ibp24s0, mlx5_0, 16 VFs) with
    its GPU, and the dual-port Ethernet storage card (enp41s0f0np0/enp41s0f1np1, SR-IOV off) - so that every change
    of the simulated tree rebuilds a fifth of the nodes; ``inbox`` drops OFED (VF GUIDs then go through netlink)."""
    import yaml  # pylint: disable=import-outside-toplevel

    import hwsim  # pylint: disable=import-outside-toplevel
    spec = yaml.safe_load(pathlib.Path(hwsim.load("dgx-h100").path).read_text())
    spec["pci"] = [tree for tree in spec["pci"] if tree.get("host_bridge") in ("0000:15", "0000:26")]
    spec.pop("source", None)
    if inbox:
        del spec["ofed"]
    spec["name"] = "safety-dgx%s" % ("-inbox" if inbox else "")
    path = pathlib.Path(tmp_path) / ("%s.yaml" % spec["name"])
    path.write_text(yaml.safe_dump(spec))
    return path


def sim_spec_inbox(tmp_path):
    return safety_spec(tmp_path, inbox=True)


#: every bench of the fault campaign: name -> (class, options)
BENCHES = {
    "kernel_cmdline:grub_dropin": (GrubBench, {"mode": "grub_dropin"}),
    "kernel_cmdline:grub_default": (GrubBench, {"mode": "grub_default"}),
    "sysctl_dropin": (SysctlBench, {}),
    "rdma_netns": (NetnsBench, {}),
    "sriov_vfs": (SriovBench, {}),
    "ib_vf_guids:ofed": (GuidBench, {}),
    "ib_vf_guids:inbox": (GuidBench, {"inbox": True}),
    "containerd_rdma": (ContainerdBench, {}),
    "kubelet_topology:config": (KubeletBench, {}),
    "kubelet_topology:dropin": (KubeletBench, {"version": "v1.31.2", "dropin": True}),
    "nvidia_peermem": (PeermemBench, {}),
}


def bench_paths(name):
    cls, options = BENCHES[name]
    return cls.paths(**options)
