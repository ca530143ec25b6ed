"""Bad-input matrix: every module, every kind of bad input -> a failure that names the option (or file), ZERO writes.

Each case runs the real module against a node (simulated DGX H100, or a plain node tree with its tools stood in
for) and proves that nothing was written: the node tree outside sys/proc is byte-identical (content, mode, owner,
links), the simulator's write probe counted no write() to sysfs or rtnetlink and its state dump is unchanged,
the real-sysctl stand-in was not called, and no node-changing command (update-grub, systemctl restart, ip link
set, sysctl -w ...) ran.
"""

import collections

import pytest

from ansible_collections.rdma.k8s_node.plugins.modules import (
    ib_vf_guids, nvidia_peermem, rdma_facts, rdma_netns, sriov_vfs, sysctl_dropin,
)
from unit.plugins.modules.harness import ModuleFail
from unit.safety.benches import ContainerdBench, FactsBench, GrubBench, KubeletBench
from unit.safety.nodes import tree_diff

Case = collections.namedtuple("Case", "module bench args names prepare")


def case(module, bench, args, names, prepare=None, marks=()):
    return pytest.param(Case(module, bench, args, names, prepare), marks=marks,
                        id="%s-%s" % (module, names.replace("/", "_")[:40]))


def write(path, text, *more):
    """A ``prepare`` step: put (bad) files on the node before the run: ``write(path, text[, path, text ...])``."""
    files = [(path, text)] + list(zip(more[::2], more[1::2]))

    def prepare(bench):
        for name, content in files:
            target = bench.root / name.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    return prepare


def set_attr(path, value):
    """A ``prepare`` step: set ``bench.<path>`` (dotted) to ``value``, e.g. the version a stand-in tool prints."""
    def prepare(bench):
        owner = bench
        *parents, last = path.split(".")
        for name in parents:
            owner = getattr(owner, name)
        setattr(owner, last, value)
    return prepare


POOL = "/etc/sriov-operator/infiniband/guids"
G = "02:00:00:00:00:00:00:%02x"

CASES = [
    # -- kernel_cmdline ------------------------------------------------------------------------------------------------
    case("kernel_cmdline", "grub", {"present": ["iommu pt"]}, "present"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt;reboot"]}, "present"),
    case("kernel_cmdline", "grub", {"present": ["$(reboot)"]}, "present"),
    case("kernel_cmdline", "grub", {"present": ["=pt"]}, "present"),
    case("kernel_cmdline", "grub", {"present": [""]}, "present"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt\nGRUB_DISABLE_OS_PROBER=false"]}, "present"),
    case("kernel_cmdline", "grub", {"absent": ["a)touch${IFS}/tmp/pwned;;b"]}, "absent"),
    case("kernel_cmdline", "grub", {"absent": ["$(reboot)"]}, "absent"),
    case("kernel_cmdline", "grub", {"absent": ["`id`"]}, "absent"),
    case("kernel_cmdline", "grub", {"absent": ["quiet\nsplash"]}, "absent"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "absent": ["iommu"]}, "absent"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "bootloader": "lilo"}, "bootloader"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "dropin": "/etc/default/grub.d/../grub"}, "dropin"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "dropin": "/etc/default/grub.d/a\nb.cfg"}, "dropin"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "dropin": "/etc/default/grub.d/a\0b.cfg"}, "dropin"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "dropin": "/etc/default/grub.d/.cfg"}, "dropin"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "vendor_iommu": "maybe"}, "vendor_iommu"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "update": "yes please"}, "update"),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "presnt": ["x"]}, "presnt"),
    case("kernel_cmdline", "grub", {"present": "iommu=pt", "host_root": "relative/root"}, "host_root"),
    case("kernel_cmdline", "grub", {"vendor_iommu": True}, "vendor_iommu",
         write("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: ARM\n")),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"], "bootloader": "grub_default"}, "/etc/default/grub",
         write("/etc/default/grub", 'GRUB_CMDLINE_LINUX="$(cat /etc/hostname)"\n')),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"]}, "/etc/default/grub.d/50-broken.cfg",
         write("/etc/default/grub.d/50-broken.cfg", 'GRUB_CMDLINE_LINUX="unterminated\n')),
    case("kernel_cmdline", "grub", {"present": ["iommu=pt"]}, "/etc/default/grub",
         lambda bench: (bench.root / "etc/default/grub").unlink()),
    # -- rdma_netns ----------------------------------------------------------------------------------------------------
    case("rdma_netns", "sim", {"mode": "both"}, "mode"),
    case("rdma_netns", "sim", {}, "mode"),
    case("rdma_netns", "sim", {"mode": "shared", "conf_file": "/etc/modprobe.d/../modprobe.conf"}, "conf_file"),
    case("rdma_netns", "sim", {"mode": "shared", "conf_file": "/etc/modprobe.d/ib_core.txt"}, "conf_file"),
    case("rdma_netns", "sim", {"mode": "shared", "initramfs": "sometimes"}, "initramfs"),
    case("rdma_netns", "sim", {"mode": "shared", "live": "perhaps"}, "live"),
    case("rdma_netns", "sim", {"mode": "exclusive"}, "/etc/modprobe.d/zz-later.conf",
         write("/etc/modprobe.d/zz-later.conf", "options ib_core netns_mode=1\n")),
    case("rdma_netns", "sim", {"mode": "shared", "host_root": "/nonexistent/root"}, "host_root"),
    # kmod skips dot files (_modprobe): a hidden conf_file would never apply, so it is a conflict, not a success
    case("rdma_netns", "fresh", {"mode": "shared", "initramfs": "never", "conf_file": "/etc/modprobe.d/.hidden.conf"},
         "/etc/modprobe.d/.hidden.conf"),
    # -- sysctl_dropin -------------------------------------------------------------------------------------------------
    case("sysctl_dropin", "sim", {"settings": {}}, "settings"),
    case("sysctl_dropin", "sim", {"settings": ["net.ipv4.conf.all.arp_ignore"]}, "settings"),
    case("sysctl_dropin", "sim", {"settings": {"net/../../etc/passwd": 1}}, "settings"),
    case("sysctl_dropin", "sim", {"settings": {"net.ipv4.conf.all.arp_ignore": "1; reboot"}}, "settings"),
    case("sysctl_dropin", "sim", {"settings": {"net.ipv4.conf.all.arp_ignore": "1\nkernel.panic = 1"}}, "settings"),
    case("sysctl_dropin", "sim", {"settings": {"net.ipv4.conf.all.arp_ignore": True}}, "settings"),
    case("sysctl_dropin", "sim", {"settings": {"net.ipv4.conf.all.arp_ignore\0": 1}}, "settings"),
    case("sysctl_dropin", "sim", {"settings": {"net.ipv4.conf.all.arp_ignore": 1, "net/ipv4/conf/all/arp_ignore": 2}},
         "settings"),
    case("sysctl_dropin", "sim", {"settings": {"a.b": 1}, "path": "/etc/sysctl.conf"}, "path"),
    case("sysctl_dropin", "sim", {"settings": {"a.b": 1}, "path": "/etc/sysctl.d/../x.conf"}, "path"),
    case("sysctl_dropin", "sim", {"settings": {"a.b": 1}, "path": "/etc/sysctl.d/a\nb.conf"}, "path"),
    case("sysctl_dropin", "sim", {"settings": {"a.b": 1}, "live": "maybe"}, "live"),
    # -- sriov_vfs (the PF has 2 VFs) ------------------------------------------------------------------------------------
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": -1}, "num_vfs"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": "four"}, "num_vfs"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 1.5}, "num_vfs"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 17, "allow_vf_reset": True}, "num_vfs"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 4}, "allow_vf_reset"),
    case("sriov_vfs", "sim", {"netdev": "../ibp24s0", "num_vfs": 2}, "netdev"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0/../lo", "num_vfs": 2}, "netdev"),
    case("sriov_vfs", "sim", {"netdev": "nope0", "num_vfs": 2}, "netdev"),
    case("sriov_vfs", "sim", {"rdma_device": "mlx5_0\n", "num_vfs": 2}, "rdma_device"),
    case("sriov_vfs", "sim", {"pci_address": "0000:18:00.9", "num_vfs": 2}, "pci_address"),
    case("sriov_vfs", "sim", {"pci_address": "zz:00.0", "num_vfs": 2}, "pci_address"),
    case("sriov_vfs", "sim", {"pci_address": "0000:18:00.1", "num_vfs": 2}, "pci_address"),
    case("sriov_vfs", "sim", {"pci_address": "0000:99:00.0", "num_vfs": 2}, "pci_address"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "pci_address": "0000:18:00.0", "num_vfs": 2}, "netdev"),
    case("sriov_vfs", "sim", {"num_vfs": 2}, "pci_address"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 2, "vf_defaults": {"vlan": 10}}, "vlan"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 2, "vf_defaults": {"link_state": "up"}}, "link_state"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 2, "vfs": [{"index": 2}]}, "index"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 2, "vfs": [{"index": 0}, {"index": 0}]}, "index"),
    case("sriov_vfs", "sim", {"netdev": "enp41s0f0np0", "num_vfs": 2}, "SRIOV_EN"),
    case("sriov_vfs", "sim", {"netdev": "ibp24s0", "num_vfs": 2, "timeout": "soon"}, "timeout"),
    # -- ib_vf_guids (the PF has 2 VFs) ----------------------------------------------------------------------------------
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "guid_prefix": "zz"}, "guid_prefix"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "guid_prefix": "01"}, "guid_prefix"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "list"}, "guids"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "list", "guids": ["02:00:00:00:00:00:00", G % 2]},
         "guids[0]"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "list", "guids": [G % 1, "00:00:00:00:00:00:00:00"]},
         "guids[1]"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "list", "guids": ["ff:ff:ff:ff:ff:ff:ff:ff", G % 2]},
         "guids[0]"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "list", "guids": [G % 9, G % 9]}, "guids"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "list", "guids": [G % 9]}, "guids"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "guids": [G % 8, G % 9]}, "guids"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "pool_file", "export_pool_file": True}, "export_pool_file"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "pool_file"}, POOL),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "pool_file"}, POOL, write(POOL, "[{not json")),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "pool_file"}, POOL,
         # (an unknown key is ignored by the operator's decoder, as here; a GUID in sysfs spelling it refuses)
         write(POOL, '[{"pciAddress": "0000:18:00.0", "guids": ["%s", "0200:0000:0000:0009"], "colour": 1}]' % (G % 8))),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "pool_file", "pool_file": "relative/guids"}, "pool_file"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "export_pool_file": True, "pool_file": "/etc/x/../../guids"},
         "pool_file"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "exclude_guids": ["nope"]}, "exclude_guids"),
    case("ib_vf_guids", "sim", {"netdev": "enp41s0f0np0"}, "netdev"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0/../ibp64s0"}, "netdev"),
    case("ib_vf_guids", "sim", {"pci_address": "0000:18:00.1"}, "pci_address"),
    case("ib_vf_guids", "sim", {"netdev": "ibp24s0", "scheme": "mac"}, "scheme"),
    # -- containerd_rdma -----------------------------------------------------------------------------------------------
    case("containerd_rdma", "containerd", {"memlock": "lots"}, "memlock"),
    case("containerd_rdma", "containerd", {"memlock": "-1"}, "memlock"),
    case("containerd_rdma", "containerd", {"nofile": 10}, "nofile"),
    case("containerd_rdma", "containerd", {"nofile": "many"}, "nofile"),
    case("containerd_rdma", "containerd", {"config": "etc/containerd/config.toml"}, "config"),
    case("containerd_rdma", "containerd", {"base_runtime_spec": "/etc/containerd/base.yaml"}, "base_runtime_spec"),
    case("containerd_rdma", "containerd", {"runtimes": ['run"c']}, "runtimes"),
    case("containerd_rdma", "containerd", {"runtimes": ["nvidia"]}, "runtimes"),
    case("containerd_rdma", "containerd", {"cdi_spec_dirs": []}, "cdi_spec_dirs"),
    case("containerd_rdma", "containerd", {"cdi_spec_dirs": ["etc/cdi"]}, "cdi_spec_dirs"),
    case("containerd_rdma", "containerd", {"service": "containerd.service"}, "service"),
    case("containerd_rdma", "containerd", {"service": "-H evil-host"}, "service"),
    case("containerd_rdma", "containerd", {"service": "contain\nerd"}, "service"),
    case("containerd_rdma", "containerd",
         {"unit_dropin": "/etc/systemd/system/containerd.service.d/../x.conf"}, "unit_dropin"),
    case("containerd_rdma", "containerd",
         {"unit_dropin": "/etc/systemd/system/containerd.service.d/a\nb.conf"}, "unit_dropin"),
    case("containerd_rdma", "containerd", {"restart_timeout": 0}, "restart_timeout"),
    case("containerd_rdma", "containerd", {}, "/etc/containerd/config.toml",
         write("/etc/containerd/config.toml", 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n')),
    case("containerd_rdma", "containerd", {}, "/etc/containerd/config.toml",
         write("/etc/containerd/config.toml", '[plugins.cri]\n  sandbox_image = "pause:3.2"\n')),
    case("containerd_rdma", "containerd", {}, "/etc/containerd/config.toml",
         write("/etc/containerd/config.toml", 'version = 3\n')),
    case("containerd_rdma", "containerd", {}, "/etc/containerd/conf.d/10-bad.toml",
         write("/etc/containerd/config.toml", 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
               "/etc/containerd/conf.d/10-bad.toml", "[plugins\n")),
    case("containerd_rdma", "containerd", {}, "containerd --version",
         set_attr("containerd.version_text", "containerd: error while loading shared libraries: libseccomp.so.2")),
    # -- kubelet_topology ----------------------------------------------------------------------------------------------
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "numa"}, "topology_manager_policy"),
    case("kubelet_topology", "kubelet", {"topology_manager_scope": "node"}, "topology_manager_scope"),
    case("kubelet_topology", "kubelet", {"cpu_manager_policy": "static", "restart": True}, "reserved_system_cpus"),
    case("kubelet_topology", "kubelet", {"cpu_manager_policy": "static", "reserved_system_cpus": "0-99",
                                         "restart": True}, "reserved_system_cpus"),
    case("kubelet_topology", "kubelet", {"reserved_system_cpus": "3-1"}, "reserved_system_cpus"),
    case("kubelet_topology", "kubelet", {"reserved_system_cpus": "a,b"}, "reserved_system_cpus"),
    case("kubelet_topology", "kubelet", {"memory_manager_policy": "Static", "restart": True}, "reserved_memory"),
    case("kubelet_topology", "kubelet", {"memory_manager_policy": "static"}, "memory_manager_policy"),
    case("kubelet_topology", "kubelet", {"memory_manager_policy": "Static", "restart": True,
                                         "reserved_memory": [{"numa_node": 7, "limits": {"memory": "1Gi"}}]},
         "reserved_memory"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy_options": {"bogus": "true"}},
         "topology_manager_policy_options"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy_options": {"max-allowable-numa-nodes": "4"}},
         "topology_manager_policy_options"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted"}, "topology_manager_policy",
         set_attr("version", "v1.17.4")),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted"}, "kubelet",
         set_attr("version", "garbage")),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted", "dropin_name": "../x.conf"},
         "dropin_name"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted", "dropin_name": "x.yaml"}, "dropin_name"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted", "dropin_name": "a\nb.conf"},
         "dropin_name"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted", "mode": "dropin"}, "mode"),
    case("kubelet_topology", "kubelet", {}, "topology_manager_policy"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted", "restart": True,
                                         "healthz_url": "file:///etc/shadow"}, "healthz_url"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted", "restart": True,
                                         "restart_timeout": 0}, "restart_timeout"),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted"}, "/var/lib/kubelet/config.yaml",
         write("/var/lib/kubelet/config.yaml", "kind: KubeletConfiguration\ncpuManagerPolicy: [none\n")),
    case("kubelet_topology", "kubelet", {"topology_manager_policy": "restricted"}, "/var/lib/kubelet/config.yaml",
         write("/var/lib/kubelet/config.yaml", "- a\n- list\n")),
    # -- rdma_facts ----------------------------------------------------------------------------------------------------
    case("rdma_facts", "sim", {"host_root": "relative"}, "host_root"),
    case("rdma_facts", "sim", {"host_root": "/nonexistent/host"}, "host_root"),
    case("rdma_facts", "sim", {"host_root": "/etc/hostname"}, "host_root"),
    case("rdma_facts", "sim", {"root": "/"}, "root"),
    case("rdma_facts", "sim", {"gather_subset": ["all"]}, "gather_subset"),
    # -- nvidia_peermem (written in parallel; added once committed) ------------------------------------------------------
    case("nvidia_peermem", "sim", {"method": "gpudirect"}, "method"),
    case("nvidia_peermem", "sim", {"persist": "sometimes"}, "persist"),
    case("nvidia_peermem", "sim", {"openibd_dropin": "maybe"}, "openibd_dropin"),
    case("nvidia_peermem", "sim", {"conf_file": "/etc/modules-load.d/../modules"}, "conf_file"),
    case("nvidia_peermem", "sim", {"conf_file": "/etc/modules-load.d/nvidia-peermem.txt"}, "conf_file"),
    case("nvidia_peermem", "sim", {"dropin_file": "/etc/systemd/system/openibd.service.d/../x.conf"}, "dropin_file"),
    case("nvidia_peermem", "sim", {"dropin_file": "/etc/systemd/system/x.conf"}, "dropin_file"),
    case("nvidia_peermem", "sim", {"method": "peermem", "host_root": "relative"}, "host_root"),
]

# -- names that reach a path or a command: "../", "/", NUL and newline in each, generated --------------------------------
PAYLOADS = {"dotdot": "../", "slash": "/", "nul": "\0", "newline": "\n"}
NAME_OPTIONS = [
    # module, bench, option, template ({} = the payload), other arguments, payloads that apply
    ("kernel_cmdline", "grub", "dropin", "/etc/default/grub.d/99-x{}y.cfg", {"present": ["iommu=pt"]}, PAYLOADS),
    ("sysctl_dropin", "sim", "path", "/etc/sysctl.d/90-x{}y.conf", {"settings": {"net.ipv4.conf.all.arp_ignore": 1}},
     PAYLOADS),
    ("sriov_vfs", "sim", "netdev", "ibp24s0{}x", {"num_vfs": 2}, PAYLOADS),
    ("sriov_vfs", "sim", "rdma_device", "mlx5_0{}x", {"num_vfs": 2}, PAYLOADS),
    ("ib_vf_guids", "sim", "netdev", "ibp24s0{}x", {}, PAYLOADS),
    ("ib_vf_guids", "sim", "pool_file", "/etc/sriov-operator/{}guids", {"netdev": "ibp24s0", "export_pool_file": True},
     ("dotdot", "nul", "newline")),
    ("containerd_rdma", "containerd", "unit_dropin", "/etc/systemd/system/containerd.service.d/50-x{}y.conf", {},
     PAYLOADS),
    ("containerd_rdma", "containerd", "service", "containerd{}x", {}, PAYLOADS),
    ("containerd_rdma", "containerd", "runtimes", ["runc{}x"], {}, PAYLOADS),
    ("kubelet_topology", "kubelet", "dropin_name", "50-x{}y.conf", {"topology_manager_policy": "restricted"}, PAYLOADS),
    ("nvidia_peermem", "sim", "conf_file", "/etc/modules-load.d/nv{}x.conf", {}, ("dotdot", "slash")),
    ("nvidia_peermem", "sim", "dropin_file", "/etc/systemd/system/openibd.service.d/10{}x.conf", {}, ("dotdot", "slash")),
]

# Defects in modules this suite does not own, kept as strict xfails so that they flip to a failure (and get removed)
# once fixed: a newline or NUL in the owned file's name is accepted (NUL crashes with a traceback), and a hidden
# name (kmod and systemd-modules-load skip dot files) is written where nothing reads it.
# file names the modules once accepted (found by this matrix, fixed since)
NAME_BUGS_FIXED = [
    ("rdma_netns", "conf_file", "/etc/modprobe.d/x\ny.conf", {"mode": "shared", "initramfs": "never"}),
    ("rdma_netns", "conf_file", "/etc/modprobe.d/x\0y.conf", {"mode": "shared", "initramfs": "never"}),
    ("nvidia_peermem", "conf_file", "/etc/modules-load.d/x\ny.conf", {"method": "peermem"}),
    ("nvidia_peermem", "conf_file", "/etc/modules-load.d/x\0y.conf", {"method": "peermem"}),
    ("nvidia_peermem", "conf_file", "/etc/modules-load.d/.hidden.conf", {"method": "peermem"}),
]


def _traversal_cases():
    out = []
    for module, bench, option, template, others, payloads in NAME_OPTIONS:
        for label in payloads:
            payload = PAYLOADS[label]
            value = [t.format(payload) for t in template] if isinstance(template, list) else template.format(payload)
            args = dict(others)
            args[option] = value
            out.append(pytest.param(Case(module, bench, args, option, None), id="%s-%s-%s" % (module, option, label)))
    return out


TRAVERSAL = _traversal_cases() + [
    pytest.param(Case(module, "fresh", dict(others, **{option: value}), option, None),
                 id="%s-%s-%r" % (module, option, value.rsplit("/", 1)[-1]))
    for module, option, value, others in NAME_BUGS_FIXED]

SIM_MODULES = {"rdma_netns": rdma_netns.main, "sysctl_dropin": sysctl_dropin.main, "sriov_vfs": sriov_vfs.main,
               "ib_vf_guids": ib_vf_guids.main, "rdma_facts": rdma_facts.main, "nvidia_peermem": nvidia_peermem.main}


def test_the_matrix_is_big_enough():
    modules = collections.Counter(p.values[0].module for p in CASES + TRAVERSAL)
    assert sum(modules.values()) >= 60
    assert set(modules) >= {"kernel_cmdline", "rdma_netns", "sysctl_dropin", "sriov_vfs", "ib_vf_guids",
                            "containerd_rdma", "kubelet_topology", "rdma_facts", "nvidia_peermem"}


@pytest.mark.fuse
def test_the_write_probe_counts_writes(dgx_bench):
    """The zero-writes check can fail: the probe counts the write()s (sysfs and rtnetlink) of a run that changes the
    node - new GUIDs for the two VFs."""
    bench = dgx_bench
    bench.arm_probe()
    try:
        result = bench.run_guids(scheme="list", guids=["02:00:00:00:00:00:00:0a", "02:00:00:00:00:00:00:0b"])
        assert result["changed"]
        assert bench.probed_writes() >= 2, "the probe saw %r write()s for two GUID changes" % bench.probed_writes()
    finally:
        bench.call({"cmd": "fault_clear"})
        bench.baseline_run()


def _plain_bench(kind, tmp_path, monkeypatch):
    if kind == "fresh":  # a simulated node of its own, for cases that may write (known defects)
        return FactsBench(tmp_path, monkeypatch)
    if kind == "grub":
        return GrubBench(tmp_path, monkeypatch)
    if kind == "containerd":
        return ContainerdBench(tmp_path, monkeypatch)
    return KubeletBench(tmp_path, monkeypatch)


def _check(bench, failure, names, before, calls, probe=None):
    assert names in failure["msg"], "the message must name %r: %s" % (names, failure["msg"])
    assert "Traceback" not in failure["msg"] and "exception" not in failure, failure
    after = bench.observe()
    assert not tree_diff(before["tree"], after["tree"]), tree_diff(before["tree"], after["tree"])
    assert after == before
    assert bench.tools.mutations(calls) == [], "node-changing commands ran: %s" % bench.tools.mutations(calls)
    assert not bench.tools.unsafe, bench.tools.unsafe
    if probe is not None:
        assert bench.probed_writes() == 0, "the simulator received %d write()s" % bench.probed_writes()


@pytest.mark.parametrize("bad", [c for c in CASES + TRAVERSAL if c.values[0].bench != "sim"])
def test_bad_input_on_a_node_tree(bad, tmp_path, monkeypatch):
    bench = _plain_bench(bad.bench, tmp_path, monkeypatch)
    try:
        if bad.prepare:
            bad.prepare(bench)
        before = bench.observe()
        calls = len(bench.tools.calls)
        main = SIM_MODULES[bad.module] if bad.bench == "fresh" else bench.main
        failure = bench.run_main(main, bench.args(**bad.args), expect=ModuleFail)
        _check(bench, failure, bad.names, before, calls)
    finally:
        bench.close()


@pytest.mark.fuse
@pytest.mark.parametrize("bad", [c for c in CASES + TRAVERSAL if c.values[0].bench == "sim"])
def test_bad_input_on_a_simulated_dgx(bad, dgx_bench, monkeypatch):
    bench = dgx_bench
    created = []
    if bad.prepare:
        before_prepare = set(bench.observe()["tree"])
        bad.prepare(bench)
        created = sorted(set(bench.observe()["tree"]) - before_prepare, reverse=True)
    try:
        bench.arm_probe()
        before = bench.observe()
        calls = len(bench.tools.calls)
        args = bench.args(**bad.args)
        failure = bench.run_main(SIM_MODULES[bad.module], args, monkeypatch, expect=ModuleFail)
        _check(bench, failure, bad.names, before, calls, probe=True)
    finally:
        bench.call({"cmd": "fault_clear"})
        for rel in created:
            path = bench.root / rel
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink()
