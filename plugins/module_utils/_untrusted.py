# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Loaders for text the node wrote (kubelet YAML and JSON, state files): bounded, and only typed errors.

A YAML alias expands to its anchor's whole value wherever it is used, so nine levels of nine aliases (the "billion
laughs") build a billion-element value from a few hundred bytes; configuration the collection reads never needs
them, so :func:`load_yaml` refuses any alias.  Nesting beyond :data:`MAX_DEPTH` and files beyond :data:`MAX_BYTES`
are refused too, and every failure is a :class:`ParseError` naming the file and the line.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError

#: nesting deeper than this is refused (kubelet configs nest 4 levels; JSON/YAML parsers recurse per level)
MAX_DEPTH = 64
#: a configuration file larger than this is refused before it is parsed
MAX_BYTES = 4 * 1024 * 1024


def _depth(value, limit, source):
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise ParseError("%s nests deeper than %d levels" % (source, limit), {"path": source})
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return value


def load_json(text, source, max_depth=MAX_DEPTH):
    """``json.loads`` of node text: size and depth bounded; ValueError (malformed, a 5,000-digit integer) and
    RecursionError become a ParseError naming ``source``."""
    if len(text) > MAX_BYTES:
        raise ParseError("%s is larger than %d bytes" % (source, MAX_BYTES), {"path": source})
    try:
        return _depth(json.loads(text), max_depth, source)
    except (ValueError, RecursionError) as exc:
        raise ParseError("%s is not valid JSON: %s" % (source, exc), {"path": source}) from exc


def load_yaml(text, source, yaml=None, max_depth=MAX_DEPTH):
    """YAML of node text with PyYAML's safe loader, aliases refused, size and depth bounded.  ``yaml`` is the
    imported PyYAML module (optional on nodes: the caller decides what its absence means)."""
    if yaml is None:
        import yaml  # pylint: disable=import-outside-toplevel,redefined-outer-name
    if len(text) > MAX_BYTES:
        raise ParseError("%s is larger than %d bytes" % (source, MAX_BYTES), {"path": source})

    class NoAliasLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        """SafeLoader that refuses aliases (``*name``) and nesting beyond ``max_depth``."""

        depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.events.AliasEvent):
                mark = self.peek_event().start_mark
                raise ParseError("%s line %d: YAML aliases (*%s) are not accepted in node configuration"
                                 % (source, mark.line + 1, self.peek_event().anchor), {"path": source})
            self.depth += 1
            try:
                if self.depth > max_depth:
                    raise ParseError("%s nests deeper than %d levels" % (source, max_depth), {"path": source})
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    try:
        return yaml.load(text, Loader=NoAliasLoader)  # nosec B506: a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ParseError("%s is not valid YAML: %s" % (source, exc), {"path": source}) from exc
    except (RecursionError, ValueError, OverflowError) as exc:
        raise ParseError("%s cannot be read as YAML: %s" % (source, exc), {"path": source}) from exc
