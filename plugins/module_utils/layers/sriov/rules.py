# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SR-IOV VFs, pure: parsers for what the node reports and planners for the VF count and VF attributes.

Kernel rules (drivers/pci/iov.c ``sriov_numvfs_store()``, domain-facts §2): a value above ``sriov_totalvfs`` is
ERANGE, the same value is a no-op, N while M>0 VFs exist is EBUSY, so a change between two non-zero counts writes
0 first; that destroys every VF (and its netdev, RDMA device and GUIDs), which pods may be using, so it is only
planned with ``allow_vf_reset``.  Firmware (``mstconfig -e q``: SRIOV_EN / NUM_OF_VFS, Default Current Next)
decides ``sriov_totalvfs``; a value staged in Next only takes effect after a reboot or firmware reset.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError

LINK_STATES = ("auto", "enable", "disable")
#: sriov-network-operator's InfiniBand GUID pool file (read and written by ``guid.py``; here so that the observer
#: names it without importing ``guid.py``, which it needs only when the file exists)
OPERATOR_POOL_FILE = "/etc/sriov-operator/infiniband/guids"
#: VF attributes ``ip link set <pf> vf N`` takes, and the link layers that support them (mlx5e / ipoib ndo ops)
ETH_ONLY = ("trust", "spoofchk", "vlan", "qos", "mac")
VF_ATTRS = ("link_state",) + ETH_ONLY
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}\Z")
_FW_LINE = re.compile(r"^\*?\s*(\w+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")


# -- parsers -------------------------------------------------------------------------------------------------------
def parse_ip_vfs(text):
    """``ip -j link show <pf>`` -> ``{vf index: {node_guid, port_guid, link_state, trust, spoofchk, vlan, qos, mac}}``
    (GUIDs as ints, absent keys None).  iproute2 JSON keys: ``"node guid"``/``"port guid"`` (with a space)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError("ip -j link show printed no JSON: %s" % exc) from exc
    if not isinstance(data, list) or not data:
        raise ParseError("ip -j link show printed no link")
    return _vfinfo(data[0])


def parse_ip_links_vfs(text):
    """``ip -j link show`` of every link (one dump) -> ``{ifname: {vf index: {...}}}`` for the links that report VFs,
    each as :func:`parse_ip_vfs` reads one link.  The kernel sends a link's VF list in a dump too (iproute2 asks for
    it with RTEXT_FILTER_VF), so one call answers for every PF of the node."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError("ip -j link show printed no JSON: %s" % exc) from exc
    if not isinstance(data, list):
        raise ParseError("ip -j link show printed no list of links")
    out = {}
    for link in data:
        if isinstance(link, dict) and link.get("ifname") and link.get("vfinfo_list"):
            out[link["ifname"]] = _vfinfo(link)
    return out


def _vfinfo(link):
    """The VFs of one link of ``ip -j`` output; anything not shaped as iproute2 prints it is a ParseError."""
    try:
        return _vfinfo_unchecked(link)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise ParseError("ip -j link show printed a VF list this module cannot read (%s: %s)"
                         % (type(exc).__name__, exc)) from exc


def _vfinfo_unchecked(link):
    out = {}
    for item in link.get("vfinfo_list") or []:
        # the kernel sends IFLA_VF_VLAN_LIST since 4.9 (rtnl_fill_vfinfo()): "vlan_list": [{}] at vlan 0, with
        # "vlan"/"qos" only when non-zero (iproute2 print_vfinfo()); older kernels give "vlan"/"qos" on the VF itself
        vlans = item.get("vlan_list") or [item]
        if item.get("link_type"):
            mac = (item.get("address") or "").lower() if item["link_type"] == "ether" else None
        else:  # iproute2 before IFLA_VF_BROADCAST printed "mac" (Ethernet only)
            mac = (item.get("mac") or "").lower() or None
        out[int(item["vf"])] = {
            "node_guid": _int_guid(item.get("node guid")),
            "port_guid": _int_guid(item.get("port guid")),
            "link_state": item.get("link_state"),
            "trust": item.get("trust"),
            "spoofchk": item.get("spoofchk"),
            "vlan": int(vlans[0].get("vlan", 0)),
            "qos": int(vlans[0].get("qos", 0)),
            "mac": mac,
        }
    return out


_VF_LINE = re.compile(r"^\s*vf (\d+)\s+(.*)$")
_ON_OFF = {"on": True, "off": False}


def parse_ip_vfs_text(text):
    """``ip link show <pf>`` (no ``-j``: iproute2 before 4.13 or built without JSON) -> the same dict as
    :func:`parse_ip_vfs`.  One line per VF from print_vfinfo(): ``vf N     link/ether <mac> brd <b>`` (or ``vf N
    MAC <mac>`` before IFLA_VF_BROADCAST), then ``, vlan V``, ``, qos Q`` (non-zero only), ``, spoof checking on|off``,
    ``, NODE_GUID g, PORT_GUID g``, ``, link-state auto|enable|disable``, ``, trust on|off``, ``, query_rss on|off``
    - each only when the driver reported it (None otherwise)."""
    out = {}
    for line in text.splitlines():
        try:
            _vf_line(line, out)
        except ValueError as exc:  # a number int() refuses ('²' is isdigit(), 5,000 digits), a GUID that is not hex
            raise ParseError("ip link show printed a VF line this module cannot read (%s): %r" % (exc, line[:200])) from None
    return out


def _vf_line(line, out):
    """One line of ``ip link show`` into ``out`` (nothing when it is no VF line)."""
    match = _VF_LINE.match(line)
    if not match:
        return
    head, _sep, rest = match.group(2).partition(", ")
    words = head.split()
    entry = {"node_guid": None, "port_guid": None, "link_state": None, "trust": None, "spoofchk": None,
             "vlan": 0, "qos": 0, "mac": None}
    if words[:1] == ["MAC"] and len(words) > 1:
        entry["mac"] = words[1].lower()
    elif words[:1] == ["link/ether"] and len(words) > 1:
        entry["mac"] = words[1].lower()
    for field in (rest.split(", ") if rest else []):
        key, _sep, value = field.strip().rpartition(" ")
        if key in ("vlan", "qos") and value.isdigit():
            entry[key] = int(value)
        elif key == "spoof checking" and value in _ON_OFF:
            entry["spoofchk"] = _ON_OFF[value]
        elif key == "trust" and value in _ON_OFF:
            entry["trust"] = _ON_OFF[value]
        elif key == "link-state":
            entry["link_state"] = value
        elif key in ("NODE_GUID", "PORT_GUID"):
            entry["node_guid" if key == "NODE_GUID" else "port_guid"] = _int_guid(value)
    out[int(match.group(1))] = entry


def _int_guid(text):
    if not text:
        return None
    return int(text.replace(":", ""), 16)


def parse_mstconfig(text):
    """``mstconfig -e -d <bdf> q`` -> ``{PARAM: {"default", "current", "next"}}`` (values as printed).

    Uses the operator's line shape (name, then three columns) on the lines after ``Configurations:``."""
    params = {}
    started = False
    for line in text.splitlines():
        if line.startswith("Configurations:"):
            started = True
            continue
        if not started:
            continue
        match = _FW_LINE.match(line)
        if match:
            name, default, current, nxt = match.groups()
            params[name] = {"default": default, "current": current, "next": nxt}
    if not params:
        raise ParseError("mstconfig -e q printed no Default/Current/Next table")
    return params


def _fw_bool(value):
    return value is not None and value.upper().startswith(("TRUE", "1"))


def _fw_int(value):
    match = re.match(r"^(\d+)", value or "")
    return int(match.group(1)) if match else None


def firmware_query_needed(num_vfs, mode, totalvfs):
    """Whether sriov_vfs asks the firmware (mstconfig/mlxconfig) for ``num_vfs`` VFs with ``firmware_check`` =
    ``mode``: never with ``never`` or for 0 VFs; with ``auto`` only when the kernel shows fewer VFs than wanted
    (``sriov_totalvfs`` is the capability the firmware's Current ``SRIOV_EN``/``NUM_OF_VFS`` expose)."""
    if mode == "never" or num_vfs == 0:
        return False
    return not (mode == "auto" and totalvfs is not None and totalvfs >= num_vfs)


def firmware_verdict(params, num_vfs):
    """None when the firmware's Current values allow ``num_vfs``; else ``(message, staged)`` where ``staged`` says the
    Next (after reboot) values would allow it."""
    if num_vfs == 0 or "SRIOV_EN" not in params:
        return None
    sriov = params["SRIOV_EN"]
    count = params.get("NUM_OF_VFS", {})
    current_ok = _fw_bool(sriov["current"]) and (_fw_int(count.get("current")) or 0) >= num_vfs
    if current_ok:
        return None
    next_ok = _fw_bool(sriov["next"]) and (_fw_int(count.get("next")) or 0) >= num_vfs
    now = "SRIOV_EN=%s NUM_OF_VFS=%s" % (sriov["current"], count.get("current"))
    if next_ok:
        return ("firmware runs with %s; SRIOV_EN=%s NUM_OF_VFS=%s is staged for the next boot, so reboot (or "
                "mlxfwreset) before asking for %d VFs" % (now, sriov["next"], count.get("next"), num_vfs), True)
    return ("firmware runs with %s, too few for %d VFs; set it with 'mstconfig -d <pci> set SRIOV_EN=1 NUM_OF_VFS=%d' "
            "and reboot" % (now, num_vfs, num_vfs), False)


def parse_eswitch(text):
    """``devlink -j dev eswitch show pci/<bdf>`` -> ``"legacy"`` / ``"switchdev"`` (None when not reported)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError("devlink -j printed no JSON: %s" % exc) from exc
    devs = data.get("dev") if isinstance(data, dict) else None
    for info in (devs if isinstance(devs, dict) else {}).values():
        return info.get("mode") if isinstance(info, dict) else None
    return None


# -- planners ------------------------------------------------------------------------------------------------------
def plan_numvfs(current, desired, totalvfs, allow_reset, in_use=None):
    """The values to write to ``sriov_numvfs`` (``[]``, ``[N]``, ``[0]`` or ``[0, N]``), or an error.

    ``in_use``: ``{vf index: reason}`` for VFs that look used (by a pod or a user-space driver)."""
    if isinstance(desired, bool) or not isinstance(desired, int) or desired < 0:
        raise InputError("num_vfs must be a whole number >= 0, got %r" % (desired,))
    if totalvfs is None:
        if desired == 0:
            return []
        raise InputError("the PF has no SR-IOV capability (no sriov_totalvfs): enable SRIOV_EN in the NIC firmware")
    if desired > totalvfs:
        raise InputError("num_vfs %d is above sriov_totalvfs %d of this PF (the firmware's NUM_OF_VFS)" % (desired, totalvfs))
    if desired == current:
        return []
    if current == 0 or desired == 0:
        return [desired]
    if not allow_reset:
        used = in_use or {}
        detail = ("; in use: %s" % ", ".join("VF %d (%s)" % (idx, why) for idx, why in sorted(used.items()))) if used \
            else "; none looks in use now"
        raise ConflictError(
            "changing the VF count from %d to %d needs sriov_numvfs=0 first, which destroys VFs 0-%d%s. Drain the node "
            "(kubectl drain) and rerun with allow_vf_reset=true" % (current, desired, current - 1, detail),
            {"current": current, "desired": desired, "in_use": dict((str(k), v) for k, v in (in_use or {}).items())})
    return [0, desired]


def validate_vf_attrs(attrs, where):
    """Check one VF attribute dict (from ``vf_defaults`` or a ``vfs`` entry); returns it without None values."""
    clean = dict((key, value) for key, value in attrs.items() if value is not None and key in VF_ATTRS)
    if "vlan" in clean and not 0 <= clean["vlan"] <= 4095:
        raise InputError("%s.vlan must be 0..4095, got %s" % (where, clean["vlan"]))
    if "qos" in clean and not 0 <= clean["qos"] <= 7:
        raise InputError("%s.qos must be 0..7, got %s" % (where, clean["qos"]))
    if "qos" in clean and clean["qos"] and not clean.get("vlan"):
        raise InputError("%s.qos needs a non-zero vlan" % where)
    if "mac" in clean:
        if not _MAC.match(clean["mac"]):
            raise InputError("%s.mac %r is not a MAC address" % (where, clean["mac"]))
        clean["mac"] = clean["mac"].lower()
        if clean["mac"] == "00:00:00:00:00:00":
            raise InputError("%s.mac %s is the zero address (the kernel reads it as 'no MAC set')" % (where, clean["mac"]))
        if int(clean["mac"][:2], 16) & 1:
            raise InputError("%s.mac %s is a multicast address: a VF needs a unicast MAC (first octet even)"
                             % (where, clean["mac"]))
    return clean


def desired_vf_attrs(num_vfs, defaults, per_vf, link_layer):
    """``{index: {attr: value}}`` for every VF: ``defaults`` overlaid with the ``vfs`` entry of that index."""
    base = validate_vf_attrs(defaults or {}, "vf_defaults")
    out = dict((index, dict(base)) for index in range(num_vfs))
    seen = set()
    for number, entry in enumerate(per_vf or []):
        index = entry.get("index")
        where = "vfs[%d]" % number
        if index is None or index < 0 or index >= num_vfs:
            raise InputError("%s.index must be between 0 and num_vfs-1 (%d), got %r" % (where, num_vfs - 1, index))
        if index in seen:
            raise InputError("%s.index %d is listed twice" % (where, index))
        seen.add(index)
        out[index].update(validate_vf_attrs(entry, where))
    if link_layer == "InfiniBand":
        for index, attrs in out.items():
            bad = sorted(set(attrs) & set(ETH_ONLY))
            if bad:
                raise InputError("VF %d: %s only exist on Ethernet PFs; this PF is InfiniBand (only link_state applies)"
                                 % (index, ", ".join(bad)))
    macs = {}
    for index, attrs in out.items():
        if "mac" in attrs:
            if attrs["mac"] in macs:
                raise InputError("VF %d and VF %d both ask for MAC %s" % (macs[attrs["mac"]], index, attrs["mac"]))
            macs[attrs["mac"]] = index
    return out


def plan_vf_attrs(desired, observed):
    """``[(index, {attr: value})]``: what differs between wanted and observed admin attributes, per VF."""
    changes = []
    for index in sorted(desired):
        have = observed.get(index) or {}
        diff = {}
        for key, value in desired[index].items():
            if key == "link_state":
                if have.get("link_state") != value:
                    diff[key] = value
            elif key in ("vlan", "qos"):
                if int(have.get(key) or 0) != value:
                    diff[key] = value
            elif have.get(key) != value:
                diff[key] = value
        if diff:
            # ``ip link set <pf> vf N vlan V`` without ``qos`` resets the priority to 0: always send them together
            if "qos" in diff and "vlan" not in diff:
                diff["vlan"] = desired[index].get("vlan", 0)
            if "vlan" in diff and "qos" not in diff and desired[index].get("qos"):
                diff["qos"] = desired[index]["qos"]
            changes.append((index, diff))
    return changes


def ip_vf_argv(pf_netdev, index, attrs):
    """``ip link set <pf> vf N ...`` for the attribute changes of one VF (vlan before qos, as ip parses them)."""
    argv = ["ip", "link", "set", pf_netdev, "vf", str(index)]
    if "mac" in attrs:
        argv += ["mac", attrs["mac"]]
    if "vlan" in attrs:
        argv += ["vlan", str(attrs["vlan"])]
        if attrs.get("qos"):
            argv += ["qos", str(attrs["qos"])]
    for key in ("trust", "spoofchk"):
        if key in attrs:
            argv += [key, "on" if attrs[key] else "off"]
    if "link_state" in attrs:
        argv += ["state", attrs["link_state"]]
    return argv


# -- sriov-network-operator on the node ------------------------------------------------------------------------------
# Its config daemon's files (k8snetworkplumbingwg/sriov-network-operator pkg/consts/constants.go @249e200): the systemd
# mode units and binary, the modprobe file of SetRDMASubsystem, and /etc/sriov-operator where both modes keep state
# (pci/ applied PF configs, sriov-interface-config.yaml, sriov_config.json, ...).  The pool file alone
# (/etc/sriov-operator/infiniband/guids) is no evidence: ib_vf_guids writes it itself.
OPERATOR_UNITS = ("/etc/systemd/system/sriov-config.service", "/etc/systemd/system/sriov-config-post-network.service")
OPERATOR_BINARY = "/var/lib/sriov/sriov-network-config-daemon"
OPERATOR_MODPROBE = "/etc/modprobe.d/sriov_network_operator_modules_config.conf"
OPERATOR_DIR = "/etc/sriov-operator"
#: /proc/<pid>/comm of sriov-network-config-daemon (the kernel cuts it at 15 characters)
OPERATOR_COMM = "sriov-network-config-daemon"[:15]


def operator_presence(existing, state_entries, running):
    """Whether sriov-network-operator's config daemon works on this node, pure: ``existing`` the paths of
    :data:`OPERATOR_UNITS`, :data:`OPERATOR_BINARY` and :data:`OPERATOR_MODPROBE` that exist, ``state_entries`` the
    names in /etc/sriov-operator, ``running`` whether a process named like the daemon runs.  Returns ``{present,
    mode, running, evidence}``; ``mode`` is ``systemd`` (its units or binary are installed: the daemon runs at boot
    as sriov-config.service), ``daemon`` (its pod) or None."""
    evidence = list(existing) + ["%s/%s" % (OPERATOR_DIR, name) for name in sorted(state_entries) if name != "infiniband"]
    if running:
        evidence.append("process %s" % OPERATOR_COMM)
    systemd = any(path in existing for path in OPERATOR_UNITS + (OPERATOR_BINARY,))
    present = bool(evidence)
    return {"present": present, "mode": "systemd" if systemd else ("daemon" if present else None), "running": running,
            "evidence": evidence}
