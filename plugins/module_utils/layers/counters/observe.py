# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``counters`` layer's observer (``rdma_facts``' ``layers.counters``): raw values, read through HostRoot only.

Every file of ``/sys/class/infiniband/<dev>/ports/<n>/hw_counters/`` but ``lifespan`` (drivers/infiniband/core/sysfs.c
``setup_hw_port_stats()``: one file per counter the driver declares, ``"%llu\\n"``; mlx5's names are in
drivers/infiniband/hw/mlx5/counters.c), for every port of every RDMA device that is not a VF.  The values are the
device's counters since its RDMA device registered (mlx5_ib allocates the port's Q counter set at probe); the kernel
reads the device at most every ``lifespan`` ms (10 by default), so two reads closer than that may show one value.

With ``interval`` > 0 the ports are read twice, ``interval`` seconds apart, so the audit can judge rates: each port then
carries both readings.  Nothing is judged here: a value that is not a number is kept as its text, an unreadable one
is None with the reason in the port's ``problems``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import time

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError
from ansible_collections.rdma.k8s_node.plugins.module_utils._rdma_discovery import SYS_IB, _Discovery

#: the longest wait between two readings rdma_facts accepts (seconds)
MAX_INTERVAL = 60


def value_of(text):
    """A counter's value (``"%llu"``) as an int; the text itself when it is not a plain number; None stays None."""
    if text is None:
        return None
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() and stripped.isascii() and len(stripped) <= 20 else stripped


def read_port(host, device, port):
    """``{device, port, counters: {name: value} or None (no hw_counters directory), problems}``."""
    base = "%s/%s/ports/%s/hw_counters" % (SYS_IB, device, port)
    item = {"device": device, "port": port, "counters": None, "problems": []}
    try:
        names = host.listdir(base)
    except HostReadError as exc:
        item["problems"].append(exc.msg)
        return item
    if not names:
        return item
    counters = {}
    for name in names:
        if name == "lifespan":
            continue
        try:
            counters[name] = value_of(host.read_attr("%s/%s" % (base, name)))
        except HostReadError as exc:
            counters[name] = None
            item["problems"].append(exc.msg)
    item["counters"] = counters
    return item


def read_ports(host, ports):
    """One reading of ``ports`` (``[(device, port)]``): ``{"time": epoch seconds, "ports": [read_port()]}``."""
    return {"time": round(time.time(), 3), "ports": [read_port(host, device, port) for device, port in ports]}


def check_interval(interval):
    """``interval`` as seconds (a number 0..MAX_INTERVAL); InputError naming the option otherwise."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 <= interval <= MAX_INTERVAL:
        raise InputError("counters_interval must be a number of seconds from 0 to %d, got %r" % (MAX_INTERVAL, interval))
    return interval


def facts(host, interval=0, sleep=time.sleep, discovery=None):
    """``layers.counters``: ``{interval, ports: [{device, port, link_layer, counters, previous, problems}]}``;
    ``previous`` (the first reading) and ``interval`` (the seconds between the two, measured) only when asked for
    two readings, else None.  No timestamp: the same node gives the same facts (check mode compares them).
    ``discovery``: rdma_facts' (``_rdma_discovery.discover``), whose RDMA devices this reuses instead of listing
    them again."""
    interval = check_interval(interval)
    ports = []
    devices = discovery.found()["devices"] if discovery is not None else _Discovery(host).rdma_devices()
    for device in devices:
        if device["is_vf"]:
            continue
        for port in device["ports"]:
            ports.append((device["name"], port["port"], port["link_layer"]))
    wanted = [(name, port) for name, port, dummy in ports]
    first = read_ports(host, wanted)
    second = None
    if interval:
        sleep(interval)
        second = read_ports(host, wanted)
    last = second or first
    out = []
    for (name, port, layer), item, before in zip(ports, last["ports"], first["ports"]):
        out.append({"device": name, "port": port, "link_layer": layer, "counters": item["counters"],
                    "previous": before["counters"] if second else None,
                    "problems": item["problems"] + (before["problems"] if second else [])})
    return {"interval": round(last["time"] - first["time"], 3) if second else None, "ports": out}
