# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` layer's desired settings, pure: the rdma_sysctl role's variables and the node's RDMA netdevs ->
the ``settings`` the role gives ``sysctl_dropin``.  The role's filter (``rdma_sysctl_settings``, through
plugins/plugin_utils/_sysctl_settings.py) and the audit's judgement both build them here.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError


def _key(interface, param):
    """``net.ipv4.conf.<if>.<param>``, in slash form when the interface name holds a dot (``eth0.100``)."""
    if "." in interface:
        return "net/ipv4/conf/%s/%s" % (interface, param)
    return "net.ipv4.conf.%s.%s" % (interface, param)


def rdma_netdevs(rdma):
    """Netdevs of the RDMA physical functions in ``ansible_facts.rdma`` (VFs go to pods; they get ``default``)."""
    names = []
    for device in (rdma or {}).get("devices") or []:
        if not device.get("is_vf"):
            names.extend(n for n in device.get("netdevs") or [] if n not in names)
    return names


def role_settings(interfaces, host, per_interface, netdevs):
    """Ordered ``{key: value}``: ``all`` and ``default`` from ``host``, then each interface from ``per_interface``;
    ``interfaces`` empty means ``netdevs`` (the RDMA netdevs).  InputError for values the role cannot take."""
    for name, value in (("host", host), ("per_interface", per_interface)):
        if not isinstance(value, Mapping):
            raise InputError("rdma_sysctl_settings: %s must be a dictionary, got %r" % (name, value))
    if interfaces is None or isinstance(interfaces, (str, bytes)) or not all(isinstance(i, str) and i for i in interfaces):
        raise InputError("rdma_sysctl_settings: interfaces must be a list of interface names, got %r" % (interfaces,))
    names = list(interfaces) or list(netdevs)
    reserved = [n for n in names if n in ("all", "default", "lo")]
    if reserved:
        raise InputError("rdma_sysctl_settings: %s is not an RDMA interface" % ", ".join(reserved))
    settings = {}
    for scope in ("all", "default"):
        for param, value in host.items():
            settings[_key(scope, param)] = value
    for name in names:
        for param, value in per_interface.items():
            settings[_key(name, param)] = value
    return settings
