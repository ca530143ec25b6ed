# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``irq`` layer's planner, pure: desired + observed -> the actions, the files' texts, warnings and problems.

Where a NIC's interrupts go: the CPUs the kubelet keeps for the system (``reservedSystemCPUs``: the static CPU
manager gives pods exclusive CPUs only from the others) that are on the NIC's own NUMA node.  When that
intersection is empty, ``on_disjoint`` decides: ``fail`` (the default) refuses, naming the NIC, its node and the
reserved set; ``local`` uses the NIC's NUMA-local CPUs (pods' CPUs among them) with a warning; ``reserved`` uses the
reserved CPUs of the other node (off the pods' CPUs, across the inter-socket link) with a warning.  Without a
reserved set (no static CPU manager) the NUMA-local CPUs are the target.

Interrupts whose affinity the kernel manages (``settable`` false) are reported in ``managed``, never written.  The
module applies exactly these actions (check mode lists them); the audit runs the same function on the facts.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._topology import format_cpulist, parse_cpulist
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.irq import interrupts

HEADER = "# Managed by rdma.k8s_node.irq_affinity: change the role's variables, not this file.\n"
ON_DISJOINT = ("fail", "local", "reserved")
IRQBALANCE = ("policy", "stop", "ignore")
UNIT_WAIT = 120

#: the boot applier: for each PCI address, wait for its driver's vectors, then write every vector's affinity
SCRIPT_TEXT = HEADER + r"""# Usage: irq-affinity.sh WAIT_SECONDS PCI_ADDRESS CPULIST [PCI_ADDRESS CPULIST ...]
# Waits up to WAIT_SECONDS per function for its MSI vectors (driver probe), then writes CPULIST to
# /proc/irq/<n>/smp_affinity_list of each vector that has a handler. A vector the kernel refuses (kernel-managed
# affinity: EPERM or EIO) is reported and left alone; a function without vectors after the wait fails the unit.
wait=$1
shift
rc=0
while [ "$#" -ge 2 ]; do
    bdf=$1
    cpus=$2
    shift 2
    dir=/sys/bus/pci/devices/$bdf/msi_irqs
    waited=0
    while [ -z "$(ls "$dir" 2>/dev/null)" ]; do
        if [ "$waited" -ge "$wait" ]; then
            echo "$bdf: no MSI vectors after ${wait}s (driver not bound?)" >&2
            rc=1
            continue 2
        fi
        sleep 1
        waited=$((waited + 1))
    done
    for irq in $(ls "$dir"); do
        file=/proc/irq/$irq/smp_affinity_list
        [ -e "$file" ] || continue
        if ! echo "$cpus" > "$file" 2>/dev/null; then
            echo "$bdf: IRQ $irq refused affinity $cpus (kernel-managed?), left alone" >&2
        fi
    done
done
exit $rc
"""


def render_unit(script, wait, targets):
    """The boot unit: after the NIC drivers probe (udev coldplug, module loading, the RDMA stack, openibd) and
    before irqbalance and the kubelet; ``PartOf=openibd.service`` restarts it whenever openibd restarts (a driver
    reload gives the vectors new numbers and the driver's own affinities)."""
    args = " ".join("%s %s" % (bdf, targets[bdf]) for bdf in sorted(targets))
    return "".join([
        HEADER,
        "[Unit]\n",
        "Description=rdma.k8s_node: RDMA NIC interrupts on the reserved CPUs of their NUMA node\n",
        "After=systemd-udev-trigger.service systemd-modules-load.service rdma-hw.target openibd.service\n",
        "Before=irqbalance.service kubelet.service\n",
        "PartOf=openibd.service\n",
        "\n[Service]\n",
        "Type=oneshot\n",
        "RemainAfterExit=yes\n",
        "TimeoutStartSec=%d\n" % (wait * max(1, len(targets)) + 30),
        "ExecStart=/bin/sh %s %d%s\n" % (script, wait, (" " + args) if args else ""),
        "\n[Install]\n",
        "WantedBy=multi-user.target openibd.service\n"])


def render_policy(bdfs):
    """irqbalance's policy script (``--policyscript``): called with the device's sysfs path and the IRQ number for
    every interrupt it finds; ``ban=true`` keeps it away from those of our NICs (whatever their IRQ numbers)."""
    lines = [HEADER, "# irqbalance --policyscript: $1 = the device's sysfs path, $2 = the IRQ number.\n"]
    if bdfs:
        lines.append('case "${1##*/}" in\n%s)\n    echo ban=true\n    ;;\nesac\n' % "|".join(sorted(bdfs)))
    lines.append("exit 0\n")
    return "".join(lines)


def _cpus(text):
    try:
        return parse_cpulist(text) if text is not None else None
    except ValueError:
        return None


def target_of(bdf, item, reserved, on_disjoint, online):
    """``(cpus or None, warning or None, problem or None)`` for one function."""
    local = _cpus(item.get("local_cpus"))
    if not local or item.get("numa_node", -1) < 0:
        local = list(online)
    local = [cpu for cpu in local if cpu in online] or list(online)
    who = "%s (%s)" % (bdf, ", ".join(item["rdma_devices"])) if item.get("rdma_devices") else bdf
    if reserved is None:
        return local, None, None
    both = sorted(set(reserved) & set(local))
    if both:
        return both, None, None
    where = "none of the reserved CPUs (%s) is on its NUMA node %s (CPUs %s)" % (
        format_cpulist(reserved), item.get("numa_node"), format_cpulist(local))
    if on_disjoint == "local":
        return local, "%s: %s; its interrupts go to the NUMA-local CPUs, which pods may also get" % (who, where), None
    if on_disjoint == "reserved":
        return sorted(reserved), ("%s: %s; its interrupts go to the reserved CPUs of another NUMA node (off the pods' "
                                  "CPUs, across the inter-socket link)" % (who, where)), None
    return None, None, ("%s: %s: reserve CPUs on every RDMA NIC's NUMA node (kubelet_topology_reserved_system_cpus), or "
                        "set on_disjoint to local or reserved" % (who, where))


def _mismatch_warning(bdf, item, entry):
    """The warning of one observer cross-check entry (``msi_irqs/`` and ``/proc/interrupts`` disagree)."""
    ours = str(entry["irq"]) in (item.get("irqs") or {}) or entry["irq"] in (item.get("unrequested") or [])
    if ours:
        return ("%s: IRQ %s is one of its MSI vectors (msi_irqs) but /proc/interrupts names %s (%s): placed with %s's "
                "vectors, as msi_irqs says" % (bdf, entry["irq"], entry["names"], entry["name"], bdf))
    return ("%s: IRQ %s (%s) names it in /proc/interrupts but is not one of its MSI vectors (msi_irqs): an INTx line or "
            "a vector freed since; left alone" % (bdf, entry["irq"], entry["name"]))


def _policy_conflict(args, policy):
    """Another policy script on irqbalance's command line (``-l X``, ``--policyscript X|=X``), or None."""
    for index, word in enumerate(args or []):
        value = None
        if word.startswith("--policyscript="):
            value = word.split("=", 1)[1]
        elif word in ("-l", "--policyscript") and index + 1 < len(args):
            value = args[index + 1]
        elif word.startswith("-l") and len(word) > 2:
            value = word[2:]
        if value is not None and value != policy:
            return value
    return None


def plan_irqbalance(mode, observed, policy_path, bdfs, files, actions, problems):
    """The policy script and irqbalance's ``IRQBALANCE_ARGS`` (mode ``policy`` only)."""
    state = observed.get("irqbalance") or {}
    if mode != "policy":
        return
    env = state.get("env_file")
    if not state.get("installed") and not (env and env.get("exists")):
        return
    if not env:
        problems.append("irqbalance is installed but none of /etc/default/irqbalance, /etc/sysconfig/irqbalance exists: "
                        "set irqbalance_env_file (or irqbalance=stop to disable it)")
        return
    if env.get("error"):
        problems.append("irqbalance's %s: %s" % (env["path"], env["error"]))
        return
    args = state.get("args") or []
    other = _policy_conflict(args, policy_path)
    if other:
        problems.append("irqbalance already runs the policy script %s (%s in %s): irqbalance takes one; remove it, or "
                        "set irqbalance to stop or ignore" % (other, interrupts.ARGS_VAR, env["path"]))
        return
    text = render_policy(bdfs)
    files[policy_path] = text
    if (observed.get("policy") or {}).get("text") != text:
        actions.append({"action": "write_policy", "target": policy_path, "devices": sorted(bdfs)})
    word = "--policyscript=" + policy_path
    if word not in args:
        after = list(args) + [word]
        files[env["path"]] = interrupts.with_args(
            env.get("text") or "", after, "# rdma.k8s_node.irq_affinity: irqbalance leaves the RDMA NICs' interrupts alone\n")
        actions.append({"action": "edit_irqbalance_env", "target": env["path"], "before": " ".join(args),
                        "after": " ".join(after)})


def plan(desired, observed):
    """``{"actions", "targets", "managed", "warnings", "problems", "files"}``.

    ``desired``: ``cpus`` (the reserved CPUs as a list, None = none reserved), ``on_disjoint``, ``devices`` (PCI
    addresses), ``boot_unit``, ``irqbalance`` (``policy``/``stop``/``ignore``), ``wait`` (seconds the boot script
    waits per function), ``unit``/``script``/``policy`` paths.  ``observed``: :func:`observe.observe`'s result.
    ``actions``: ``write_script``, ``write_policy``, ``edit_irqbalance_env``, ``write_unit`` (files, in that order),
    then ``set_affinity`` per vector whose affinity is not the target.  ``files``: ``{path: text}`` the file actions
    write.  ``problems``: the module refuses on any.
    """
    online = _cpus(observed.get("cpus_online")) or []
    reserved = desired.get("cpus")
    actions, problems, warnings, managed, files, targets = [], [], [], [], {}, {}
    if reserved is not None:
        offline = sorted(set(reserved) - set(online))
        if offline:
            problems.append("cpus: CPUs %s are not online on this node (online: %s)" % (
                format_cpulist(offline), observed.get("cpus_online")))
            reserved = sorted(set(reserved) & set(online))
    sets = []
    for bdf in sorted(desired.get("devices") or []):
        item = (observed.get("devices") or {}).get(bdf) or {"error": "not an RDMA NIC's physical function here"}
        if "error" in item:
            problems.append("%s: %s" % (bdf, item["error"]))
            continue
        cpus, warning, problem = target_of(bdf, item, reserved, desired.get("on_disjoint", "fail"), online)
        if warning:
            warnings.append(warning)
        if problem:
            problems.append(problem)
            continue
        targets[bdf] = format_cpulist(cpus)
        warnings.extend(_mismatch_warning(bdf, item, entry) for entry in item.get("mismatched") or [])
        for number in sorted(item.get("irqs") or {}, key=int):
            irq = item["irqs"][number]
            if _cpus(irq.get("affinity")) == cpus:
                continue
            if not irq.get("settable", True):
                managed.append({"irq": number, "device": bdf, "name": irq.get("name"), "affinity": irq.get("affinity")})
                continue
            sets.append({"action": "set_affinity", "target": number, "device": bdf, "name": irq.get("name"),
                         "before": irq.get("affinity"), "after": targets[bdf]})
    for entry in managed:
        warnings.append("IRQ %s (%s) of %s: the kernel manages its affinity (%s); left alone" % (
            entry["irq"], entry["name"], entry["device"], entry["affinity"]))
    script, unit, policy = desired.get("script"), desired.get("unit"), desired.get("policy")
    if desired.get("boot_unit", True):
        files[script] = SCRIPT_TEXT
        if (observed.get("script") or {}).get("text") != SCRIPT_TEXT:
            actions.append({"action": "write_script", "target": script})
    plan_irqbalance(desired.get("irqbalance", "policy"), observed, policy, list(targets), files, actions, problems)
    if desired.get("boot_unit", True):
        text = render_unit(script, int(desired.get("wait", UNIT_WAIT)), targets)
        files[unit] = text
        if (observed.get("unit") or {}).get("text") != text:
            actions.append({"action": "write_unit", "target": unit, "values": dict(targets)})
    return {"actions": actions + sets, "targets": targets, "managed": managed, "warnings": warnings,
            "problems": problems, "files": files}
