"""Build small kernel-shaped sysfs/procfs trees for unit tests (relative links, as the kernel makes them).

Only for cases the real captures and the simulator do not cover (zero-GUID VFs, unbound VFs, cgroups, odd
values, unreadable files).  Paths are node paths (``/sys/...``) under ``root``.
"""

import os
import pathlib


class SysfsTree:
    """A node tree under ``root``; every method takes node paths and returns node paths."""

    def __init__(self, root):
        self.root = pathlib.Path(root)

    def local(self, node_path):
        return self.root / node_path.lstrip("/")

    def file(self, node_path, content=""):
        path = self.local(node_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if content.endswith("\n") or content == "" else content + "\n")
        return node_path

    def dir(self, node_path):
        self.local(node_path).mkdir(parents=True, exist_ok=True)
        return node_path

    def link(self, node_path, target_node_path):
        """A relative symlink at ``node_path`` to ``target_node_path``, like sysfs has."""
        path = self.local(node_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        rel = os.path.relpath(str(self.local(target_node_path)), str(path.parent))
        os.symlink(rel, str(path))
        return node_path

    # -- PCI --------------------------------------------------------------------------------------------------------
    def pci(self, chain, host_bridge="pci0000:00", vendor="0x15b3", device="0x1021", klass="0x020700",
            numa_node="0", driver=None, local_cpulist=None, extra=None):
        """A PCI function at the end of ``chain`` (BDFs below ``host_bridge``); bridges in the chain are created too."""
        path = "/sys/devices/" + host_bridge
        for i, bdf in enumerate(chain):
            path = path + "/" + bdf
            if os.path.isdir(str(self.local(path))):
                continue
            last = i == len(chain) - 1
            self.file(path + "/vendor", vendor if last else "0x10b5")
            self.file(path + "/device", device if last else "0x9797")
            self.file(path + "/class", klass if last else "0x060400")
            if numa_node is not None:
                self.file(path + "/numa_node", numa_node)
            if last and local_cpulist is not None:
                self.file(path + "/local_cpulist", local_cpulist)
            self.link("/sys/bus/pci/devices/" + bdf, path)
            if last and driver:
                self.dir("/sys/bus/pci/drivers/" + driver)
                self.link(path + "/driver", "/sys/bus/pci/drivers/" + driver)
            elif not last:
                self.dir("/sys/bus/pci/drivers/pcieport")
                self.link(path + "/driver", "/sys/bus/pci/drivers/pcieport")
        for name, value in (extra or {}).items():
            self.file(path + "/" + name, value)
        return path

    def sriov(self, pf_path, vf_bdfs, totalvfs=16, driver="mlx5_core", numa_node="0"):
        """``sriov_*`` on the PF, one VF function per BDF (siblings of the PF), ``virtfnN``/``physfn`` links."""
        self.file(pf_path + "/sriov_totalvfs", str(totalvfs))
        self.file(pf_path + "/sriov_numvfs", str(len(vf_bdfs)))
        parent = os.path.dirname(pf_path)
        vf_paths = []
        for index, bdf in enumerate(vf_bdfs):
            vf_path = parent + "/" + bdf
            self.file(vf_path + "/vendor", "0x15b3")
            self.file(vf_path + "/device", "0x101e")
            self.file(vf_path + "/class", "0x020700")
            if numa_node is not None:
                self.file(vf_path + "/numa_node", numa_node)
            self.link("/sys/bus/pci/devices/" + bdf, vf_path)
            self.link(pf_path + "/virtfn%d" % index, vf_path)
            self.link(vf_path + "/physfn", pf_path)
            if driver:
                self.dir("/sys/bus/pci/drivers/" + driver)
                self.link(vf_path + "/driver", "/sys/bus/pci/drivers/" + driver)
            vf_paths.append(vf_path)
        return vf_paths

    def ibdev(self, pci_path, name, node_guid="0000:0000:0000:0000", link_layer="InfiniBand",
              state="4: ACTIVE", phys_state="5: LinkUp", gid0=None, ports=1, fw_ver="28.41.1000"):
        path = pci_path + "/infiniband/" + name
        self.file(path + "/node_guid", node_guid)
        self.file(path + "/fw_ver", fw_ver)
        self.file(path + "/board_id", "MT_0000000838")
        self.link(path + "/device", pci_path)
        for port in range(1, ports + 1):
            base = "%s/ports/%d" % (path, port)
            self.file(base + "/link_layer", link_layer)
            self.file(base + "/state", state)
            self.file(base + "/phys_state", phys_state)
            self.file(base + "/rate", "400 Gb/sec (4X NDR)")
            self.file(base + "/gids/0", gid0 or "fe80:0000:0000:0000:0000:0000:0000:0000")
        self.link("/sys/class/infiniband/" + name, path)
        return path

    def netdev(self, pci_path, name, mtu=4092, sysctl=None):
        path = pci_path + "/net/" + name
        self.file(path + "/mtu", str(mtu))
        self.link("/sys/class/net/" + name, path)
        for key, value in (sysctl or {}).items():
            self.file("/proc/sys/net/ipv4/conf/%s/%s" % (name, key), str(value))
        return path
