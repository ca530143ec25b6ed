# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot-time applier of the rdma.k8s_node ``sriov`` role: re-create VFs, VF attributes and InfiniBand VF GUIDs.

Run by the role's systemd oneshot unit: ``python3 sriov_apply.py --state /etc/rdma-k8s-node/sriov.json``.
The state file holds the complete parameters of every ``sriov_vfs`` and ``ib_vf_guids`` call the role made; this
script runs the very same code as the modules (``run_sriov_vfs`` / ``run_ib_vf_guids`` from the collection's
module_utils, installed next to it) with a small stdlib stand-in for AnsibleModule.  ``--check`` only reports drift
(exit 2), like the modules in check mode.  Exit 1 when any PF failed (the others are still applied).

At boot (``--wait-timeout N``) it first waits, at most N seconds, for every PF of the state file: the udev queue
settled (``udevadm settle``, on the node's own root only), the PF present under the name it was configured by (a
netdev or RDMA device name is resolved only once that name exists, after udev has renamed it), and the PF's netdev
and RDMA device present in sysfs (``/sys/bus/pci/devices/<bdf>/net/*`` and ``.../infiniband/*``, each one the PF had
when the role configured it).  On timeout it names each PF still missing and what is missing, applies the PFs that
are there and exits 1.  ``--retries N --retry-delay S`` re-runs the entries that failed, N more times at most (the
modules are idempotent), instead of systemd's ``Restart=``, which ``Type=oneshot`` units refuse before systemd 244.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SBIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
PACKAGE = "ansible_collections.rdma.k8s_node.plugins.module_utils"


class BundleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the module_utils sources of ``sriov_bundle.py`` (written by the role) as the collection's package."""

    def __init__(self, sources):
        self.sources = sources
        parts = PACKAGE.split(".")
        self.packages = set(".".join(parts[:end]) for end in range(1, len(parts) + 1))
        # the rooms' packages (``layers``, ``layers.sriov``): empty here, as their ``__init__`` is not bundled
        for key in sources:
            levels = key.split("/")[:-1]
            self.packages.update(".".join([PACKAGE] + levels[:end]) for end in range(1, len(levels) + 1))

    def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
        """A spec for the bundled package levels and modules, None for anything else."""
        if fullname in self.packages:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        name = self._key(fullname)
        if name in self.sources:
            return importlib.machinery.ModuleSpec(fullname, self, origin="sriov_bundle:" + name)
        return None

    @staticmethod
    def _key(fullname):
        """The bundle's key of a module under PACKAGE (its path without ``.py``), None for any other module."""
        if not fullname.startswith(PACKAGE + "."):
            return None
        return fullname[len(PACKAGE) + 1:].replace(".", "/")

    def create_module(self, spec):  # pylint: disable=unused-argument
        """Default module creation."""
        return None

    def exec_module(self, module):
        """Packages are empty; modules run their bundled source."""
        name = self._key(module.__name__)
        if module.__name__ in self.packages:
            module.__path__ = []
            return
        exec(compile(self.sources[name], "%s/%s.py" % (PACKAGE.replace(".", "/"), name), "exec"),  # pylint: disable=exec-used
             module.__dict__)


def use_bundle(path):
    """Make the bundled module_utils importable; False when there is no bundle (then --lib must hold them)."""
    if not os.path.exists(path):
        return False
    spec = importlib.util.spec_from_file_location("sriov_bundle", path)
    bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bundle)
    sys.meta_path.insert(0, BundleFinder(bundle.SOURCES))
    return True


class BootModule:
    """What ``run_sriov_vfs`` / ``run_ib_vf_guids`` use of AnsibleModule, with the standard library only."""

    def __init__(self, params, check_mode=False):
        self.params = params
        self.check_mode = check_mode
        self._diff = False  # pylint: disable=invalid-name  # AnsibleModule's attribute name
        self.run_command_environ_update = {}
        self.warnings = []

    def warn(self, message):
        """Collect a warning and print it to the journal."""
        self.warnings.append(message)
        print("warning: %s" % message, file=sys.stderr)

    @staticmethod
    def get_bin_path(name, required=False):
        """The command on PATH or in the usual sbin directories (systemd's PATH may lack some)."""
        path = shutil.which(name) or shutil.which(name, path=":".join(SBIN))
        if path is None and required:
            raise OSError("%s not found" % name)
        return path

    def run_command(self, argv, data=None, check_rc=False):  # pylint: disable=unused-argument
        """``(rc, stdout, stderr)`` like AnsibleModule.run_command with an argv list."""
        env = dict(os.environ)
        env.update(self.run_command_environ_update)
        proc = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, env=env, check=False)
        return proc.returncode, proc.stdout, proc.stderr


class PfWait:
    """One PF of the state file to wait for: how it is named and what it had when the role configured it."""

    def __init__(self, by, name, needs, seen_pci_address=None):
        self.by = by                              # netdev | rdma_device | pci_address
        self.name = name
        self.needs = list(needs)                  # of "netdev", "rdma_device"
        self.seen_pci_address = seen_pci_address  # at provisioning: only to know which GUID entries are this PF's

    def label(self):
        """How the journal names the PF."""
        return "%s %s" % ({"netdev": "netdev", "rdma_device": "RDMA device", "pci_address": "PCI device"}[self.by], self.name)

    def covers(self, params):
        """True when the module call ``params`` is about this PF."""
        if params.get(self.by) == self.name:
            return True
        return bool(self.seen_pci_address) and params.get("pci_address") == self.seen_pci_address


def wait_list(state):
    """The PFs to wait for: the state file's ``wait.pfs`` (written by the role), else derived from its entries."""
    listed = (state.get("wait") or {}).get("pfs")
    if listed is not None:
        return [PfWait(pf["by"], pf["name"], pf.get("needs") or [], pf.get("pci_address")) for pf in listed]
    pfs, seen = [], set()
    for params in list(state.get("sriov_vfs", [])) + list(state.get("ib_vf_guids", [])):
        for by in ("netdev", "rdma_device", "pci_address"):
            if params.get(by) and (by, params[by]) not in seen:
                seen.add((by, params[by]))
                pfs.append(PfWait(by, params[by], [] if by == "pci_address" else [by]))
                break
    return pfs


class Waiter:
    """Bounded wait for the PFs at boot; ``clock``/``sleep``/``settle`` are injectable for tests."""

    POLL = 0.5

    def __init__(self, host_root, timeout, clock=time.monotonic, sleep=time.sleep, settle=None):
        self.host_root = host_root or "/"
        self.timeout = timeout
        self.clock = clock
        self.sleep = sleep
        self.settle = settle if settle is not None else self.udev_settle

    def sys(self, *parts):
        """A path under the host root's /sys."""
        return os.path.join(self.host_root, "sys", *parts)

    def udev_settle(self, seconds):
        """``udevadm settle --timeout`` on the node's own root; (True, '') when settled or when it does not apply."""
        if os.path.realpath(self.host_root) != "/":
            return True, ""   # a host root seen from elsewhere: the udev of this system does not manage it
        udevadm = BootModule.get_bin_path("udevadm")
        if udevadm is None:
            return True, ""
        argv = [udevadm, "settle", "--timeout=%d" % max(1, int(seconds))]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        return proc.returncode == 0, proc.stdout.strip() or "udevadm settle exited %d" % proc.returncode

    def _listdir(self, path):
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def missing(self, pf):
        """What of ``pf`` is not there yet (empty when it is complete)."""
        if pf.by == "pci_address":
            bdf = pf.name
            if not os.path.isdir(self.sys("bus", "pci", "devices", bdf)):
                return ["PCI device %s" % bdf]
        else:
            base = self.sys("class", "net" if pf.by == "netdev" else "infiniband", pf.name)
            try:
                bdf = os.path.basename(os.readlink(os.path.join(base, "device")))
            except OSError:
                return ["%s (not present)" % pf.label()]
        gone = []
        for need, directory, what in (("netdev", "net", "netdev"), ("rdma_device", "infiniband", "RDMA device")):
            if need in pf.needs and not self._listdir(self.sys("bus", "pci", "devices", bdf, directory)):
                gone.append("%s of %s (/sys/bus/pci/devices/%s/%s/ empty)" % (what, bdf, bdf, directory))
        return gone

    def incomplete(self, pfs):
        """``{pf label: [what is missing]}`` for the PFs not complete now."""
        found = dict((pf.label(), self.missing(pf)) for pf in pfs)
        return dict((label, what) for label, what in found.items() if what)

    def wait(self, pfs):
        """Wait, at most ``timeout`` s, until every PF is complete and then the udev queue is settled.

        Returns ``(missing, note)``: ``{pf label: [what is missing]}`` for the PFs still incomplete at the deadline
        (empty: all there) and why udev did not settle (None when it did, or was not asked).  The settle comes once
        the PFs are there because their own events (the netdev rename of udev's naming rules) come with them.
        """
        deadline = self.clock() + self.timeout
        while True:
            missing = self.incomplete(pfs)
            if not missing:
                settled, why = self.settle(max(0.0, deadline - self.clock()))
                missing = self.incomplete(pfs)
                if not missing:
                    return {}, None if settled else why
            if self.clock() >= deadline:
                return missing, None
            self.sleep(min(self.POLL, max(0.0, deadline - self.clock())))


def host_root_of(state):
    """The host root the state file's module calls use."""
    for params in list(state.get("sriov_vfs", [])) + list(state.get("ib_vf_guids", [])):
        if params.get("host_root"):
            return params["host_root"]
    return (state.get("wait") or {}).get("host_root") or "/"


def run_entries(entries, check_mode, errors, attempt):
    """Run each (step name, run function, params); print one JSON line each; return (failed entries, changed count)."""
    failed, changed = [], 0
    for name, run, params in entries:
        module = BootModule(params, check_mode=check_mode)
        target = params.get("netdev") or params.get("rdma_device") or params.get("pci_address")
        line = {"step": name, "pf": target}
        if attempt:
            line["attempt"] = attempt + 1
        try:
            result = run(module)
        except errors.RdmaNodeError as exc:
            failed.append((name, run, params))
            line.update(failed=True, msg=exc.msg)
            print(json.dumps(line), flush=True)
            continue
        changed += bool(result["changed"])
        line.update(changed=result["changed"], actions=[step["action"] for step in result["actions"]])
        print(json.dumps(line), flush=True)
    return failed, changed


def main(argv=None):
    """Apply (or with --check, audit) every entry of the state file; print one JSON line per entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="/etc/rdma-k8s-node/sriov.json")
    parser.add_argument("--bundle", default=os.path.join(HERE, "sriov_bundle.py"), help="the role's module_utils bundle")
    parser.add_argument("--lib", default=HERE, help="without a bundle: directory holding ansible_collections/rdma/k8s_node")
    parser.add_argument("--check", action="store_true", help="report drift only (exit 2 when there is some)")
    parser.add_argument("--wait-timeout", type=float, default=0,
                        help="first wait at most this many seconds for udev and every PF (0: no wait)")
    parser.add_argument("--retries", type=int, default=0, help="re-run the entries that failed this many more times")
    parser.add_argument("--retry-delay", type=float, default=10, help="seconds between two runs")
    args = parser.parse_args(argv)
    if not use_bundle(args.bundle):
        sys.path.insert(0, args.lib)
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.module_utils import _errors
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sriov import apply as _sriov_apply

    with open(args.state, encoding="utf-8") as handle:
        state = json.load(handle)
    if state.get("version") != 1:
        print("unsupported state file version %r in %s" % (state.get("version"), args.state), file=sys.stderr)
        return 1
    entries = [(name, run, params)
               for name, run in (("sriov_vfs", _sriov_apply.run_sriov_vfs), ("ib_vf_guids", _sriov_apply.run_ib_vf_guids))
               for params in state.get(name, [])]
    missing = {}
    if args.wait_timeout > 0 and not args.check:
        pfs = wait_list(state)
        missing, note = Waiter(host_root_of(state), args.wait_timeout).wait(pfs)
        if note:
            print("warning: the udev event queue did not settle (%s); applying to the PFs present" % note, file=sys.stderr)
        for label, what in missing.items():
            print(json.dumps({"step": "wait", "pf": label, "failed": True, "missing": what,
                              "msg": "%s still missing after %gs: %s" % (label, args.wait_timeout, "; ".join(what))}),
                  flush=True)
        absent = [pf for pf in pfs if pf.label() in missing]
        entries = [entry for entry in entries if not any(pf.covers(entry[2]) for pf in absent)]
    failed, changed = run_entries(entries, args.check, _errors, 0)
    for attempt in range(1, max(0, args.retries) + 1):
        if not failed or args.check:
            break
        time.sleep(args.retry_delay)
        # GUIDs are set on the VFs sriov_vfs makes: after a failed sriov_vfs call its PF's ib_vf_guids call (which
        # found no VFs, or old ones) runs again too; state entries do not say which PF a netdev name is, so all do.
        again = [entry for entry in entries if entry in failed
                 or (entry[0] == "ib_vf_guids" and any(name == "sriov_vfs" for name, dummy_run, dummy_params in failed))]
        failed, more = run_entries(again, args.check, _errors, attempt)
        changed += more
    if failed or missing:
        return 1
    return 2 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
