# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``firmware`` layer's observer: written once, used by the module and by ``rdma_facts`` (``layers.firmware``).

The RDMA NICs' physical functions come from ``/sys/class/infiniband`` (as the ``pcie`` layer finds them); functions
in one PCI slot (``dddd:bb:dd``) are one card, whose firmware configuration is shared: mlxconfig queried on any
function shows every port's parameters (``_P1``, ``_P2``).  Each NVIDIA (vendor 0x15b3) card is queried once with
``<tool> -e -d <first function> q`` (Default, Current, Next Boot).  The tool is ``mlxconfig`` (MFT, DOCA) or
``mstconfig`` (mstflint), the first found; it talks to the device, so it runs where the module runs (a pod auditing
``/host`` uses its own), found on PATH.  On a real card a query takes about a second.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.firmware import mlxconfig
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.pcie.observe import IB_CLASS, PCI_DEVICES, rdma_pfs

#: the configuration tools, in the order ``tool: auto`` tries them, each with its firmware reset tool
TOOLS = (("mlxconfig", "mlxfwreset"), ("mstconfig", "mstfwreset"))
NVIDIA = "0x15b3"


def card_of(bdf):
    """The card (slot) of a function: ``0000:18:00.1`` -> ``0000:18:00``."""
    return bdf.rpartition(".")[0]


def find_tools(commands, choice="auto"):
    """``{"name", "path", "reset", "reset_path"}`` of the configuration tool (``choice``: auto, mlxconfig, mstconfig);
    ``path`` None when it is not installed."""
    for name, reset in TOOLS:
        if choice not in ("auto", name):
            continue
        path = commands.module.get_bin_path(name)
        if path or choice == name:
            return {"name": name, "path": path, "reset": reset, "reset_path": commands.module.get_bin_path(reset)}
    return {"name": None, "path": None, "reset": None, "reset_path": None}


def _functions(host):
    """``{card: {bdf: {rdma_devices, netdevs, link_layers, vendor}}}`` of the RDMA NICs' physical functions."""
    cards = {}
    for bdf, names in rdma_pfs(host).items():
        netdevs = sorted(host.listdir(PCI_DEVICES + "/" + bdf + "/net"))
        layers = []
        for name in names:
            for port in sorted(host.listdir(IB_CLASS + "/" + name + "/ports")):
                layer = host.read_attr(IB_CLASS + "/" + name + "/ports/" + port + "/link_layer")
                if layer and layer not in layers:
                    layers.append(layer)
        vendor = host.read_attr(PCI_DEVICES + "/" + bdf + "/vendor")
        cards.setdefault(card_of(bdf), {})[bdf] = {"rdma_devices": names, "netdevs": netdevs, "link_layers": layers,
                                                   "vendor": vendor}
    return cards


def query(commands, tool, device):
    """``{"device_type", "description", "params": {NAME: [default, current, next]}}`` of one card, or
    ``{"error": ...}`` when the tool fails or prints no table."""
    rc, out, err = commands.run_kernel(mlxconfig.query_argv(tool, device))
    try:
        parsed = mlxconfig.parse_query(out)
    except ParseError as exc:
        reason = "; ".join(mlxconfig.errors_of(out)) or (err or out or "").strip()[-300:] or exc.msg
        return {"error": "%s -e -d %s q failed (rc=%s): %s" % (tool, device, rc, reason)}
    if rc != 0:
        return {"error": "%s -e -d %s q failed (rc=%s): %s" % (tool, device, rc, "; ".join(parsed["errors"]) or err.strip())}
    params = dict((name, [values.get("default"), values.get("current"), values.get("next")])
                  for name, values in parsed["params"].items())
    return {"device_type": parsed["device"].get("device_type"), "description": parsed["device"].get("description"),
            "params": params}


def observe(host, commands, tool="auto"):
    """The layer's observed state: ``{"tool": {...}, "cards": {card: {"device": first function, "functions": {...},
    "device_type", "description", "params" | "error"}}}``.  Cards of another vendor are listed without a query."""
    tools = find_tools(commands, tool) if commands is not None else {"name": None, "path": None, "reset": None,
                                                                     "reset_path": None}
    cards = {}
    try:
        functions = _functions(host)
    except HostReadError as exc:
        return {"tool": tools, "cards": {}, "error": exc.msg}
    for card in sorted(functions):
        members = functions[card]
        first = sorted(members)[0]
        item = {"device": first, "functions": members}
        if members[first]["vendor"] != NVIDIA:
            item["error"] = "not an NVIDIA (Mellanox) card (PCI vendor %s): no mlxconfig parameters" % members[first]["vendor"]
        elif tools["path"] is None:
            item["error"] = "no %s on the node" % (tools["name"] or "mlxconfig or mstconfig")
        else:
            item.update(query(commands, tools["path"], first))
        cards[card] = item
    return {"tool": tools, "cards": cards}


def facts(host, commands):
    """``rdma_facts``' ``layers.firmware``: every RDMA NIC card and its firmware parameters, as :func:`observe` sees
    them with the first tool found."""
    return observe(host, commands)
