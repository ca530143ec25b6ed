# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``netns`` layer's values, pure: the spellings of ib_core's ``netns_mode`` and the modprobe.d file we own.

The kernel keeps the mode in ib_core's ``netns_mode`` parameter (``Y`` shared, ``N`` exclusive; the modprobe
option takes ``1``/``0``).
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
