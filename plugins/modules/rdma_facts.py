#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

DOCUMENTATION = r"""
---
module: rdma_facts
short_description: Gather RDMA, SR-IOV, GPU and GPU-NIC topology facts of a node
version_added: 0.1.0
description:
  - Reads sysfs and procfs and returns C(ansible_facts.rdma). The commands it runs are read-only -
    C(ip link show dev <pf>) (C(-j) JSON, or the text form when C(ip) lacks it), once per PF that has VFs, for the VF
    admin attributes the kernel exposes only through rtnetlink (trust, spoof check, link state, VLAN/QoS, MAC); and,
    when they are installed, C(containerd --version), C(containerd config dump) and C(kubelet --version) for the
    runtime section.
  - "RDMA devices with their PCI function, NUMA node, driver, netdevs, ports, node GUID, SR-IOV counts and VFs
    (with the VF GUIDs when the VF has its own RDMA device)."
  - "NVIDIA GPUs and the GPU to RDMA device distance classes of C(nvidia-smi topo -m) (PIX, PXB, PHB, NODE, SYS),
    computed from the sysfs PCI hierarchy and the NUMA nodes."
  - "The RDMA network namespace mode, the kernel command line, loaded modules, ARP and reverse-path sysctls and MTU
    of the RDMA netdevs, and the RDMA cgroup limits."
  - Files that exist but cannot be read or parsed are listed in RV(ansible_facts.rdma.problems) and their values are
    V(null), so an audit can report them as unknown.
  - A NUMA node that the kernel reports as V(-1), or that is missing, is V(null), never node 0.
author:
  - rdma.k8s_node contributors (@rdma-k8s-node)
extends_documentation_fragment:
  - rdma.k8s_node.attributes
  - rdma.k8s_node.attributes.facts
  - rdma.k8s_node.attributes.info_module
  - rdma.k8s_node.host_root
options:
  counters_interval:
    description:
      - Seconds between two readings of the RDMA ports' C(hw_counters) (retransmission and congestion counters, the
        C(counters) layer of docs/counters.md), from V(0) to V(60); the module waits that long. V(0) reads them once;
        with two readings the audit also judges how fast they grow.
    type: float
    default: 0
  facts_json:
    description:
      - Return the facts as RV(rdma_facts_json), one string holding their compact JSON text (what RV(ansible_facts.rdma)
        would be, encoded with ASCII escapes), instead of as RV(ansible_facts.rdma); nothing is added to the host's
        facts then. Decode them with C(| from_json).
      - For a caller that reads the facts of many hosts on the controller, such as the C(rdma.k8s_node.rdma_audit_gather)
        action of the C(rdma_audit) role. ansible-core decodes a module's result with a Python hook per JSON object
        and checks every string (the facts of a large node are some 1,500 objects); one string is decoded and checked
        at once.
    type: bool
    default: false
  compress:
    description:
      - With O(facts_json=true), return the JSON text compressed, as RV(rdma_facts_json_zlib) (zlib, base64), instead
        of RV(rdma_facts_json). The facts of a DGX H100 are about 90 KB of JSON and 12 KB compressed; a controller
        that audits thousands of nodes holds every node's result until its report is written (docs/scale.md).
      - Needs O(facts_json=true).
    type: bool
    default: false
notes:
  - Runs on the node's own Python with the standard library only.
  - VF GUIDs are read from the VF's own RDMA device; a VF that is not bound to an RDMA driver has V(null) GUIDs.
    An all-zero GUID is returned as V(0000:0000:0000:0000), not hidden.
seealso:
  - name: nvidia-smi topo legend
    description: The meaning of PIX, PXB, PHB, NODE and SYS.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Gather RDMA facts
  rdma.k8s_node.rdma_facts:

- name: Gather RDMA facts of the host from a privileged pod that mounts it at /host
  rdma.k8s_node.rdma_facts:
    host_root: /host

- name: Show the GPU to NIC matrix
  ansible.builtin.debug:
    msg: "{{ ansible_facts.rdma | rdma.k8s_node.rdma_topo_matrix }}"

- name: Fail when a GPU has no NIC behind the same PCIe switch
  ansible.builtin.assert:
    that:
      - ansible_facts.rdma.gpu_nic_affinity[item] | dict2items | selectattr('value', 'equalto', 'PIX') | list | length > 0
  loop: "{{ ansible_facts.rdma.gpu_nic_affinity | list }}"
"""

RETURN = r"""
rdma_facts_json:
  description:
    - The facts as compact JSON text, what RV(ansible_facts.rdma) holds otherwise (non-ASCII characters as C(\\u) escapes).
  returned: when O(facts_json=true) and O(compress=false)
  type: str
  sample: '{"devices":[],"gpus":[],"gpu_nic_affinity":{}}'
rdma_facts_json_zlib:
  description:
    - The text of RV(rdma_facts_json) encoded as UTF-8, compressed as a zlib stream (RFC 1950) and encoded in base64
      (RFC 4648); the P(rdma.k8s_node.rdma_audit_facts#filter) filter, given the whole registered result, returns the
      facts.
  returned: when O(facts_json=true) and O(compress=true)
  type: str
  sample: eJyrVkpJLctMTi1WsoqO1VFKLyhFsOLzMpPjE9PSMvMySyqVrKprawF0/hBz
ansible_facts:
  description: Facts added to the host.
  returned: when O(facts_json=false) (the default)
  type: dict
  contains:
    rdma:
      description: RDMA facts of the node.
      returned: always
      type: dict
      contains:
        devices:
          description: RDMA devices from C(/sys/class/infiniband), in natural name order.
          returned: always
          type: list
          elements: dict
          contains:
            name:
              description: RDMA device name.
              type: str
              returned: always
              sample: mlx5_0
            pci_address:
              description: PCI function of the device; V(null) for devices that are not on PCI (rxe, siw, scif).
              type: str
              returned: always
              sample: "0000:1a:00.0"
            numa_node:
              description: NUMA node of the PCI function; V(null) when the kernel reports V(-1) or nothing.
              type: int
              returned: always
              sample: 0
            driver:
              description: PCI driver bound to the function.
              type: str
              returned: always
              sample: mlx5_core
            netdevs:
              description: Network interfaces of the PCI function.
              type: list
              elements: str
              returned: always
              sample: [ibp26s0]
            ports:
              description: Ports of the device.
              type: list
              elements: dict
              returned: always
              contains:
                port:
                  description: Port number.
                  type: int
                  returned: always
                  sample: 1
                link_layer:
                  description: V(InfiniBand) or V(Ethernet).
                  type: str
                  returned: always
                  sample: InfiniBand
                state:
                  description: Logical port state without its number prefix.
                  type: str
                  returned: always
                  sample: ACTIVE
                phys_state:
                  description: Physical port state without its number prefix.
                  type: str
                  returned: always
                  sample: LinkUp
                rate:
                  description: Port rate as the kernel prints it.
                  type: str
                  returned: always
                  sample: 400 Gb/sec (4X NDR)
                port_guid:
                  description: Interface-id half of GID 0 on InfiniBand ports; V(null) on Ethernet ports.
                  type: str
                  returned: always
                  sample: "0002:c903:00f9:bfa1"
                netdev:
                  description: On Ethernet (RoCE) ports, the netdev behind GID 0; V(null) on InfiniBand ports.
                  type: str
                  returned: always
                  sample: ens1f0np0
            node_guid:
              description: Node GUID as in sysfs; an all-zero GUID is returned as it is.
              type: str
              returned: always
              sample: "0002:c903:00f9:bfa0"
            fw_ver:
              description: Firmware version.
              type: str
              returned: always
              sample: 28.41.1000
            board_id:
              description: Board (PSID) identifier.
              type: str
              returned: always
              sample: MT_0000000838
            is_vf:
              description: Whether the PCI function is an SR-IOV virtual function (it has a C(physfn) link).
              type: bool
              returned: always
              sample: false
            pf:
              description: PCI address of the physical function of a VF, else V(null).
              type: str
              returned: always
              sample: null
            sriov:
              description: SR-IOV counts of a PF, V(null) when the function has no C(sriov_totalvfs).
              type: dict
              returned: always
              sample: {"totalvfs": 16, "numvfs": 8}
            vfs:
              description: VFs of a PF from its C(virtfnN) links, by index.
              type: list
              elements: dict
              returned: always
              contains:
                index:
                  description: VF index N of C(virtfnN).
                  type: int
                  returned: always
                  sample: 0
                pci_address:
                  description: PCI address of the VF.
                  type: str
                  returned: always
                  sample: "0000:1a:00.1"
                driver:
                  description: Driver bound to the VF, V(null) when unbound.
                  type: str
                  returned: always
                  sample: mlx5_core
                name:
                  description: RDMA device of the VF, V(null) when the VF has none.
                  type: str
                  returned: always
                  sample: mlx5_12
                node_guid:
                  description: Node GUID of the VF's RDMA device, V(null) when it has none.
                  type: str
                  returned: always
                  sample: "0000:0000:0000:0000"
                port_guid:
                  description: Port GUID (from GID 0 of port 1) of the VF's RDMA device on InfiniBand, else V(null).
                  type: str
                  returned: always
                  sample: "0000:0000:0000:0000"
                link_state:
                  description:
                    - Administrative link state the PF driver holds for the VF (C(ip link set <pf> vf N state)),
                      V(auto), V(enable) or V(disable); read from C(vfinfo_list) of C(ip -j link show dev <pf>).
                    - This and the other admin attributes are V(null) when they could not be read (no PF netdev,
                      C(ip) failed - see RV(ansible_facts.rdma.problems)) or the driver does not report them.
                  type: str
                  returned: always
                  sample: auto
                trust:
                  description: VF trust (C(ip link set <pf> vf N trust on|off)); IPoIB PFs report V(false).
                  type: bool
                  returned: always
                  sample: false
                spoofchk:
                  description: VF MAC spoof checking; IPoIB PFs report V(false).
                  type: bool
                  returned: always
                  sample: true
                vlan:
                  description: VF VLAN id the PF tags the VF's traffic with, V(0) for none.
                  type: int
                  returned: always
                  sample: 0
                qos:
                  description: 802.1p priority of that VLAN, V(0) for none.
                  type: int
                  returned: always
                  sample: 0
                mac:
                  description: Administrative MAC of an Ethernet VF (V(00:00:00:00:00:00) when unset), V(null) on
                    InfiniBand.
                  type: str
                  returned: always
                  sample: "00:00:00:00:00:00"
        gpus:
          description: NVIDIA (vendor 0x10de) VGA and 3D controllers (PCI class 0x0300xx and 0x0302xx).
          returned: always
          type: list
          elements: dict
          contains:
            pci_address:
              description: PCI address.
              type: str
              returned: always
              sample: "0000:1b:00.0"
            numa_node:
              description: NUMA node, V(null) when unknown.
              type: int
              returned: always
              sample: 0
            vendor:
              description: PCI vendor ID.
              type: str
              returned: always
              sample: "0x10de"
            device:
              description: PCI device ID.
              type: str
              returned: always
              sample: "0x2330"
            class:
              description: PCI class code.
              type: str
              returned: always
              sample: "0x030200"
            driver:
              description: Bound driver (V(nvidia), V(vfio-pci)), V(null) when unbound.
              type: str
              returned: always
              sample: nvidia
            local_cpulist:
              description: CPUs local to the GPU (from C(local_cpulist), or converted from C(local_cpus)).
              type: str
              returned: always
              sample: 0-55,112-167
        gpu_nic_affinity:
          description:
            - Per GPU PCI address, per RDMA device name, the distance class V(PIX), V(PXB), V(PHB), V(NODE) or V(SYS).
            - V(null) when it cannot be known (a NUMA node unknown on a multi-node machine and no shared host bridge).
            - RDMA devices without a PCI address are left out.
          returned: always
          type: dict
          sample: {"0000:1b:00.0": {"mlx5_0": "PIX", "mlx5_1": "NODE", "mlx5_4": "SYS"}}
        numa_nodes:
          description: Online NUMA nodes and those with CPUs, V(null) each when unknown.
          returned: always
          type: dict
          sample: {"online": [0, 1], "has_cpu": [0, 1]}
        netns_mode:
          description: RDMA network namespace mode from C(ib_core)'s C(netns_mode); V(null) when ib_core is not loaded.
          returned: always
          type: str
          sample: shared
        kernel_cmdline:
          description: The running kernel's command line, V(null) when C(/proc/cmdline) is missing.
          returned: always
          type: dict
          sample:
            raw: BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt console=tty0 console=ttyS0
            args: [BOOT_IMAGE=/vmlinuz, ro, intel_iommu=on, iommu=pt, console=tty0, console=ttyS0]
            params: {BOOT_IMAGE: /vmlinuz, ro: true, intel_iommu: "on", iommu: pt, console: [tty0, ttyS0]}
        modules:
          description: Names of the loaded kernel modules (C(/proc/modules)), sorted; V(null) when the file is missing.
          returned: always
          type: list
          elements: str
          sample: [ib_core, mlx5_core, mlx5_ib, nvidia_peermem]
        sysctl:
          description: C(arp_ignore), C(arp_announce) and C(rp_filter) of C(net.ipv4.conf) C(all), C(default) and every RDMA netdev.
          returned: always
          type: dict
          sample: {"all": {"arp_ignore": 0, "arp_announce": 0, "rp_filter": 2}, "ibp26s0": {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 0}}
        mtu:
          description: MTU of every RDMA netdev.
          returned: always
          type: dict
          sample: {"ibp26s0": 4092}
        rdma_cgroup:
          description: Limits from every C(rdma.max) file, per cgroup path, per RDMA device; unlimited is V(max).
          returned: always
          type: dict
          sample: {"/kubepods.slice": {"mlx5_0": {"hca_handle": 2, "hca_object": "max"}}}
        runtime:
          description:
            - containerd and kubelet as they run and as they are configured - containerd's version, config version,
              C(base_runtime_spec) and its memlock, C(enable_cdi), C(LimitMEMLOCK) of the unit and of the running
              process, read by the observer of the containerd_rdma module - the service and its unit files, the config
              file containerd reads (C(config_path), from C(ExecStart --config) or k3s/rke2) with its imports,
              C(generated_config), C(key_sources) (the file each key the collection sets comes from) and
              C(derived_from) (the owner's spec of each derived copy); the kubelet's command line (from its process
              or its systemd unit), config file and C(--config-dir) drop-ins as layers in the kubelet's order with the
              flags that override them, the effective topology/CPU/memory manager settings and state-file policies.
            - Values that cannot be read are null, with the reason in its own C(problems) list.
            - C(containerd) and C(kubelet) are absent when their room's observer failed (C(layers.containerd) or
              C(layers.kubelet) is null and C(problems) says why).
          type: dict
          returned: always
          sample: {"containerd": {"version": "1.7.24", "config_version": 2}, "kubelet": {"config": null}}
        cpu_vendor:
          description: C(vendor_id) of the first CPU in C(/proc/cpuinfo); it decides the vendor IOMMU switch.
          returned: always
          type: str
          sample: GenuineIntel
        device_plugins:
          description:
            - Running Kubernetes RDMA device plugins by process name (C(k8s-rdma-shared) is the RDMA shared device
              plugin, C(sriovdp) the SR-IOV network device plugin), so the audit can flag the shared device plugin
              in exclusive netns mode.
          returned: always
          type: list
          elements: str
          sample: ["k8s-rdma-shared"]
        persisted:
          description:
            - What the next boot gets, read from files only, so an audit can compare desired, live and persisted.
            - C(kernel_cmdline) is the default boot entry's arguments (the first C(linux) line of C(grub.cfg), or the
              running kernel's Boot Loader Specification entry with C($kernelopts) expanded); V(null) without GRUB.
            - C(netns_mode) has the C(ib_core netns_mode) of modprobe.d (C(modprobe), C(modprobe_file)), of the boot
              command line (C(cmdline)) and the one that wins (C(effective)), as V(shared), V(exclusive) or V(null).
            - C(sysctl) has, per interface (C(all), C(default) and each RDMA netdev), the C(arp_ignore),
              C(arp_announce) and C(rp_filter) that systemd-sysctl would apply at boot, with the file that sets it
              (explicit keys beat globs, C(-key) lines exclude, C(/etc/sysctl.conf) only through a sysctl.d link).
            - C(modprobe) has every modprobe.d file kmod reads, in its order, with its C(options), C(blacklist) and
              C(install) lines for ib_core and nvidia_peermem (C(directives) as C([line, command, module, rest])).
            - C(modules_load) lists the modules loaded at boot by modules-load.d and C(/etc/modules).
            - C(sriov) summarizes the sriov role's boot state file (PFs and VF counts), V(null) when absent.
          returned: always
          type: dict
          sample: {"kernel_cmdline": {"source": "/boot/grub/grub.cfg", "kernel": "/boot/vmlinuz-6.1.0-28-amd64",
                   "args": ["ro", "iommu=pt"]},
                   "netns_mode": {"modprobe": "exclusive", "modprobe_file": "/etc/modprobe.d/rdma-k8s-node-ib_core.conf",
                                  "cmdline": null, "effective": "exclusive"},
                   "sysctl": {"all": {"arp_ignore": {"value": 1, "file": "/etc/sysctl.d/90-rdma-k8s-node.conf"}}},
                   "modprobe": [{"path": "/etc/modprobe.d/rdma-k8s-node-ib_core.conf",
                                 "directives": [[3, "options", "ib_core", "netns_mode=0"]]}],
                   "modules_load": ["nvidia_peermem"], "sriov": null, "problems": []}
        drivers:
          description:
            - The RDMA and GPU driver stack, from files only.
            - C(ofed) - MLNX/DOCA-OFED as installed (C(installed), C(flavor) V(doca) or V(mlnx_ofed), C(version),
              C(label) as C(ofed_info -s) prints it, C(source)) and as running (C(running_version) of the loaded
              ib_core/mlx5_core, C(modules) per OFED module with C(loaded), C(version), C(from_ofed));
              C(stale_modules) and C(restart_required) when loaded modules are not the installed OFED's build;
              C(kernel_release), C(kernel_headers) (the DKMS build tree exists); C(dkms) (per DKMS module and
              version for the running kernel, C(state) V(installed), V(built), V(failed) or V(added)) and
              C(dkms_failed) with the C(make_log) path and an C(excerpt) of it; C(packages), the DOCA profile and
              driver packages dpkg knows, with C(version) and C(state) (V(null) on nodes without dpkg).
            - C(gpudirect) - C(active) GPUDirect RDMA path (V(peermem) when nvidia_peermem is loaded, else V(dmabuf)
              when the open GPU kernel modules run on Linux 5.12 or later, else V(none)), C(peermem_loaded),
              C(peermem_persisted) (named in a modules-load.d file), C(dmabuf_capable), C(dmabuf_reason),
              C(nvidia_driver) (C(version), C(open)), C(kernel_release), C(openibd) (installed) and
              C(openibd_dropins) (its drop-ins in systemd's order with their C([Service] ExecStartPost=) lines).
            - C(problems) lists what could not be read.
            - Read by the drivers room's observer (C(layers.drivers) holds the same C(ofed), C(gpudirect) and
              C(problems)); V(null) when that observer failed.
          returned: always
          type: dict
          sample: {"ofed": {"installed": true, "flavor": "doca", "version": "24.10-1.1.4.0.200",
                            "label": "OFED-internal-24.10-1.1.4.0.200", "source": "/usr/bin/ofed_info",
                            "running_version": "24.10-1.1.4", "kernel_release": "6.1.0-28-amd64",
                            "kernel_headers": true, "stale_modules": [], "restart_required": false,
                            "modules": {"mlx5_core": {"loaded": true, "version": "24.10-1.1.4", "from_ofed": true}},
                            "dkms": [{"module": "mlnx-ofed-kernel", "version": "24.10.OFED.24.10.1.1.4.1",
                                      "kernel": "6.1.0-28-amd64", "arch": "x86_64", "state": "installed",
                                      "kernel_modules": ["ib_core", "mlx5_core", "mlx5_ib"]}],
                            "dkms_failed": [],
                            "packages": {"doca-ofed": {"version": "2.9.1-0.1.4", "state": "installed"}}},
                   "gpudirect": {"active": "peermem", "peermem_loaded": true, "peermem_persisted": true,
                                 "dmabuf_capable": false, "dmabuf_reason": "the NVIDIA driver 550.127.05 is the ...",
                                 "nvidia_driver": {"version": "550.127.05", "open": false},
                                 "kernel_release": "6.1.0-28-amd64", "openibd": true, "openibd_dropins": []},
                   "problems": []}
        layers:
          description:
            - The facts of each layer built as a room, by the layer's own observer (the one its module uses), keyed by
              the layer's name; V(null) for a layer whose observer failed (the reason is in RV(ansible_facts.rdma.problems)).
            - C(drivers) - C(ofed) and C(gpudirect) (as RV(ansible_facts.rdma.drivers)), C(modules) (as
              RV(ansible_facts.rdma.modules)), C(devices) (C(name) and C(driver) of each RDMA device), C(gpus) (their
              PCI addresses), C(observed), what nvidia_peermem's planner reads - C(nvidia) (the driver banner's
              C(version), C(open), C(arch)), C(release), C(ofed), C(peermem_loaded), C(openibd), C(modprobe_path) (the
              C(modprobe) the openibd drop-in runs), C(files) (C(path), C(exists), C(content), C(mode), C(uid), C(gid),
              C(link) of the module's default modules-load.d file and drop-in, or C(error)), C(modprobe) (every
              modprobe.d file in kmod's order with its nvidia_peermem lines), C(cmdline), C(dropins) (openibd.service's
              drop-ins with their C(ExecStartPost=) lines), C(modprobe_problems), C(dropin_problems) and C(errors) -
              and C(problems). The audit runs nvidia_peermem's planner on them. See docs/drivers.md.
            - C(pcie) - per RDMA NIC physical function (PCI address) its C(rdma_devices), C(max_read_request) in bytes,
              C(devctl) (the Device Control register) and C(cap) (the PCI Express capability's offset), or C(error);
              C(unit) (the boot unit - C(path), C(exists), C(values) per function, C(text)); C(setpci) (its path on the
              node, or V(null)). See docs/pcie.md.
            - C(irq) - C(cpus_online), C(numa_nodes) (CPU list per node), per RDMA NIC physical function its
              C(rdma_devices), C(numa_node), C(local_cpus) and C(vectors), its interrupt vectors as one table - C(irqs)
              (their numbers in the kernel's list syntax, V(24-87)) and a column per field, C(affinity),
              C(effective), C(settable) (false for a kernel-managed affinity) and C(name) (the handler's, without
              C(name_suffix) when every name ends with the same C(@pci:<address>)), each a list in the order of
              C(irqs) or one value when every vector has it - or C(error); C(unit), C(script), C(policy) (the layer's
              files) and C(irqbalance) (C(installed), C(env_file), C(args)). Older versions returned C(irqs) instead of
              C(vectors), a dict per IRQ number; the audit judges both. See docs/irq.md.
            - C(firmware) - C(tool) (the C(mlxconfig) or C(mstconfig) found, and its firmware reset tool) and per RDMA
              NIC card (PCI slot) its first function (C(device)), C(functions) (RDMA devices, netdevs, link layers,
              PCI vendor), C(device_type) and C(params) (each parameter's Default, Current and Next Boot as the query
              prints them), or C(error). See docs/firmware.md.
            - C(counters) - C(ports) (every port of every RDMA device that is not a VF - C(device), C(port),
              C(link_layer), C(counters) (each C(hw_counters) file but C(lifespan), a number or its text; V(null)
              without the directory), C(previous) (the first of two readings, or V(null)), C(problems)) and
              C(interval) (seconds between the two readings, or V(null)). See docs/counters.md.
            - C(qos) - C(tool) (C(ofed) - the running mlx5_core is MLNX/DOCA-OFED's - and the C(paths) of C(mlnx_qos)
              and C(dcb)), C(used) (the tool read), C(configfs) (rdma_cm's configfs directory), per RoCE netdev its
              C(rdma_device), C(port), C(pci), C(trust), C(dscp2prio) (explicit DSCP entries), C(pfc) (8 x 0/1),
              C(ecn) (C(roce_np)/C(roce_rp) enables per priority, V(null) without the OFED sysfs), C(cnp), C(roce_tos)
              (RDMA-CM default ToS, V(null) without its configfs group), C(traffic_class) (V(null) without the OFED
              file, -1 unset) or C(error); C(ib_ports), C(problems), C(unit) and C(script) (the boot files). See
              docs/roce.md.
            - C(kernel) - C(live) (the running kernel's arguments, as C(kernel_cmdline.args)), C(persisted) (the
              default boot entry, as C(persisted.kernel_cmdline)), C(cpu_vendor), C(observed), what kernel_cmdline's
              planner reads - C(live), C(cpu_vendor), C(tools) (grubby, update-grub, grub-mkconfig found),
              C(bls_entries), C(defaults_exists), C(bootloader) (what V(auto) picks, or C(bootloader_error)), C(files)
              (C(path), C(exists), C(content), C(mode), C(uid), C(gid), C(link) of C(/etc/default/grub), the collection's
              default drop-in and C(/etc/kernel/cmdline)), C(grub_cfg) (the first C(linux) line's arguments), C(grub)
              (what the GRUB defaults configure when sourced with C(/bin/sh) - C(before), C(prefix) before the drop-in,
              C(suffix) and C(defaults_probe) from sentinel values; or C(grub_error)) and C(grubby) (the boot entries
              of C(grubby --info=ALL), or C(grubby_error)); V(null) when it could not be read - and C(problems). The
              audit runs kernel_cmdline's planner on them. See docs/kernel.md.
            - C(netns) - C(ib_core_loaded), C(live) (the running mode, V(shared) or V(exclusive)), C(cmdline_value) and
              C(cmdline) (C(ib_core.netns_mode=) of the running kernel's command line), C(modprobe) (every modprobe.d
              file in kmod's order with its ib_core lines), C(files) (C(content), C(mode), C(uid), C(gid) of each file in
              C(/etc/modprobe.d) with an ib_core line), C(persisted) (the mode the next boot gets, as
              C(persisted.netns_mode)), C(shared_device_plugin) (running RDMA shared device plugin
              processes) and C(problems). See docs/kernel.md.
            - C(sysctl) - C(netdevs) (the RDMA physical functions' netdevs, the rdma_sysctl role's default interfaces),
              C(live) (per interface - C(all), C(default), every RDMA netdev - its C(arp_ignore), C(arp_announce) and
              C(rp_filter) as the kernel prints them, V(null) when absent), C(files) (every file systemd-sysctl reads at
              boot, in its order - C(files), each with C(path), the C(link) target when a symlink, C(entries) as
              C([key, value, line]) with normalized keys, value V(null) for a C(-key) exclusion - and
              C(/etc/sysctl.conf) as C(conf), which C(sysctl --system) reads last), C(ours) (C(content), C(mode),
              C(uid), C(gid) of each file in C(/etc/sysctl.d) that sysctl_dropin wrote) and C(problems). The audit runs
              sysctl_dropin's planner on them. See docs/kernel.md.
            - C(containerd) - what C(runtime.containerd) holds (read once - C(runtime.containerd) is this section
              without C(observed)) and C(observed), what containerd_rdma's planner reads - C(version), C(service),
              C(command) (the unit's containerd command line - C(argv), C(config), C(tool), C(data_dir), C(from)),
              C(config_files) and C(planned_files) (C(path), C(exists), C(content), C(mode), C(uid), C(gid) in
              containerd's load order; C(planned_files) with the collection's drop-in under a generated k3s/rke2
              config), C(effective) (C(containerd config dump)), C(texts) and C(specs) (the runc runtimes' base specs,
              their sources and derived copies, the default generated spec), C(oci_spec) (C(ctr oci spec) when a
              runtime has no spec, the default generated one or a spec the role may name as its C(base_runtime_spec);
              C(oci_spec_error) when it failed), C(unit) (the unit and drop-in listing and texts), C(dropin) (the
              collection's unit drop-in) and C(systemd) (whether systemd answers); V(null) without a readable config
              or dump, C(error) when a piece could not be read. The audit runs containerd_rdma's planner on them. See
              docs/containerd.md.
            - C(kubelet) - what C(runtime.kubelet) holds (read once - C(runtime.kubelet) is this section without
              C(observed) and C(numa)), C(observed), what kubelet_topology's planner reads - C(version), C(service),
              C(line) (how the kubelet starts - command line, unit, flags with the file each comes from, k3s/rke2),
              C(config_file), C(layers) (config file and drop-ins in the kubelet's order), C(documents) (their texts),
              C(cpus_online), C(numa_nodes), C(state_files) and C(state_exists) (the CPU and memory manager
              checkpoints), C(files) (C(path), C(exists), C(content), C(mode), C(uid), C(gid) of the collection's
              drop-in under each name it can take, the config file and the environment files of the flags); V(null)
              without a readable configuration, C(error) when a piece could not be read - and C(numa) (the NUMA
              nodes of the GPUs and RDMA NICs, and the online ones, for C(kubelet.whole_node)). The audit runs
              kubelet_topology's planner on them. See docs/kubelet.md.
            - C(sriov) - C(pfs) (every physical function behind a netdev or RDMA device - C(name) (its RDMA device),
              C(pci_address), C(netdevs), C(rdma_devices), C(link_layer), C(eswitch_mode), C(numvfs) (V(null) without
              SR-IOV), C(totalvfs) and C(vfs) as in RV(ansible_facts.rdma.devices) - C(index), C(pci_address),
              C(driver), C(name), C(node_guid), C(port_guid) and the admin attributes C(link_state), C(trust),
              C(spoofchk), C(vlan), C(qos), C(mac)), C(persisted) (the sriov boot unit's state file, as
              C(persisted.sriov)), C(observed), what the planners of sriov_vfs and ib_vf_guids read - C(pfs) (per PCI
              address the PF, its eswitch mode, C(state) (VF count, total and VFs), C(in_use), C(admin) (or
              C(admin_error)) and, for an InfiniBand PF, C(guids) (the PF's GUID, how GUIDs are set, the admin GUIDs,
              the GUIDs taken elsewhere, the driver, the other InfiniBand PFs; or C(error)); or C(error)), C(operator)
              (sriov-network-operator's traces), C(links) and C(pool_file) (its default path, state and text), the
              last three only with an InfiniBand PF; no firmware query; V(null) when rdma_facts ran without node
              tools - and C(problems). The audit runs both planners on them (C(sriov.config)). See docs/sriov.md.
          returned: always
          type: dict
          sample: {"pcie": {"devices": {"0000:18:00.0": {"rdma_devices": ["mlx5_0"], "max_read_request": 512,
                                                        "devctl": "0x2937", "cap": "0x60"}},
                            "unit": {"path": "/etc/systemd/system/rdma-k8s-node-pcie.service", "exists": false,
                                     "values": {}, "text": null},
                            "setpci": "/usr/bin/setpci"}}
        problems:
          description: Files that exist but could not be read or parsed.
          returned: always
          type: list
          elements: dict
          sample: [{"path": "/sys/bus/pci/devices/0000:1a:00.0/numa_node", "error": "cannot read ...: Permission denied"}]
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostCommands, HostRoot
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import discover, gather
from ansible_collections.rdma.k8s_node.plugins.module_utils._runtime_facts import pids_of, runtime_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils._persisted import persisted_facts
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import _registry
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.counters import observe as _counters_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.drivers import observe as _drivers_observe
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import observe as _kubelet_observe


def layer_facts(host, problems, commands=None, options=None):
    """``{layer: facts}`` of the layers built as rooms (each brings its observer; see the layer registry); an observer
    that runs node tools (``runs_tools``: firmware's mlxconfig) also gets ``commands``; ``options`` are keyword
    arguments per layer (``{"counters": {"interval": 10}}``)."""
    out = {}
    for layer in _registry.rooms():
        kwargs = (options or {}).get(layer.name) or {}
        try:
            out[layer.name] = layer.observe(host, commands, **kwargs) if layer.runs_tools else layer.observe(host, **kwargs)
        except RdmaNodeError as exc:
            out[layer.name] = None
            problems.append({"path": "layers.%s" % layer.name, "error": exc.msg})
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host_root=dict(type="path", default="/"),
            counters_interval=dict(type="float", default=0),
            facts_json=dict(type="bool", default=False),
            compress=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    if module.params["compress"] and not module.params["facts_json"]:
        module.fail_json(msg="compress=true needs facts_json=true: only the JSON text of the facts is compressed")
    try:
        interval = _counters_observe.check_interval(module.params["counters_interval"])
        host = HostRoot(module.params["host_root"])
        commands = HostCommands(module, host)
        # one discovery: the health and counters rooms reuse the devices, GPUs and GPU-NIC classes gather() read
        disc = discover(host, commands)
        facts = gather(host, commands, disc)
        pids = pids_of(host, ("containerd", "kubelet"))  # one pass over /proc for containerd and the kubelet
        facts["persisted"] = persisted_facts(host, [name for name in facts["sysctl"] if name not in ("all", "default")])
        # the sysctl room takes the sysctl.d files persisted_facts() read (its observer's reader): returned once
        facts["layers"] = layer_facts(host, facts["problems"], commands,
                                      {"counters": {"interval": interval, "discovery": disc}, "health": {"discovery": disc},
                                       "drivers": {"discovery": disc, "modules": facts["modules"]},
                                       "sysctl": {"discovery": disc, "files": facts["persisted"].pop("sysctl_files")},
                                       "kernel": {"cmdline": facts["kernel_cmdline"], "vendor": facts["cpu_vendor"],
                                                  "boot": facts["persisted"]["kernel_cmdline"]},
                                       "containerd": {"pids": pids},
                                       "kubelet": {"pids": pids, "numa": _kubelet_observe.numa_of(facts)}})
        # drivers is the drivers room's OFED and GPUDirect report (read once, by the observer nvidia_peermem uses)
        facts["drivers"] = _drivers_observe.drivers_key(facts["layers"]["drivers"])
        # runtime.containerd and runtime.kubelet are the rooms' reports (layers.containerd and layers.kubelet without
        # the planners' input), absent when the room's observer failed (a problems entry): nothing is observed twice
        facts["runtime"] = runtime_facts(host, commands, pids, facts["layers"])
    except RdmaNodeError as exc:
        module.fail_json(**exc.to_fail_kwargs())
    if module.params["facts_json"]:
        # one string instead of some 1,500 JSON objects: the controller's module decoder runs a Python hook per object
        # and checks every string (about 5 ms of controller CPU per large host, docs/benchmarks.md, session 13).  The
        # same text rdma_audit_gather made on the controller from ansible_facts.rdma: compact, ASCII escapes.
        text = json.dumps(facts, separators=(",", ":"))
        if module.params["compress"]:
            # about 1 ms here for 90 KB -> 12 KB: what crosses the wire and what the controller holds per host
            module.exit_json(**{"changed": False, _facts_text.ZLIB_KEY: _facts_text.deflate(text)})
        module.exit_json(**{"changed": False, _facts_text.FACTS_KEY: text})
    module.exit_json(changed=False, ansible_facts={"rdma": facts})


if __name__ == "__main__":
    main()
