# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RDMA subsystem network-namespace mode, pure: value spellings and the live-switch decision.

The kernel keeps the mode in ib_core's ``netns_mode`` parameter (``Y`` shared, ``N`` exclusive; the modprobe
option takes ``1``/``0``).  ``rdma system set netns`` changes it at run time, but ``rdma_compatdev_set()`` refuses
with EBUSY as soon as any non-init network namespace exists, which on a Kubernetes node is always (every pod has
one).  So the live switch is a best effort on a quiet node, and a refusal means "reboot", never a failure and
never a retry loop.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

MODES = ("shared", "exclusive")
# kstrtobool() spellings the kernel accepts for a bool parameter
_TRUE = ("y", "yes", "1", "on", "true")
_FALSE = ("n", "no", "0", "off", "false")


def param_value(mode):
    """The modprobe option value for a mode: ``1`` shared, ``0`` exclusive."""
    return "1" if mode == "shared" else "0"


def mode_of(value):
    """The mode a bool parameter spelling means, None for None; anything else is a ParseError."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in _TRUE:
        return "shared"
    if text in _FALSE:
        return "exclusive"
    raise ParseError("%r is not a value ib_core's netns_mode accepts (Y/N, 1/0, on/off)" % (value,))


def render_conf(mode):
    """Our modprobe.d file: one ``options`` line, with a header saying who owns it."""
    return ("# Managed by rdma.k8s_node.rdma_netns: RDMA subsystem netns mode %s.\n"
            "# Change it with the module, not by hand; it takes effect when ib_core loads (at boot).\n"
            "options ib_core netns_mode=%s\n" % (mode, param_value(mode)))


def live_decision(desired, live, loaded, allow_live):
    """What to do about the running kernel: ``"none"`` (already right, or ib_core not loaded so the option applies
    at load), ``"switch"`` (try ``rdma system set netns``), or ``"reboot"`` (differs, and no live switch allowed)."""
    if not loaded or live == desired:
        return "none"
    return "switch" if allow_live else "reboot"


def is_busy(rc, stderr):
    """True when ``rdma system set`` failed because namespaces exist (EBUSY), the expected refusal on a busy node."""
    return rc != 0 and ("busy" in stderr.lower() or "ebusy" in stderr.lower())


def overrides(settings, ours, mode):
    """Settings that keep ``mode`` from applying when ib_core loads.

    ``settings``: :func:`_modprobe.settings_of` with our file in place (``[(value, path, line)]`` in the order the
    kernel applies them, the last one wins).  When the winner means ``mode``, nothing; else every setting after our
    last one whose value means another mode (or is a value the kernel refuses, which fails ib_core's load):
    ``[{file, line, value, mode}]``.
    """
    def meaning(value):
        try:
            return mode_of(value if value != "" else "1")  # a bare bool parameter sets it (param_set_bool(NULL))
        except ParseError:
            return None

    if not settings or meaning(settings[-1][0]) == mode:
        return []
    ours_at = max([index for index, item in enumerate(settings) if item[1] == ours] or [-1])
    return [{"file": path, "line": line, "value": value, "mode": meaning(value)}
            for value, path, line in settings[ours_at + 1:] if meaning(value) != mode]


def describe_override(item, mode):
    """One line for a warning or an error."""
    if item["mode"] is None:
        return ("%s%s sets ib_core netns_mode=%s, a value the kernel refuses: ib_core fails to load" % (
            item["file"], ":%s" % item["line"] if item["line"] else "", item["value"]))
    return "%s%s sets ib_core netns_mode=%s (%s) after ours, so ib_core loads in %s mode, not %s" % (
        item["file"], ":%s" % item["line"] if item["line"] else "", item["value"], item["mode"], item["mode"], mode)
