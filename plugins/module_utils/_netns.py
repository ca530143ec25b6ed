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
