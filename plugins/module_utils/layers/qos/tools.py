# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two QoS tools, pure: their command lines and the parsing of what they print.

* ``mlnx_qos`` (Mellanox/mlnx-tools ``python/mlnx_qos``, shipped with MLNX/DOCA-OFED): ``-i IF`` prints the port's
  state (``Priority trust state: dscp``, ``prio:N dscp:..`` lines, ``Cable len``, the PFC ``enabled`` row, the
  ``tc:`` lines); ``--trust dscp`` installs the firmware-default DSCP map (D -> D >> 3) through the kernel's DCB APP
  table, ``--dscp2prio set,D,P`` one entry, ``--pfc 0,0,0,1,0,0,0,0`` the PFC enables.  Real outputs:
  tests/fixtures/realworld/mlnx_qos/.
* iproute2 ``dcb`` (since iproute2 5.11 for ``pfc``, 5.12 for ``app``): ``dcb pfc show dev IF prio-pfc`` prints
  ``prio-pfc 0:off 1:off 2:off 3:on ...``; ``dcb -N app show dev IF dscp-prio`` prints ``dscp-prio 26:3 48:6`` (nothing
  without DSCP entries).  mlx5 has no APP-trust callbacks (``dcb apptrust``, iproute2 6.2+): its trust state is DSCP
  exactly while the APP table holds DSCP entries (en_dcbnl.c mlx5e_dcbnl_ieee_setapp/delapp), which is also how
  mlnx_qos reads it.  So with ``dcb`` the trust is set by the DSCP entries themselves.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

TOOLS = ("mlnx_qos", "dcb")
_TRUST = re.compile(r"^Priority trust state:\s*(\S+)")
_PRIO = re.compile(r"^\s*prio:\s*(\d)\s+dscp:\s*([\d,]*)")
_CABLE = re.compile(r"^Cable len:\s*(\d+)")
_ENABLED = re.compile(r"^\s*enabled\s+((?:[01]\s*){8})$")
_DCBX = re.compile(r"^DCBX mode:\s*(.+?)\s*$")
_PFC_WORD = re.compile(r"^(\d):(on|off)$")
_APP_WORD = re.compile(r"^(\d+):(\d)$")


def choose(found, choice="auto"):
    """``{"name", "path"}`` of the tool to use: ``choice`` (mlnx_qos, dcb), or for ``auto`` mlnx_qos when the node
    runs MLNX/DOCA-OFED's mlx5_core and has mlnx_qos, else iproute2's dcb.  ``found`` is the observer's ``tool``."""
    paths = (found or {}).get("paths") or {}
    if choice == "auto":
        choice = "mlnx_qos" if (found or {}).get("ofed") and paths.get("mlnx_qos") else "dcb"
    return {"name": choice, "path": paths.get(choice)}


def default_prio(dscp):
    """The port's DSCP -> priority map where no APP entry says otherwise (the firmware default, mlnx_qos
    setDefaultAppEntry: ``i >> 3``)."""
    return int(dscp) >> 3


def parse_mlnx_qos(text):
    """``{"trust", "dscp2prio": {"26": 3, ...}, "pfc": [8 x 0/1], "cable_len", "dcbx"}`` of ``mlnx_qos -i IF``.

    Tolerates the layouts of the real outputs (with or without the receive buffer lines and ``default priority:``).
    ParseError when the PFC table or the trust line is missing (the tool failed or printed something else)."""
    trust, cable, pfc, dcbx, mapping = None, None, None, None, {}
    for line in (text or "").splitlines():
        match = _TRUST.match(line.strip())
        if match:
            trust = match.group(1)
            continue
        match = _PRIO.match(line)
        if match:
            for dscp in (d for d in match.group(2).split(",") if d):
                mapping[str(int(dscp))] = int(match.group(1))
            continue
        match = _CABLE.match(line.strip())
        if match:
            cable = int(match.group(1))
            continue
        match = _ENABLED.match(line.rstrip())
        if match and pfc is None:
            pfc = [int(v) for v in match.group(1).split()]
            continue
        match = _DCBX.match(line.strip())
        if match:
            dcbx = match.group(1)
    if trust is None or pfc is None:
        raise ParseError("mlnx_qos printed no %s" % ("trust state" if trust is None else "PFC table"),
                         {"output": (text or "")[-400:]})
    return {"trust": trust, "dscp2prio": mapping if trust == "dscp" else {}, "pfc": pfc, "cable_len": cable,
            "dcbx": dcbx}


def parse_dcb_pfc(text):
    """``[8 x 0/1]`` from ``dcb pfc show dev IF prio-pfc`` (``prio-pfc 0:off 1:off 2:off 3:on ...``)."""
    for line in (text or "").splitlines():
        words = line.split()
        if words and words[0] == "prio-pfc":
            bits = [0] * 8
            seen = 0
            for word in words[1:]:
                match = _PFC_WORD.match(word)
                if not match:
                    raise ParseError("dcb printed an unexpected PFC entry %r" % word, {"output": text[-400:]})
                bits[int(match.group(1))] = 1 if match.group(2) == "on" else 0
                seen += 1
            if seen != 8:
                raise ParseError("dcb printed %d PFC priorities, not 8" % seen, {"output": text[-400:]})
            return bits
    raise ParseError("dcb printed no prio-pfc line", {"output": (text or "")[-400:]})


def parse_dcb_app(text):
    """``{"26": 3, ...}`` from ``dcb -N app show dev IF dscp-prio``: the explicit DSCP entries (none: empty)."""
    mapping = {}
    for line in (text or "").splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] != "dscp-prio":
            raise ParseError("dcb printed an unexpected line %r" % line, {"output": text[-400:]})
        for word in words[1:]:
            match = _APP_WORD.match(word)
            if not match:
                raise ParseError("dcb printed an unexpected DSCP entry %r (run with -N)" % word, {"output": text[-400:]})
            mapping[str(int(match.group(1)))] = int(match.group(2))
    return mapping


def show_argv(tool, path, ifname):
    """The read commands of a port: a list of argv."""
    if tool == "mlnx_qos":
        return [[path, "-i", ifname]]
    return [[path, "-N", "app", "show", "dev", ifname, "dscp-prio"], [path, "pfc", "show", "dev", ifname, "prio-pfc"]]


def pfc_list(priority):
    """PFC on ``priority`` only: ``[0, 0, 0, 1, 0, 0, 0, 0]``."""
    return [1 if prio == priority else 0 for prio in range(8)]


def trust_argv(tool, path, ifname, entries):
    """Trust DSCP.  mlnx_qos: ``--trust dscp`` (the default map for all 64 values); dcb: the DSCP entries the port
    needs, which switch mlx5 to DSCP trust (``dcb app replace`` keeps one entry per DSCP value)."""
    if tool == "mlnx_qos":
        return [path, "-i", ifname, "--trust", "dscp"]
    return [path, "app", "replace", "dev", ifname, "dscp-prio"] + ["%d:%d" % (d, p) for d, p in entries]


def dscp2prio_argv(tool, path, ifname, entries):
    """DSCP -> priority entries ``[(dscp, prio)]`` on a port that trusts DSCP."""
    if tool == "mlnx_qos":
        argv = [path, "-i", ifname]
        for dscp, prio in entries:
            argv += ["--dscp2prio", "set,%d,%d" % (dscp, prio)]
        return argv
    return [path, "app", "replace", "dev", ifname, "dscp-prio"] + ["%d:%d" % (d, p) for d, p in entries]


def pfc_argv(tool, path, ifname, bits):
    """The PFC enables ``bits`` (8 x 0/1)."""
    if tool == "mlnx_qos":
        return [path, "-i", ifname, "--pfc", ",".join(str(b) for b in bits)]
    return [path, "pfc", "set", "dev", ifname, "prio-pfc"] + ["%d:%s" % (i, "on" if b else "off") for i, b in enumerate(bits)]
