"""hwsim: a simulated GPU/RDMA node (sysfs, procfs and command shims) for testing rdma.k8s_node without hardware.

Python API (see README.md):
    spec = hwsim.load("dgx-h100")                 # archetype name or spec file path
    node = hwsim.Node(spec)                       # pure state model with the kernel rules, no FUSE
    hwsim.render(spec, "/tmp/root")               # power-on tree as plain files + relative symlinks
    with hwsim.mounted(spec, mountpoint) as mnt:  # FUSE mount in a daemon; mnt.root, mnt.call({...})
        ...
"""

from .mount import HwsimError, Mounted, fuse_available, mounted
from .renderer import render
from .spec import Spec, SpecError, archetypes, load
from .state import Node

__all__ = ["HwsimError", "Mounted", "Node", "Spec", "SpecError", "archetypes", "fuse_available", "load", "mounted",
           "render"]
