# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``netns`` layer's observer: written once, used by the module (:func:`observe`) and by ``rdma_facts``
(:func:`facts`, ``layers.netns``).

Reads ib_core's live ``netns_mode`` (``/sys/module/ib_core``), the mode the running kernel's command line sets, every
modprobe.d file kmod reads (in its order: a name in ``/etc`` hides the same name in ``/run``, ``/usr/local/lib``,
``/usr/lib`` and ``/lib``), and whether the RDMA shared device plugin runs (``/proc/<pid>/comm``).  The facts add the
mode the next boot gets (the boot configuration's command line wins over modprobe.d) and the files in
``/etc/modprobe.d`` that set ib_core options, so the audit can run the module's planner on them.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils import _modprobe
from ansible_collections.rdma.k8s_node.plugins.module_utils import _persisted
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kernel.cmdline import last_value
from ansible_collections.rdma.k8s_node.plugins.module_utils._filestate import observe_file
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.netns.mode import mode_of

IB_CORE = "/sys/module/ib_core"
NETNS_PARAM = IB_CORE + "/parameters/netns_mode"
MODPROBE_DIR = _modprobe.CONFIG_DIRS[0]
CONF_FILE = "/etc/modprobe.d/rdma-k8s-node-ib_core.conf"
SHARED_DEVICE_PLUGIN = "k8s-rdma-shared"  # /proc/<pid>/comm is cut at 15 characters


def read_live(host):
    """``(loaded, mode)`` of the running kernel from ib_core's parameter file."""
    if not host.isdir(IB_CORE):
        return False, None
    return True, mode_of(host.read_attr(NETNS_PARAM))


def modprobe_layers(host, ours=None):
    """``[(path, directives)]`` of every modprobe.d file in kmod's reading order, ``ours`` left out (the planner puts
    it in as it will be)."""
    listing = dict((d, host.listdir(d)) for d in _modprobe.CONFIG_DIRS)
    layers = []
    for directory, name in _modprobe.config_files(listing):
        path = directory + "/" + name
        if path != ours:
            layers.append((path, _modprobe.directives(host.read_text(path, default=""))))
    return layers


def shared_plugins(host):
    """The ``comm`` names of the running processes of the RDMA shared device plugin."""
    found = set()
    for pid in host.listdir("/proc"):
        if pid.isdigit():
            comm = host.try_attr("/proc/%s/comm" % pid) or ""
            if comm.startswith(SHARED_DEVICE_PLUGIN):
                found.add(comm)
    return sorted(found)


def observe(host, conf=CONF_FILE):
    """What the module plans on: ``{"ib_core_loaded", "live", "cmdline_value", "cmdline", "conf" (our file's
    FileState), "modprobe" (the other files, :func:`modprobe_layers`), "shared_device_plugin"}``."""
    loaded, live = read_live(host)
    cmdline_value = last_value(host.read_attr("/proc/cmdline", default=""), "ib_core.netns_mode")
    return {"ib_core_loaded": loaded, "live": live, "cmdline_value": cmdline_value, "cmdline": mode_of(cmdline_value),
            "conf": observe_file(host, conf), "modprobe": modprobe_layers(host, conf),
            "shared_device_plugin": shared_plugins(host)}


def _file_facts(host, path):
    state = observe_file(host, path)
    out = {"content": state.content, "mode": state.mode, "uid": state.uid, "gid": state.gid}
    if state.link is not None:
        out["link"] = state.link
    return out


def facts(host):
    """``rdma_facts``' ``layers.netns``: ``{"ib_core_loaded", "live", "cmdline_value", "cmdline", "modprobe" (every
    modprobe.d file in kmod's order with its ib_core lines: ``[{"path", "directives"}]``), "files" (the content,
    mode and owner of each file in /etc/modprobe.d with an ib_core line), "persisted" (the mode the next boot gets:
    ``{modprobe, modprobe_file, cmdline, effective}``), "shared_device_plugin", "problems"}``."""
    loaded, live = read_live(host)
    cmdline_value = last_value(host.read_attr("/proc/cmdline", default=""), "ib_core.netns_mode")
    problems = []
    reader = _persisted.Reader(host, problems)
    layers = _persisted.modprobe_layers(reader)
    boot = _persisted.boot_cmdline(reader, host.try_attr("/proc/sys/kernel/osrelease"))
    modprobe = _persisted.modprobe_facts(layers, ("ib_core",))
    files = dict((item["path"], _file_facts(host, item["path"])) for item in modprobe
                 if item["directives"] and item["path"].rpartition("/")[0] == MODPROBE_DIR)
    return {"ib_core_loaded": loaded, "live": live, "cmdline_value": cmdline_value, "cmdline": mode_of(cmdline_value),
            "modprobe": modprobe, "files": files, "persisted": _persisted.netns_persisted(reader, boot, layers),
            "shared_device_plugin": shared_plugins(host), "problems": problems}
