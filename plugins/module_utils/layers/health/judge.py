# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``health`` layer's audit judgement, pure: :mod:`.observe`'s values against the rules (docs/health.md).

Nothing here is provisioned, so every finding is ``fail`` (a known-bad condition provisioning cannot fix) or
``unknown`` (a value that cannot be read or parsed: never taken as good).  The checks run in facts-only mode too
(``desired`` None): the thresholds take their defaults and the optional expectations are not checked.

* ``health.pcie_link[<bdf> (<name>)]`` per GPU and RDMA NIC: every PCIe link from the device to its root port trained
  at what both of its ends can do (current speed and width against the lower end's and the upper end's maximum);
* ``health.acs[<bridge>]`` per bridge between a GPU and its nearest NIC: ACS P2P Request/Completion Redirect off;
* ``health.port[<dev>/<port>]``: physical link up, port ACTIVE, rate at least ``rdma_audit_port_rate``;
* ``health.counters[<dev>/<port>]``: PMA error counters at most ``rdma_audit_counter_thresholds``;
* ``health.gpu_count`` / ``health.nic_count`` against ``rdma_audit_expected_gpus`` / ``rdma_audit_expected_nics``;
* ``health.options``: an audit option of this layer that is not what its argument spec allows;
* across the inventory (:func:`inventory_judge`): ``health.firmware[<model>]``, one ``fw_ver`` per NIC model.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re
from functools import lru_cache

from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as topo
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers import check as _check
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.health.observe import COUNTERS

#: ACS Control bits (include/uapi/linux/pci_regs.h): PCI_ACS_SV, _TB, _RR, _CR, _UF, _EC, _DT
ACS_BITS = (("SV", 0x0001), ("TB", 0x0002), ("RR", 0x0004), ("CR", 0x0008), ("UF", 0x0010), ("EC", 0x0020),
            ("DT", 0x0040))
#: the bits that send peer-to-peer traffic up to the root complex: P2P Request Redirect, P2P Completion Redirect
REDIRECT = 0x0004 | 0x0008
#: cumulative PMA error counters (since the counters were last cleared: boot or firmware reset, or perfquery -R)
#: above these values fail; see docs/health.md for the reasons.  None = not checked.
DEFAULT_COUNTER_THRESHOLDS = {"symbol_error": 10, "link_error_recovery": 10, "link_downed": 2, "port_rcv_errors": 10,
                              "excessive_buffer_overrun_errors": 0}
#: the PortCounters width of each counter (drivers/infiniband/core/sysfs.c PORT_PMA_ATTR): the PMA saturates there
COUNTER_MAX = {"symbol_error": 0xFFFF, "link_error_recovery": 0xFF, "link_downed": 0xFF, "port_rcv_errors": 0xFFFF,
               "excessive_buffer_overrun_errors": 0xF}
#: phys_state names (drivers/infiniband/core/sysfs.c phys_state_to_str()); only LinkUp carries traffic
PHYS_STATES = ("Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "Phy Test")
PORT_STATES = ("DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER")
LINK_LAYERS = ("InfiniBand", "Ethernet")
_SPEED = re.compile(r"^(\d+(?:\.\d+)?) GT/s(?: PCIe)?$")
_RATE = re.compile(r"^(\d+(?:\.\d+)?) Gb/sec\b")
REMEDY_LINK = ("reseat the card or its riser and check the slot's BIOS link settings (speed/width); a link that "
               "trains below its capability after a cold boot is a hardware fault")
REMEDY_ACS = ("disable ACS P2P redirect on this bridge: in the BIOS (PCIe ACS control, or the IOMMU when it is not "
              "needed), or at every boot with `setpci -s %s ECAP_ACS+6.w=0000:000c` (clears RR and CR); the "
              "collection does not yet provide the boot unit for this")
REMEDY_PORT = ("check the cable, the transceiver and the switch port; an InfiniBand port that is up but not ACTIVE "
               "waits for a subnet manager")
REMEDY_COUNTERS = ("check the cable and transceiver (mlxlink -d <dev> -c shows the physical errors), then clear the "
                   "counters (perfquery -R) and watch whether they climb again")
REMEDY_OPTIONS = "fix this host's audit option in the inventory (roles/rdma_audit/meta/argument_specs.yml)"


def speed_of(text):
    """GT/s of a ``*_link_speed`` value (``32.0 GT/s PCIe``, older kernels ``8 GT/s``); None for ``Unknown`` or junk."""
    return _speed_of(text) if isinstance(text, str) else None


def width_of(text):
    """The lane count of a ``*_link_width`` value (``16``); None for anything that is not a plain number."""
    return _width_of(text) if isinstance(text, str) else None


# a fleet's links hold a handful of distinct values: each parsed once per audit, not once per link and host
@lru_cache(maxsize=1024)
def _speed_of(text):
    match = _SPEED.match(text.strip())
    return float(match.group(1)) if match else None


@lru_cache(maxsize=1024)
def _width_of(text):
    text = text.strip()
    return int(text) if text.isdigit() and text.isascii() and len(text) <= 3 else None


def rate_of(text):
    """Gb/s of a port ``rate`` (``400 Gb/sec (4X NDR)``, ``2.5 Gb/sec (1X SDR)``); None for junk."""
    match = _RATE.match((text or "").strip()) if isinstance(text, str) else None
    return float(match.group(1)) if match else None


def counter_of(text):
    """A counter's value (``"%u"``); None for ``N/A (no PMA)``, empty or other text."""
    text = text.strip() if isinstance(text, str) else ""
    return int(text) if text.isdigit() and text.isascii() and len(text) <= 20 else None


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def options(desired):
    """``(settings, problems)``: this layer's options from ``desired`` (None: facts-only, all defaults); a value
    its argument spec does not allow is a problem and that option is left at its default."""
    desired = desired or {}
    problems = []
    thresholds = dict(DEFAULT_COUNTER_THRESHOLDS)
    value = desired.get("rdma_audit_counter_thresholds")
    if value is not None:
        if not isinstance(value, dict) or not all(
                k in COUNTERS and (v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0))
                for k, v in value.items()):
            problems.append("rdma_audit_counter_thresholds must map counters (%s) to integers >= 0 or null, got %r"
                            % (", ".join(COUNTERS), value))
        else:
            thresholds.update(value)
    rates = {}
    value = desired.get("rdma_audit_port_rate")
    if value is not None:
        if not isinstance(value, dict) or not all(
                k in LINK_LAYERS and (v is None or (_number(v) and v > 0)) for k, v in value.items()):
            problems.append("rdma_audit_port_rate must map link layers (%s) to a rate in Gb/s, got %r"
                            % (", ".join(LINK_LAYERS), value))
        else:
            rates = dict((k, v) for k, v in value.items() if v is not None)
    counts = {}
    for var in ("rdma_audit_expected_gpus", "rdma_audit_expected_nics"):
        value = desired.get(var)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append("%s must be an integer >= 0, got %r" % (var, value))
        else:
            counts[var] = value
    return {"thresholds": thresholds, "rates": rates, "counts": counts}, problems


def _link_text(item):
    return "%s x%s" % (item.get("current_link_speed"), item.get("current_link_width"))


def _max_text(speed, width):
    return "%s GT/s x%s" % (("%g" % speed) if speed is not None else "?", width if width is not None else "?")


def _parsed_link(links, bdf, parsed):
    """``(current speed, current width, max speed, max width)`` of ``bdf``'s link values, parsed once per host
    (``parsed``: the host's memo; every device under a switch shares the links above it)."""
    found = parsed.get(bdf)
    if found is None:
        item = links.get(bdf) or {}
        found = parsed[bdf] = (speed_of(item.get("current_link_speed")), width_of(item.get("current_link_width")),
                               speed_of(item.get("max_link_speed")), width_of(item.get("max_link_width")))
    return found


def _link_findings(section, bdf, parsed=None):
    """``(degraded, unknown)`` descriptions of the links from ``bdf`` up to its root port.

    A link joins a device (the endpoint, or a switch's upstream port) and the root or downstream port above it: it
    can train at the lower of the two ends' maxima, so that is what its current value is held to.  ``parsed``: the
    host's memo of parsed link values (:func:`_parsed_link`), shared by its devices.
    """
    parsed = {} if parsed is None else parsed
    links = section.get("links") or {}
    bridges = section.get("bridges") or {}
    chain = [bdf] + list(reversed((section.get("paths") or {}).get(bdf) or []))
    degraded, unknown, own_speed_only = [], [], False
    for index, lower in enumerate(chain):
        upper = chain[index + 1] if index + 1 < len(chain) else None
        lower_type = bridges.get(lower, {}).get("port_type") if index else None
        upper_type = bridges.get(upper, {}).get("port_type") if upper else None
        if index and lower_type not in (0x5, None):
            continue  # a root or downstream port: its link is the one below it, judged from there
        if upper is not None and upper_type not in (0x4, 0x6, None):
            continue  # no link between a downstream port and its own switch's upstream port
        speed, width, low_max_speed, low_max_width = _parsed_link(links, lower, parsed)
        max_speeds, max_widths = [low_max_speed], [low_max_width]
        if upper:
            high = _parsed_link(links, upper, parsed)
            max_speeds.append(high[2])
            max_widths.append(high[3])
        name = "%s-%s" % (lower, upper) if upper else lower
        if speed is None or width is None or None in max_speeds or None in max_widths:
            low = links.get(lower) or {}
            keys = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
            values = dict((key, low.get(key)) for key in keys)
            unknown.append("%s: unreadable or unknown link values %s%s" % (
                name, values, (" (%s)" % "; ".join(low.get("problems"))) if low.get("problems") else ""))
            continue
        capable_speed, capable_width = min(max_speeds), min(max_widths)
        if speed < capable_speed or width < capable_width:
            degraded.append("%s: trained at %s GT/s x%d, both ends can do %s" % (
                name, "%g" % speed, width, _max_text(capable_speed, capable_width)))
            own_speed_only = own_speed_only or (index == 0 and width >= capable_width)
    return degraded, unknown, own_speed_only


def _pcie_links(section):
    checks = []
    parsed = {}  # each link's values parsed once for the host (_parsed_link)
    devices = [(gpu["pci_address"], "GPU") for gpu in section.get("gpus") or []]
    names = {}
    for nic in section.get("nics") or []:
        if nic.get("pci_address"):
            names.setdefault(nic["pci_address"], []).append(nic["name"])
    devices.extend((bdf, ", ".join(sorted(found, key=topo.natural_key))) for bdf, found in names.items())
    for bdf, name in sorted(devices, key=lambda item: topo.bdf_key(item[0])):
        subject = "%s (%s)" % (bdf, name)
        own = (section.get("links") or {}).get(bdf) or {}
        live = {"current": _link_text(own), "max": "%s x%s" % (own.get("max_link_speed"), own.get("max_link_width"))}
        if (section.get("paths") or {}).get(bdf) is None:
            checks.append(_check("health.pcie_link", "unknown", subject, "trained at its capability", live,
                                 detail="the device's PCI position is unknown"))
            continue
        degraded, unknown, own_speed_only = _link_findings(section, bdf, parsed)
        if degraded:
            detail = "; ".join(degraded)
            if name == "GPU" and own_speed_only:
                detail += ("; GPUs with PCIe power management lower their link speed when idle: check again under "
                           "load (nvidia-smi -q, PCIe Generation Current)")
            checks.append(_check("health.pcie_link", "fail", subject, "trained at its capability", live, remedy=REMEDY_LINK,
                                 detail=detail + ("; " + "; ".join(unknown) if unknown else "")))
        elif unknown:
            checks.append(_check("health.pcie_link", "unknown", subject, "trained at its capability", live,
                                 detail="; ".join(unknown)))
        else:
            checks.append(_check("health.pcie_link", "ok", subject, "trained at its capability", live))
    return checks


def acs_names(value):
    """The ACS Control bit names set in ``value``."""
    return [name for name, bit in ACS_BITS if value & bit]


def _acs(section):
    on_path = {}
    for pair in section.get("pairs") or []:
        for bridge in pair.get("bridges") or []:
            on_path.setdefault(bridge, []).append("GPU %s <-> %s (%s, %s)" % (
                pair.get("gpu"), pair.get("nic"), pair.get("nic_pci"), pair.get("class")))
    checks = []
    for bridge in sorted(on_path, key=topo.bdf_key):
        item = (section.get("bridges") or {}).get(bridge) or {}
        pairs = "; ".join(on_path[bridge])
        desired = "no P2P Request/Completion Redirect (ACS RR, CR off)"
        if item.get("acs") is False:
            checks.append(_check("health.acs", "ok", bridge, desired, {"acs": None}, detail="no ACS capability"))
            continue
        try:
            control = int(item.get("acs_ctrl"), 16)
        except (TypeError, ValueError):
            checks.append(_check("health.acs", "unknown", bridge, desired, None,
                                 detail="ACS Control not readable: %s; on the path of %s"
                                 % ("; ".join(item.get("problems") or []) or "no value", pairs)))
            continue
        live = {"control": "0x%04x" % control, "enabled": acs_names(control)}
        if control & REDIRECT:
            checks.append(_check(
                "health.acs", "fail", bridge, desired, live, remedy=REMEDY_ACS % bridge,
                detail="%s on, on the path of %s: peer-to-peer traffic goes up to the root complex, GPUDirect RDMA slows "
                "down or hangs" % ("/".join(n for n in acs_names(control) if n in ("RR", "CR")), pairs)))
        else:
            checks.append(_check("health.acs", "ok", bridge, desired, live))
    return checks


def _ports(section, settings):
    checks = []
    for nic in section.get("nics") or []:
        for port in nic.get("ports") or []:
            subject = "%s/%s" % (nic.get("name"), port.get("port"))
            checks.append(_port(port, subject, settings["rates"]))
            counters = _counters(port, subject, settings["thresholds"])
            if counters is not None:
                checks.append(counters)
    return checks


def _port(port, subject, rates):
    state, phys = port.get("state"), port.get("phys_state")
    layer = port.get("link_layer")
    want = rates.get(layer)
    desired = "LinkUp and ACTIVE" + (", at least %g Gb/s" % want if want else "")
    live = {"state": state, "phys_state": phys, "rate": port.get("rate"), "link_layer": layer}
    problems = "; ".join(port.get("problems") or [])
    if state not in PORT_STATES or phys not in PHYS_STATES:
        return _check("health.port", "unknown", subject, desired, live,
                      detail="state/phys_state unreadable or not a kernel value" + (": " + problems if problems else ""))
    if phys != "LinkUp":
        why = {"Polling": "no link partner (cable, transceiver or the switch port is down)",
               "Disabled": "the port is disabled (firmware, or by the subnet manager or the switch)"}
        return _check("health.port", "fail", subject, desired, live, remedy=REMEDY_PORT,
                      detail="phys_state %s: %s" % (phys, why.get(phys, "the physical link is not up")))
    if state != "ACTIVE":
        return _check("health.port", "fail", subject, desired, live, remedy=REMEDY_PORT,
                      detail="the physical link is up but the port is %s%s" % (
                          state, " (no subnet manager has activated it)" if layer == "InfiniBand" and state == "INIT"
                          else ""))
    if want:
        rate = rate_of(port.get("rate"))
        if rate is None:
            return _check("health.port", "unknown", subject, desired, live, detail="rate %r is not a kernel rate"
                          % (port.get("rate"),))
        if rate < want:
            return _check("health.port", "fail", subject, desired, live, remedy=REMEDY_PORT,
                          detail="rate %g Gb/s is below rdma_audit_port_rate[%s] = %g Gb/s" % (rate, layer, want))
    return _check("health.port", "ok", subject, desired, live)


def _counters(port, subject, thresholds):
    raw = port.get("counters")
    if raw is None:
        return None  # the device has no PMA counters (no counters/ directory): nothing to judge
    wanted = dict((name, limit) for name, limit in thresholds.items() if limit is not None)
    live, over, unreadable = {}, [], []
    for name in sorted(wanted):
        value = counter_of(raw.get(name))
        live[name] = value if value is not None else raw.get(name)
        if value is None:
            unreadable.append(name)
        elif value > wanted[name]:
            top = COUNTER_MAX.get(name)
            saturated = " (saturated: the counter stops at %d)" % top if top is not None and value >= top else ""
            over.append("%s %d > %d%s" % (name, value, wanted[name], saturated))
    desired = dict((name, "<= %d" % limit) for name, limit in sorted(wanted.items()))
    if over:
        return _check("health.counters", "fail", subject, desired, live, remedy=REMEDY_COUNTERS,
                      detail="; ".join(over) + " (cumulative since the counters were last cleared)")
    if unreadable:
        return _check("health.counters", "unknown", subject, desired, live,
                      detail="not readable as a number: %s%s" % (", ".join(unreadable), (
                          " (%s)" % "; ".join(port.get("problems"))) if port.get("problems") else ""))
    return _check("health.counters", "ok", subject, desired, live)


def _counts(section, settings):
    checks = []
    found = {"rdma_audit_expected_gpus": ("health.gpu_count", len(section.get("gpus") or []), "GPUs"),
             "rdma_audit_expected_nics": ("health.nic_count", len(section.get("nics") or []),
                                          "RDMA devices that are not VFs (one per port of a multi-port card)")}
    for var, want in sorted(settings["counts"].items()):
        check_id, live, what = found[var]
        status = "ok" if live == want else "fail"
        checks.append(_check(check_id, status, None, want, live,
                             remedy="find the missing device (lspci, dmesg: a card that fell off the bus or failed to probe), "
                             "or correct %s" % var, detail=None if status == "ok" else "%d %s, %s expects %d" % (
                                 live, what, var, want)))
    return checks


def judge(section, desired):
    """The checks (``[{id, status, subject, desired, live, remedy, detail}]``) of the layer; ``desired`` None =
    facts-only (the health rules still apply, with the default thresholds)."""
    settings, problems = options(desired)
    checks = [_check("health.options", "fail", None, None, None, remedy=REMEDY_OPTIONS, detail=problem) for problem in problems]
    if section is None:
        return checks + [_check("health.facts", "unknown", detail="rdma_facts gave no layers.health (an older collection)")]
    return checks + _pcie_links(section) + _acs(section) + _ports(section, settings) + _counts(section, settings)


def _version(nic):
    """A NIC's ``fw_ver`` when it is a text (what rdma_facts reads), else None (unreadable): versions are compared
    and sorted across the inventory, and one host's value of another type must not fail every host's report."""
    value = nic.get("fw_ver")
    return value if isinstance(value, str) and value else None


def model_of(nic):
    """A NIC's model for the firmware comparison: ``hca_type`` (``MT4129``), else the PCI ``vendor:device``."""
    return nic.get("hca_type") or nic.get("pci_id") or None


# hosts named in an inventory check's detail; the rest are counted (the detail is repeated on every host concerned)
HOSTS_NAMED = 5


def host_list(names):
    """``a, b, c`` or, past :data:`HOSTS_NAMED`, ``12 hosts: a, b, c, d, e and 7 more`` (sorted)."""
    names = sorted(names)
    if len(names) <= HOSTS_NAMED:
        return ", ".join(names)
    return "%d hosts: %s and %d more" % (len(names), ", ".join(names[:HOSTS_NAMED]), len(names) - HOSTS_NAMED)


def inventory_judge(hosts):
    """``{host: [checks]}``: ``health.firmware[<model>]`` on every host with a NIC of that model, ``fail`` when the
    model runs more than one ``fw_ver`` across the inventory (a host with two versions on one model too).

    ``hosts`` is ``{name: layers.health section or None}`` (None: no facts; such a host gets no check); pure.
    """
    versions = {}
    for name, section in hosts.items():
        for nic in (section or {}).get("nics") or []:
            model = model_of(nic)
            if model and _version(nic):
                versions.setdefault(model, {}).setdefault(nic["fw_ver"], set()).add(name)
    out = dict((name, []) for name in hosts)
    # one text per model, made once: with the hosts named in full on every host the report grew with N^2
    spreads = dict((model, "; ".join("%s on %s" % (version, host_list(seen[version])) for version in sorted(seen)))
                   for model, seen in versions.items() if len(seen) > 1)
    for name, section in sorted(hosts.items()):
        mine = {}
        for nic in (section or {}).get("nics") or []:
            mine.setdefault(model_of(nic) or "unknown model", []).append(nic)
        for model in sorted(mine):
            live = dict((nic["name"], _version(nic)) for nic in mine[model])
            seen = versions.get(model) or {}
            if model == "unknown model" or not seen or any(v is None for v in live.values()):
                out[name].append(_check("health.firmware", "unknown", model, "one fw_ver per model", live,
                                        detail="fw_ver or the NIC model could not be read"))
                continue
            if len(seen) == 1:
                out[name].append(_check("health.firmware", "ok", model, "one fw_ver per model", live))
                continue
            common = max(sorted(seen), key=lambda version: len(seen[version]))
            spread = spreads[model]
            out[name].append(_check("health.firmware", "fail", model, common, live,
                                    remedy="update the firmware of every %s to one version (mlxfwmanager, or the "
                                    "vendor's firmware bundle)" % model,
                                    detail="%s runs %d firmware versions across the inventory: %s" % (model, len(seen), spread)))
    return out
