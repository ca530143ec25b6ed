# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``firmware`` layer's applier: runs exactly the actions of :func:`plan.plan`.

Each ``set`` is one ``<tool> -d <device> -y set K=V ...`` (the tool validates every pair before it writes any), then
a query checks that Next Boot holds the new values.  A phase-2 set (MAX_ACC_OUT_READ, listed once the phase-1
ADVANCED_PCI_SETTINGS=True is staged) queries first.  If a set fails or does not read back, the values staged
before it (this run's earlier sets) are staged back to what Next Boot held: nothing is left half-staged, and the
Current configuration was never touched.  A ``reset`` (only when the user asked for it) runs
``<reset tool> -d <device> --level <n> -y reset`` after every set, then checks that Current equals Next Boot; a
reset cannot be undone, so a failure there says which values are staged and still pending.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, VerifyError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import mlxconfig
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware.observe import query


def _run_set(commands, tool, device, values):
    """``None`` when the tool staged ``values`` ([(name, value)]), else the reason."""
    rc, out, err = commands.run_kernel(mlxconfig.set_argv(tool, device, values))
    errors = mlxconfig.errors_of(out) + mlxconfig.errors_of(err)
    if rc != 0 or errors:
        return "; ".join(errors) or (err or out or "").strip()[-300:] or "rc=%s" % rc
    return None


def _undo(commands, tool, done):
    """Stage back the Next Boot values this run changed, last set first; returns what could not be put back."""
    left = []
    for device, values in reversed(done):
        back = [(name, value) for name, value in values if value is not None]
        if back and _run_set(commands, tool, device, back) is not None:
            left.append("%s: %s" % (device, ", ".join("%s=%s" % item for item in back)))
    return left


def _undone(done, left):
    if not done:
        return "nothing had been staged"
    if left:
        return "could not stage back %s (check them with mlxconfig -e q)" % "; ".join(left)
    return "the values staged before were staged back"


def apply(commands, tools, planned):
    """Run ``planned["actions"]``; returns ``{device: the reset tool's output}`` of the resets run.
    ApplyError / VerifyError (after staging back this run's sets) when the tool refuses or does not read back."""
    tool = tools["path"]
    done = []
    resets = {}
    for step in planned["actions"]:
        device = step["target"]
        if step["action"] == "set":
            values = [(name, change["after"]) for name, change in step["params"].items()]
            if step["phase"] == 2:
                listed = (query(commands, tool, device).get("params") or {})
                missing = [name for name, dummy in values if name not in listed]
                if missing:
                    left = _undo(commands, tool, done)
                    raise VerifyError("%s still lists no %s after ADVANCED_PCI_SETTINGS=True was staged (the firmware "
                                      "does not offer it); %s" % (device, ", ".join(missing), _undone(done, left)),
                                      {"device": device, "missing": missing})
            reason = _run_set(commands, tool, device, values)
            if reason is not None:
                left = _undo(commands, tool, done)
                raise ApplyError("%s -d %s set %s failed: %s; %s" % (
                    tools["name"], device, " ".join("%s=%s" % item for item in values), reason, _undone(done, left)),
                    {"device": device, "values": dict(values)})
            done.append((device, [(name, change["undo"]) for name, change in step["params"].items()]))
            now = query(commands, tool, device)
            wrong = dict((name, (now.get("params") or {}).get(name, [None, None, None])[2]) for name, value in values
                         if not mlxconfig.same(value, (now.get("params") or {}).get(name, [None, None, ""])[2]))
            if wrong or "error" in now:
                left = _undo(commands, tool, done)
                raise VerifyError("%s: Next Boot does not hold the staged values after set (%s); %s" % (
                    device, now.get("error") or ", ".join("%s=%s" % item for item in sorted(wrong.items())),
                    _undone(done, left)), {"device": device, "read_back": wrong})
        elif step["action"] == "reset":
            if not tools.get("reset_path"):
                raise ApplyError("%s is not installed: the staged values of %s stay pending until a reboot"
                                 % (tools.get("reset") or "mlxfwreset", device), {"device": device})
            rc, out, err = commands.run_kernel([tools["reset_path"], "-d", device, "--level", str(step["level"]), "-y",
                                                "reset"])
            if rc != 0:
                raise ApplyError("%s -d %s --level %s reset failed (rc=%s): %s; the staged values stay pending (%s)" % (
                    tools["reset"], device, step["level"], rc,
                    "; ".join(mlxconfig.errors_of(out) + mlxconfig.errors_of(err)) or (err or out).strip()[-300:],
                    ", ".join(step["pending"])), {"device": device, "pending": step["pending"]})
            resets[device] = out
            now = query(commands, tool, device)
            still = sorted(name for name, row in (now.get("params") or {}).items() if row[1] != row[2])
            if "error" in now or still:
                raise VerifyError("%s: the firmware reset ran but %s" % (
                    device, now.get("error") or "Current still differs from Next Boot for %s" % ", ".join(still)),
                    {"device": device, "pending": still})
    return resets
