# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``layers.irq`` in ``rdma_facts``, compact (issue 17): per function one ``vectors`` table instead of a dict per
vector, and :func:`unpack`, which gives the judge the observer's own shape back.

:func:`observe.observe` returns per function ``irqs``, ``{irq number (str): {"affinity", "effective", "settable",
"name"}}``: what the module's planner reads.  On a DGX H100 (12 functions, 64 vectors each) that was 74 of the 166 KB
of facts, mostly the keys repeated per vector and the function's address repeated in every handler's name.  The facts
carry instead, per function, ``vectors``:

* ``irqs``: the vectors' numbers, ascending, in the kernel's list syntax (``"24-87"``);
* ``affinity``, ``effective``, ``settable``, ``name``: one column per field, the n-th value the n-th vector's, or one
  value when every vector has it (``"settable": true``; ``"affinity": "16-17"`` once the role placed them); the text
  as the kernel gave it;
* ``name_suffix``: when every handler name ends with the same ``@pci:<address>`` (mlx5, gve), that text, left off
  each name in ``name``.

Facts of an older collection carry ``irqs`` itself: :func:`unpack` leaves those as they are.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

#: the per-vector fields, in :func:`observe.read_irq`'s order
FIELDS = ("affinity", "effective", "settable", "name")
_PCI = "@pci:"


def pack(observed):
    """``observed`` (:func:`observe.observe`'s result) with each function's ``irqs`` as its ``vectors`` table."""
    out = dict(observed)
    out["devices"] = dict((bdf, _swap(item, "irqs", "vectors", _table)) for bdf, item in observed["devices"].items())
    return out


def unpack(section):
    """``layers.irq`` as the planner takes it (:func:`observe.observe`'s shape): each function's ``vectors`` back to
    ``irqs``; a function without ``vectors`` (facts of an older collection, an error) as it is.  ValueError for a table
    whose columns do not match its IRQ numbers (the audit makes that host unknown)."""
    devices = section.get("devices")
    if not isinstance(devices, dict) or not any(isinstance(item, dict) and "vectors" in item for item in devices.values()):
        return section
    out = dict(section)
    out["devices"] = dict((bdf, _swap(item, "vectors", "irqs", _irqs)) for bdf, item in devices.items())
    return out


def _swap(item, old, new, convert):
    """``item`` with its key ``old`` replaced, in place in the key order, by ``new`` = ``convert(item[old])``."""
    if not isinstance(item, dict) or old not in item:
        return item
    return dict((new, convert(value)) if key == old else (key, value) for key, value in item.items())


def _table(irqs):
    """``{irq: {field: value}}`` -> the ``vectors`` table."""
    numbers = sorted(irqs, key=int)
    table = {"irqs": _ranges([int(number) for number in numbers])}
    for field in FIELDS:
        table[field] = [irqs[number].get(field) for number in numbers]
    suffix = _name_suffix(table["name"])
    if suffix:
        table["name"] = [name[:-len(suffix)] if name is not None else None for name in table["name"]]
        table["name_suffix"] = suffix
    for field in FIELDS:
        table[field] = _column(table[field])
    return table


def _irqs(table):
    """The ``vectors`` table -> ``{irq (str): {field: value}}``."""
    numbers = _numbers(table["irqs"])
    columns = dict((field, _values(table.get(field), len(numbers), field)) for field in FIELDS)
    suffix = table.get("name_suffix")
    if suffix:
        columns["name"] = [name + suffix if name is not None else None for name in columns["name"]]
    return dict((str(number), dict((field, columns[field][index]) for field in FIELDS))
                for index, number in enumerate(numbers))


def _name_suffix(names):
    """The ``@pci:<address>`` every handler name ends with, or None."""
    present = [name for name in names if name is not None]
    if not present or _PCI not in present[0]:
        return None
    suffix = present[0][present[0].rindex(_PCI):]
    return suffix if all(name.endswith(suffix) for name in present) else None


def _column(values):
    """One value when every vector has it, else the list (no field's value is a list)."""
    return values[0] if values and all(value == values[0] for value in values) else values


def _values(column, count, field):
    """A column back to ``count`` values."""
    if not isinstance(column, list):
        return [column] * count
    if len(column) != count:
        raise ValueError("layers.irq: %d values of %s for %d IRQs" % (len(column), field, count))
    return column


def _ranges(numbers):
    """``[24, 25, 26, 30]`` -> ``"24-26,30"`` (ascending numbers)."""
    runs = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ",".join(str(low) if low == high else "%d-%d" % (low, high) for low, high in runs)


def _numbers(text):
    """``"24-26,30"`` -> ``[24, 25, 26, 30]``; ValueError if malformed."""
    numbers = []
    for part in text.split(",") if text else []:
        low, _sep, high = part.partition("-")
        numbers.extend(range(int(low), int(high or low) + 1))
    return numbers
