"""Kubelet nodes built from the real-world corpus (tests/fixtures/realworld), read at test time.

Each scenario maps node paths to corpus files (``files``), adds the few files the corpus cannot hold (``extra``:
written by a tool at boot and not published, each marked illustrative), and states the command line systemd runs
for that unit, written out by hand from the unit files (``cmdline``): the oracle the expansion is checked against.
"""

import json
import pathlib

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import host as kh
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot
from ansible_collections.rdma.k8s_node.plugins.modules import kubelet_topology
from unit.safety.nodes import Bench, FakeSystemd, HealthServer, base_tree, tool

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "realworld"

KUBEADM_UNIT = {
    "/usr/lib/systemd/system/kubelet.service": "kubeadm/rpm/usr/lib/systemd/system/kubelet.service",
    "/var/lib/kubelet/config.yaml": "kubeadm/v1.34-capture/var/lib/kubelet/config.yaml.raw",
}
#: nodeadm writes /etc/eks/kubelet/environment at boot; not in the corpus.  Illustrative, in the shape a public test of
#: a nodeadm patcher shows (one unquoted line, every flag), with TEST-NET addresses and --config-dir added.
AL2023_ENVIRONMENT = ("NODEADM_KUBELET_ARGS=--runtime-cgroups=/runtime.slice/containerd.service "
                      "--config=/etc/kubernetes/kubelet/config.json --config-dir=/etc/kubernetes/kubelet/config.json.d "
                      "--kubeconfig=/var/lib/kubelet/kubeconfig --node-ip=192.0.2.20 --cloud-provider=external "
                      "--hostname-override=ip-192-0-2-20.us-west-2.compute.internal "
                      "--node-labels=nvidia.com/gpu.present=true\n")

SCENARIOS = {
    "kubeadm-deb": {
        "files": dict(KUBEADM_UNIT, **{
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf":
                "kubeadm/deb/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
            "/var/lib/kubelet/kubeadm-flags.env": "kubeadm/v1.29-containerd/var/lib/kubelet/kubeadm-flags.env",
            "/etc/default/kubelet": "kubeadm/rpm/etc/sysconfig/kubelet",
        }),
        "version": "v1.31.4", "config": "/var/lib/kubelet/config.yaml", "fmt": "yaml", "mode": "config",
        "cmdline": ["/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                    "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml",
                    "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
                    "--pod-infra-container-image=registry.k8s.io/pause:3.9", "--v=5"],
    },
    "kubeadm-rpm-user-edited": {
        "files": dict(KUBEADM_UNIT, **{
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf":
                "kubeadm/rpm/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
            "/var/lib/kubelet/kubeadm-flags.env": "kubeadm/user-edited/var/lib/kubelet/kubeadm-flags.env",
            "/etc/sysconfig/kubelet": "kubeadm/rpm/etc/sysconfig/kubelet",
        }),
        "version": "v1.28.15", "config": "/var/lib/kubelet/config.yaml", "fmt": "yaml", "mode": "config",
        "cmdline": ["/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                    "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml",
                    "--pod-infra-container-image=registry.k8s.io/pause:3.8"],
    },
    "kubeadm-crio-1.24": {
        "files": dict(KUBEADM_UNIT, **{
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf":
                "kubeadm/deb/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
            "/var/lib/kubelet/kubeadm-flags.env": "kubeadm/v1.24-crio/var/lib/kubelet/kubeadm-flags.env",
        }),
        "version": "v1.24.17", "config": "/var/lib/kubelet/config.yaml", "fmt": "yaml", "mode": "config",
        "options": False,  # prefer-closest-numa-nodes needs 1.26+ with a gate, 1.28 without
        "cmdline": ["/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                    "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml",
                    "--container-runtime=remote", "--container-runtime-endpoint=unix:///var/run/crio/crio.sock",
                    "--pod-infra-container-image=k8s.gcr.io/pause:3.7"],
    },
    "eks-al2": {
        "files": {
            "/etc/systemd/system/kubelet.service": "eks-al2/etc/systemd/system/kubelet.service",
            "/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf":
                "eks-al2/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf",
            "/etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf":
                "eks-al2/etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf",
            "/etc/kubernetes/kubelet/kubelet-config.json": "eks-al2/etc/kubernetes/kubelet/kubelet-config.json",
        },
        "version": "v1.29.10", "config": "/etc/kubernetes/kubelet/kubelet-config.json", "fmt": "json", "mode": "config",
        "cmdline": ["/usr/bin/kubelet", "--config", "/etc/kubernetes/kubelet/kubelet-config.json",
                    "--kubeconfig", "/var/lib/kubelet/kubeconfig",
                    "--container-runtime-endpoint", "unix:///run/containerd/containerd.sock",
                    "--image-credential-provider-config", "/etc/eks/image-credential-provider/config.json",
                    "--image-credential-provider-bin-dir", "/etc/eks/image-credential-provider",
                    "--node-ip=192.0.2.10",
                    "--pod-infra-container-image=602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5",
                    "--v=2", "--hostname-override=ip-192-0-2-10.us-west-2.compute.internal", "--cloud-provider=external",
                    "--node-labels=nvidia.com/gpu.present=true",
                    "--register-with-taints=nvidia.com/gpu=true:NoSchedule"],
    },
    "eks-al2023": {
        "files": {
            "/etc/systemd/system/kubelet.service": "eks-al2023/etc/systemd/system/kubelet.service",
            "/etc/systemd/system/kubelet.service.d/environment.conf":
                "eks-al2023/etc/systemd/system/kubelet.service.d/environment.conf",
            "/etc/kubernetes/kubelet/config.json": "eks-al2023/etc/kubernetes/kubelet/config.json",
            "/etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf":
                "eks-al2023/etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf",
        },
        "extra": {"/etc/eks/kubelet/environment": AL2023_ENVIRONMENT},
        "version": "v1.31.3", "config": "/etc/kubernetes/kubelet/config.json", "fmt": "json", "mode": "dropin",
        "dropin_dir": "/etc/kubernetes/kubelet/config.json.d",
        "cmdline": ["/usr/bin/kubelet", "--runtime-cgroups=/runtime.slice/containerd.service",
                    "--config=/etc/kubernetes/kubelet/config.json",
                    "--config-dir=/etc/kubernetes/kubelet/config.json.d", "--kubeconfig=/var/lib/kubelet/kubeconfig",
                    "--node-ip=192.0.2.20", "--cloud-provider=external",
                    "--hostname-override=ip-192-0-2-20.us-west-2.compute.internal",
                    "--node-labels=nvidia.com/gpu.present=true"],
    },
    "eks-al2023-1.29": {  # --config-dir with a kubelet older than 1.30: the config file is edited, the drop-in merged
        "base": "eks-al2023", "version": "v1.29.10", "mode": "config",
    },
    "kubespray": {
        "files": {
            "/etc/systemd/system/kubelet.service": "kubespray/etc/systemd/system/kubelet.service",
            "/etc/kubernetes/kubelet.env": "kubespray/etc/kubernetes/kubelet.env",
            "/etc/kubernetes/kubelet-config.yaml": "kubespray/etc/kubernetes/kubelet-config.yaml.raw",
        },
        "binary": "/usr/local/bin/kubelet",
        "version": "v1.32.5", "config": "/etc/kubernetes/kubelet-config.yaml", "fmt": "yaml", "mode": "config",
        "cmdline": ["/usr/local/bin/kubelet", "--v=2", "--node-ip=192.0.2.10", "--hostname-override=node1",
                    "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                    "--config=/etc/kubernetes/kubelet-config.yaml", "--kubeconfig=/etc/kubernetes/kubelet.conf",
                    "--runtime-cgroups=/system.slice/containerd.service",
                    "--volume-plugin-dir=/usr/libexec/kubernetes/kubelet-plugins/volume/exec"],
    },
}


def scenario(name):
    """The scenario ``name`` with a ``base`` scenario's fields filled in."""
    spec = dict(SCENARIOS[name])
    if "base" in spec:
        merged = dict(SCENARIOS[spec.pop("base")])
        merged.update(spec)
        spec = merged
    spec.setdefault("extra", {})
    spec.setdefault("binary", "/usr/bin/kubelet")
    spec.setdefault("options", True)
    return spec


def build_tree(root, spec):
    """Write the scenario's corpus files (read from tests/fixtures/realworld now) and extras under ``root``."""
    for node_path, corpus in spec["files"].items():
        target = root / node_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((CORPUS / corpus).read_bytes())
    for node_path, text in spec["extra"].items():
        target = root / node_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def write(root, node_path, text):
    target = root / node_path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def build_node(root, spec):
    """The scenario's files on a base tree, a cpu_manager_state, 4 CPUs, 2 NUMA nodes and the kubelet's binary."""
    base_tree(root)
    build_tree(root, spec)
    write(root, "/var/lib/kubelet/cpu_manager_state",
          json.dumps({"policyName": "none", "defaultCpuSet": "", "checksum": 1353318690}))
    for cpu in range(4):
        (root / ("sys/devices/system/cpu/cpu%d" % cpu)).mkdir(parents=True)
    write(root, "/sys/devices/system/cpu/online", "0-3\n")
    for node in (0, 1):
        (root / ("sys/devices/system/node/node%d" % node)).mkdir(parents=True)
    tool(root, spec["binary"])


class RealKubeletBench(Bench):
    """A node built from one corpus scenario: its unit, environment and config files, a kubelet running with the
    scenario's command line under a fake systemd (or stopped), 4 CPUs, 2 NUMA nodes, a cpu_manager_state."""

    main = staticmethod(kubelet_topology.main)
    name = "kubelet_topology"

    def __init__(self, tmp_path, monkeypatch, name, running=True):
        super().__init__(tmp_path, monkeypatch)
        self.spec = scenario(name)
        root = self.root
        build_node(root, self.spec)
        self.systemd = FakeSystemd(root, {"kubelet": list(self.spec["cmdline"])})
        real_start = self.systemd._start  # pylint: disable=protected-access

        def start(name):
            # like systemd: every start builds the command line from the unit files as they are now
            self.systemd.services[name]["cmdline"] = self.unit_cmdline()
            return real_start(name)
        self.systemd._start = start  # pylint: disable=protected-access
        if not running:
            self.systemd._stop("kubelet")  # pylint: disable=protected-access
        self.health = HealthServer(self.systemd)
        self.tools.handlers.update(kubelet=lambda argv: (0, "Kubernetes %s\n" % self.spec["version"], ""),
                                   systemctl=self.systemd.systemctl, journalctl=self.systemd.journalctl)

    def args(self, **extra):
        out = super().args(healthz_url=self.health.url, settle_time=0, restart_timeout=5)
        out.update(extra)
        return out

    def request(self, **extra):
        """A Topology Manager + static CPU manager request every scenario can take."""
        args = dict(topology_manager_policy="single-numa-node", topology_manager_scope="pod",
                    cpu_manager_policy="static", reserved_system_cpus="0-1", restart=True)
        if self.spec["options"]:
            args["topology_manager_policy_options"] = {"prefer-closest-numa-nodes": "true"}
        args.update(extra)
        return self.args(**args)

    def read(self, node_path):
        path = self.root / node_path.lstrip("/")
        return path.read_text() if path.exists() else None

    def unit_cmdline(self):
        """The command line systemd builds from the node's unit files now (the expansion the oracle test pins)."""
        host = HostRoot(str(self.root))
        return [word for word, dummy_origin in kh.unit_command(host, kh.unit_files(host), [])]

    def restart_kubelet(self):
        """systemctl restart kubelet (after a unit or environment change made by the test)."""
        self.systemd.systemctl(["systemctl", "restart", "kubelet"])

    def close(self):
        self.health.close()


# -- k3s and rke2: the kubelet runs inside their process, flags from their config files -------------------------------
#: k3s writes 00-k3s-defaults.conf at every start by marshalling a Go struct (pkg/daemons/agent/agent.go
#: defaultKubeletConfig); no published copy exists.  Illustrative: a few of the fields it sets, in the sorted key order
#: sigs.k8s.io/yaml writes.
K3S_DEFAULTS = """apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 2m0s
    enabled: true
cgroupDriver: systemd
clusterDomain: cluster.local
cpuManagerReconcilePeriod: 10s
evictionHard:
  imagefs.available: 5%
  nodefs.available: 5%
failSwapOn: false
healthzBindAddress: 127.0.0.1
kind: KubeletConfiguration
"""
K3S_DROPINS = "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d"
RKE2_DROPINS = "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d"

RANCHER_SCENARIOS = {
    "k3s-server": {  # install.sh's unit (server, no arguments) and the CIS-hardened server config of k3s's tests
        "files": {"/etc/systemd/system/k3s.service": "k3s/units/k3s.service",
                  "/etc/rancher/k3s/config.yaml": "k3s/hardened/server/config.yaml.raw"},
        "extra": {K3S_DROPINS + "/00-k3s-defaults.conf": K3S_DEFAULTS},
        "service": "k3s", "binary": "/usr/local/bin/k3s", "version": "k3s version v1.32.5+k3s1 (8e8f2a47)\n",
        "dropin_dir": K3S_DROPINS, "cmdline": ["/usr/local/bin/k3s", "server"],
    },
    "k3s-agent": {  # install.sh's agent unit with --kubelet-arg=cpu-manager-policy=none, the hardened agent config
        "files": {"/etc/systemd/system/k3s-agent.service": "k3s/units/k3s-agent.service",
                  "/etc/rancher/k3s/config.yaml": "k3s/hardened/agent/config.yaml.raw"},
        "extra": {K3S_DROPINS + "/00-k3s-defaults.conf": K3S_DEFAULTS},
        "service": "k3s-agent", "binary": "/usr/local/bin/k3s", "version": "k3s version v1.33.1+k3s1 (99d91538)\n",
        "dropin_dir": K3S_DROPINS, "cmdline": ["/usr/local/bin/k3s", "agent", "--kubelet-arg=cpu-manager-policy=none"],
    },
    "rke2-agent": {  # rke2's own unit, the hardened agent config as /etc/rancher/rke2/config.yaml
        "files": {"/usr/local/lib/systemd/system/rke2-agent.service": "k3s/units/rke2-agent.service",
                  "/etc/rancher/rke2/config.yaml": "k3s/hardened/agent/config.yaml.raw"},
        "extra": {RKE2_DROPINS + "/00-rke2-defaults.conf": K3S_DEFAULTS},
        "service": "rke2-agent", "binary": "/usr/local/bin/rke2", "version": "rke2 version v1.32.5+rke2r1 (4d2b7e1a)\n",
        "dropin_dir": RKE2_DROPINS, "cmdline": ["/usr/local/bin/rke2", "agent"],
    },
}


class RancherKubeletBench(RealKubeletBench):
    """A k3s or rke2 node: their unit under a fake systemd (the kubelet's healthz follows it), their config files,
    k3s's drop-in directory with its defaults, 4 CPUs, 2 NUMA nodes, a cpu_manager_state."""

    def __init__(self, tmp_path, monkeypatch, name, running=True):  # pylint: disable=super-init-not-called
        Bench.__init__(self, tmp_path, monkeypatch)  # pylint: disable=non-parent-init-called
        self.spec = dict(RANCHER_SCENARIOS[name], options=True)
        root = self.root
        build_node(root, self.spec)
        service = self.spec["service"]
        self.systemd = FakeSystemd(root, {service: list(self.spec["cmdline"])})
        if not running:
            self.systemd._stop(service)  # pylint: disable=protected-access
        self.health = HealthServer(_ServiceHealth(self.systemd, service))  # healthz answers while the k3s unit runs
        name_of = self.spec["binary"].rsplit("/", 1)[1]
        self.tools.handlers.update({name_of: lambda argv: (0, self.spec["version"], ""),
                                    "systemctl": self.systemd.systemctl, "journalctl": self.systemd.journalctl})

    def restart_kubelet(self):
        self.systemd.systemctl(["systemctl", "restart", self.spec["service"]])


class _ServiceHealth:  # pylint: disable=too-few-public-methods
    """The fake systemd as HealthServer asks it ("is the kubelet active?"): the k3s/rke2 unit's state."""

    def __init__(self, systemd, service):
        self.systemd, self.service = systemd, service

    def active(self, dummy_name):
        return self.systemd.active(self.service)
