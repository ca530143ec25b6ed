# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot-time applier of the rdma.k8s_node ``sriov`` role: re-create VFs, VF attributes and InfiniBand VF GUIDs.

Run by the role's systemd oneshot unit: ``python3 sriov_apply.py --state /etc/rdma-k8s-node/sriov.json``.
The state file holds the complete parameters of every ``sriov_vfs`` and ``ib_vf_guids`` call the role made; this
script runs the very same code as the modules (``run_sriov_vfs`` / ``run_ib_vf_guids`` from the collection's
module_utils, installed next to it) with a small stdlib stand-in for AnsibleModule.  ``--check`` only reports drift
(exit 2), like the modules in check mode.  Exit 1 when any PF failed (the others are still applied).
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

HERE = os.path.dirname(os.path.abspath(__file__))
SBIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
PACKAGE = "ansible_collections.rdma.k8s_node.plugins.module_utils"


class BundleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the module_utils sources of ``sriov_bundle.py`` (written by the role) as the collection's package."""

    def __init__(self, sources):
        self.sources = sources
        parts = PACKAGE.split(".")
        self.packages = set(".".join(parts[:end]) for end in range(1, len(parts) + 1))

    def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
        """A spec for the bundled package levels and modules, None for anything else."""
        if fullname in self.packages:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        package, dummy_dot, name = fullname.rpartition(".")
        if package == PACKAGE and name in self.sources:
            return importlib.machinery.ModuleSpec(fullname, self, origin="sriov_bundle:" + name)
        return None

    def create_module(self, spec):  # pylint: disable=unused-argument
        """Default module creation."""
        return None

    def exec_module(self, module):
        """Packages are empty; modules run their bundled source."""
        name = module.__name__.rpartition(".")[2]
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


def main(argv=None):
    """Apply (or with --check, audit) every entry of the state file; print one JSON line per entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="/etc/rdma-k8s-node/sriov.json")
    parser.add_argument("--bundle", default=os.path.join(HERE, "sriov_bundle.py"), help="the role's module_utils bundle")
    parser.add_argument("--lib", default=HERE, help="without a bundle: directory holding ansible_collections/rdma/k8s_node")
    parser.add_argument("--check", action="store_true", help="report drift only (exit 2 when there is some)")
    args = parser.parse_args(argv)
    if not use_bundle(args.bundle):
        sys.path.insert(0, args.lib)
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.rdma.k8s_node.plugins.module_utils import _errors, _sriov_host

    with open(args.state, encoding="utf-8") as handle:
        state = json.load(handle)
    if state.get("version") != 1:
        print("unsupported state file version %r in %s" % (state.get("version"), args.state), file=sys.stderr)
        return 1
    failed = changed = 0
    for name, run in (("sriov_vfs", _sriov_host.run_sriov_vfs), ("ib_vf_guids", _sriov_host.run_ib_vf_guids)):
        for params in state.get(name, []):
            module = BootModule(params, check_mode=args.check)
            target = params.get("netdev") or params.get("rdma_device") or params.get("pci_address")
            try:
                result = run(module)
            except _errors.RdmaNodeError as exc:
                failed += 1
                print(json.dumps({"step": name, "pf": target, "failed": True, "msg": exc.msg}), flush=True)
                continue
            changed += bool(result["changed"])
            print(json.dumps({"step": name, "pf": target, "changed": result["changed"],
                              "actions": [step["action"] for step in result["actions"]]}), flush=True)
    if failed:
        return 1
    return 2 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
