# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host variables as plain Python data, fast: shared by the audit and validate filters."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from collections.abc import Mapping

try:  # ansible-core 2.19+: variables reach filters as lazy containers that template every value on access
    from ansible._internal._templating._lazy_containers import _AnsibleLazyTemplateMixin as _LazyContainer
    from ansible._internal._templating._lazy_containers import _LazyValue
    from ansible.template import is_trusted_as_template
except ImportError:  # older ansible-core: plain containers, nothing to unwrap
    _LazyContainer = _LazyValue = is_trusted_as_template = None


def plain(value):
    """Templated host variables as plain Python data (HostVars containers are lazy mappings).

    A lazy container renders each value through the template engine when it is read, some 10 us a value; a
    host's facts have thousands and an inventory's report millions.  Values that hold no template (module results,
    everything the audit built) are copied as stored; a string trusted as a template, and anything this code does
    not recognise, is read the normal way, rendered.
    """
    if _LazyContainer is not None and isinstance(value, _LazyContainer):
        return _plain_lazy(value)
    if isinstance(value, Mapping):
        return dict((k, plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _stored(raw):
    """A lazy container's stored value as plain data, or ``_RENDER`` when it must be rendered to be read."""
    kind = type(raw)
    if kind is _LazyValue:
        raw = raw.value  # not read yet: the value as stored, before templating
        kind = type(raw)
    if kind in _UNTAGGED:  # exact built-in types carry no tags, so no trust: nothing to template
        return raw
    if kind is dict:
        out = {}
        for key, item in raw.items():
            item = _stored(item)
            if item is _RENDER:
                return _RENDER
            out[key] = item
        return out
    if kind is list or kind is tuple:
        out = []
        for item in raw:
            item = _stored(item)
            if item is _RENDER:
                return _RENDER
            out.append(item)
        return out
    if isinstance(raw, _LazyContainer):
        return _plain_lazy(raw)
    if isinstance(raw, str):  # a tagged string: rendered only when trusted as a template
        return _RENDER if is_trusted_as_template(raw) else raw
    if isinstance(raw, (int, float)):  # tagged numbers and booleans
        return raw
    return _RENDER


_UNTAGGED = frozenset((str, int, float, bool, type(None)))
_RENDER = RENDER = object()


def stored(value):
    """``value`` (a variable as stored, e.g. from ``HostVars.raw_get``) as plain data, or :data:`RENDER` when it
    holds a template (or something this code does not recognise) and must be read through the template engine."""
    return _stored(value)


def _plain_lazy(container):
    if isinstance(container, dict):
        out = {}
        for key, raw in dict.items(container):
            value = _stored(raw)
            out[key] = plain(container[key]) if value is _RENDER else value
        return out
    out = []
    for index, raw in enumerate(list.__iter__(container) if isinstance(container, list) else tuple.__iter__(container)):
        value = _stored(raw)
        out.append(plain(container[index]) if value is _RENDER else value)
    return out
