# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A TOML reader that remembers where every statement is, and a surgical editor built on it.

Why not a TOML library: modules run on the node's own Python with the standard library only
(``tomllib`` exists from 3.11 and cannot write), and containerd's ``config.toml`` belongs to the
user: their comments, order and other settings must survive.  So :func:`parse` reads TOML 1.0
into plain Python data *and* records, per statement, the character span of its value and of the
table it belongs to.  :func:`set_key` then changes one value in place (keeping the line's own
comment), or inserts one line in the right table block, or adds one table header; every other
byte of the file stays as it was.

The editor refuses what it cannot do safely (adding a key to an inline table) with
:class:`~._errors.ConflictError` instead of guessing.  Whatever it writes is parsed again before
it is returned, and containerd itself re-reads the result (``containerd config dump``) before
anything is restarted.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, ParseError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_TOKEN = re.compile(r"[0-9A-Za-z_+\-.:]+")
_INT = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)$")
_PREFIXED_INT = re.compile(r"0(?:x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*|o[0-7](?:_?[0-7])*|b[01](?:_?[01])*)$")
_FLOAT = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?$")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}")
_LINE_END_ESCAPE = re.compile(r"[ \t]*\r?\n")
_TIME_OF_DATE = re.compile(r" \d{2}:\d{2}[0-9:.+\-Z]*")
#: arrays and inline tables nested deeper are refused (the parser recurses; Python stops at about 1,000 frames)
MAX_NESTING = 100
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class RawValue(str):
    """A TOML value kept as its text (dates and times, which containerd configs do not use)."""


class Statement:  # pylint: disable=too-few-public-methods,too-many-instance-attributes
    """One top-level statement: a ``[table]``/``[[array]]`` header or a ``key = value`` line.

    ``start``/``end`` are character offsets of the statement (``end`` is the end of its last line, before
    the newline); for key/values ``value_start``/``value_end`` delimit the value's text and ``table`` is
    the path of the table whose block the line is in.
    """

    def __init__(self, kind, path, start, end, line, table=(), value=None, value_start=None, value_end=None):
        self.kind = kind
        self.path = path
        self.start = start
        self.end = end
        self.line = line
        self.table = table
        self.value = value
        self.value_start = value_start
        self.value_end = value_end


class Document:
    """Parsed TOML: ``data`` (plain dicts/lists/values), ``statements`` and how each table was defined."""

    def __init__(self, text, data, statements, tables):
        self.text = text
        self.data = data
        self.statements = statements
        self.tables = tables  # path -> "header" | "array" | "implicit" | "dotted:<owner path>" | "inline"

    def get(self, path, default=None):
        """The value at ``path`` (a tuple of keys) or ``default``; arrays of tables resolve to their last element."""
        node = self.data
        for key in path:
            if isinstance(node, list) and node and isinstance(node[-1], dict):
                node = node[-1]
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
        return node


class _Parser:  # pylint: disable=too-many-instance-attributes
    def __init__(self, text, name):
        self.text = text
        self.name = name
        self.pos = 0
        self.data = {}
        self.statements = []
        self.tables = {(): "header"}
        self.current = ()
        self.current_node = self.data
        self.explicit = set([()])
        self.frozen = set()  # paths of inline tables and arrays: closed for extension
        self.depth = 0  # arrays and inline tables being parsed, one inside the other
        self.counted = (0, 1)  # (offset, its line number): line_of counts on from the last position it was asked

    # -- errors and positions ---------------------------------------------------------------
    def line_of(self, pos):
        start, line = self.counted if pos >= self.counted[0] else (0, 1)
        line += self.text.count("\n", start, pos)
        self.counted = (pos, line)
        return line

    def error(self, msg, pos=None):
        where = self.pos if pos is None else pos
        return ParseError("%s line %d: %s" % (self.name, self.line_of(where), msg),
                          {"file": self.name, "line": self.line_of(where)})

    def peek(self, count=1):
        return self.text[self.pos:self.pos + count]

    def skip_ws(self):
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def skip_comment(self):
        if self.peek() == "#":
            end = self.text.find("\n", self.pos)
            end = len(self.text) if end < 0 else end
            body = self.text[self.pos:end]
            if body.endswith("\r"):
                body = body[:-1]
            if any((ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F for char in body):
                raise self.error("control character in a comment")
            self.pos = end

    def skip_trivia(self):
        """Whitespace, newlines and comments (between array elements)."""
        while self.pos < len(self.text):
            self.skip_ws()
            if self.peek() == "#":
                self.skip_comment()
            elif self.peek() == "\n":
                self.pos += 1
            elif self.peek(2) == "\r\n":
                self.pos += 2
            else:
                return

    def end_of_line(self):
        """After a statement: optional whitespace and comment, then newline or end of text."""
        self.skip_ws()
        self.skip_comment()
        end = self.pos
        if self.peek(2) == "\r\n":
            end = self.pos
            self.pos += 2
        elif self.peek() == "\n":
            self.pos += 1
        elif self.pos < len(self.text):
            raise self.error("unexpected %r after the value (one statement per line)" % self.peek())
        return end

    # -- keys -------------------------------------------------------------------------------
    def parse_key(self):
        parts = []
        while True:
            self.skip_ws()
            char = self.peek()
            if char == '"':
                if self.peek(3) == '"""':
                    raise self.error("multi-line strings cannot be keys")
                parts.append(self.parse_basic_string())
            elif char == "'":
                if self.peek(3) == "'''":
                    raise self.error("multi-line strings cannot be keys")
                parts.append(self.parse_literal_string())
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if not match:
                    raise self.error("expected a key, found %r" % (char or "end of file"))
                parts.append(match.group(0))
                self.pos = match.end()
            self.skip_ws()
            if self.peek() != ".":
                return tuple(parts)
            self.pos += 1

    # -- strings ------------------------------------------------------------------------------
    def parse_basic_string(self, multiline=False):
        quote = '"""' if multiline else '"'
        self.pos += len(quote)
        if multiline and self.peek(2) == "\r\n":
            self.pos += 2
        elif multiline and self.peek() == "\n":
            self.pos += 1
        out = []
        while True:
            if self.pos >= len(self.text):
                raise self.error("unterminated string")
            char = self.text[self.pos]
            if multiline and self.text.startswith('"""', self.pos):
                extra = 0
                while extra < 2 and self.text.startswith('"', self.pos + 3 + extra):
                    extra += 1
                out.append('"' * extra)
                self.pos += 3 + extra
                return "".join(out)
            if not multiline and char == '"':
                self.pos += 1
                return "".join(out)
            if char == "\\":
                self.pos += 1
                esc = self.peek()
                if esc in _ESCAPES:
                    out.append(_ESCAPES[esc])
                    self.pos += 1
                elif esc in ("u", "U"):
                    width = 4 if esc == "u" else 8
                    digits = self.text[self.pos + 1:self.pos + 1 + width]
                    if len(digits) != width or not re.match(r"[0-9A-Fa-f]+$", digits):
                        raise self.error("bad unicode escape \\%s%s" % (esc, digits))
                    code = int(digits, 16)
                    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                        raise self.error("unicode escape \\%s%s is not a Unicode scalar value" % (esc, digits))
                    out.append(chr(code))
                    self.pos += 1 + width
                elif multiline and _LINE_END_ESCAPE.match(self.text, self.pos):
                    self.skip_trivia_ws_only()
                else:
                    raise self.error("invalid escape \\%s in a string" % esc)
                continue
            if char == "\n" and not multiline:
                raise self.error("newline in a single-line string")
            if (ord(char) < 0x20 and char not in "\t\n\r") or ord(char) == 0x7F:
                raise self.error("control character in a string")
            out.append(char)
            self.pos += 1

    def skip_trivia_ws_only(self):
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def parse_literal_string(self, multiline=False):
        quote = "'''" if multiline else "'"
        self.pos += len(quote)
        if multiline and self.peek(2) == "\r\n":
            self.pos += 2
        elif multiline and self.peek() == "\n":
            self.pos += 1
        end = self.text.find(quote, self.pos)
        if end < 0:
            raise self.error("unterminated literal string")
        extra = 0
        while multiline and extra < 2 and self.text.startswith("'", end + 3):
            end += 1
            extra += 1
        value = self.text[self.pos:end]
        if not multiline and "\n" in value:
            raise self.error("newline in a single-line string")
        self.pos = end + len(quote)
        return value

    # -- values -------------------------------------------------------------------------------
    def parse_value(self):  # pylint: disable=too-many-return-statements,too-many-branches
        char = self.peek()
        if self.peek(3) == '"""':
            return self.parse_basic_string(multiline=True)
        if char == '"':
            return self.parse_basic_string()
        if self.peek(3) == "'''":
            return self.parse_literal_string(multiline=True)
        if char == "'":
            return self.parse_literal_string()
        if char == "[":
            return self.nested(self.parse_array)
        if char == "{":
            return self.nested(self.parse_inline_table)
        for word, value in (("true", True), ("false", False)):
            if self.text.startswith(word, self.pos) and not _BARE_KEY.match(self.text, self.pos + len(word)):
                self.pos += len(word)
                return value
        match = _TOKEN.match(self.text, self.pos)
        if not match:
            raise self.error("expected a value, found %r" % (char or "end of file"))
        token = match.group(0)
        if _DATE.match(token):
            end = match.end()
            more = _TIME_OF_DATE.match(self.text, end)
            if more:
                end = more.end()
            self.pos = end
            return RawValue(self.text[match.start():end])
        self.pos = match.end()
        if _INT.match(token) or _PREFIXED_INT.match(token):
            try:
                return int(token.replace("_", ""), 10 if _INT.match(token) else 0)
            except ValueError:  # more decimal digits than Python converts (sys.get_int_max_str_digits())
                raise self.error("integer of %d digits is too long" % len(token), match.start()) from None
        if _FLOAT.match(token):
            return float(token.replace("_", ""))
        if token.lstrip("+-") in ("inf", "nan"):
            return float(token)
        raise self.error("invalid value %r" % token, match.start())

    def nested(self, parse):
        """``parse()`` one level deeper; refused beyond MAX_NESTING levels (no RecursionError on hostile input)."""
        if self.depth >= MAX_NESTING:
            raise self.error("arrays or inline tables nested more than %d deep" % MAX_NESTING)
        self.depth += 1
        try:
            return parse()
        finally:
            self.depth -= 1

    def parse_array(self):
        self.pos += 1
        out = []
        while True:
            self.skip_trivia()
            if self.peek() == "]":
                self.pos += 1
                return out
            out.append(self.parse_value())
            self.skip_trivia()
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() == "]":
                self.pos += 1
                return out
            raise self.error("expected ',' or ']' in an array, found %r" % (self.peek() or "end of file"))

    def parse_inline_table(self):
        self.pos += 1
        out = {}
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            return out
        while True:
            key = self.parse_key()
            if self.peek() != "=":
                raise self.error("expected '=' after key %s" % ".".join(key))
            self.pos += 1
            self.skip_ws()
            value = self.parse_value()
            node = out
            for part in key[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise self.error("key %s is not a table" % ".".join(key))
            if key[-1] in node:
                raise self.error("duplicate key %s in an inline table" % ".".join(key))
            node[key[-1]] = value
            self.skip_ws()
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() == "}":
                self.pos += 1
                return out
            raise self.error("expected ',' or '}' in an inline table, found %r" % (self.peek() or "end of file"))

    # -- tables -------------------------------------------------------------------------------
    def descend(self, path, create_kind, pos):
        """The dict at ``path`` (arrays of tables: their last element), creating implicit tables."""
        node = self.data
        for depth, key in enumerate(path):
            here = path[:depth + 1]
            if key not in node:
                node[key] = {}
                self.tables.setdefault(here, create_kind)
            node = node[key]
            if isinstance(node, list):
                if here not in self.tables or self.tables[here] != "array":
                    raise self.error("%s is an array, not a table" % ".".join(here), pos)
                node = node[-1]
            elif not isinstance(node, dict):
                raise self.error("%s is a value, not a table" % ".".join(here), pos)
            if here in self.frozen:
                raise self.error("%s is an inline table and cannot be extended" % ".".join(here), pos)
        return node

    def header(self, start):
        array = self.peek(2) == "[["
        self.pos += 2 if array else 1
        path = self.parse_key()
        close = "]]" if array else "]"
        if self.peek(len(close)) != close:
            raise self.error("expected %r to close the table header" % close)
        self.pos += len(close)
        end = self.end_of_line()
        if array:
            parent = self.descend(path[:-1], "implicit", start)
            existing = parent.get(path[-1])
            if existing is None:
                parent[path[-1]] = existing = []
                self.tables[path] = "array"
            elif not isinstance(existing, list) or self.tables.get(path) != "array":
                raise self.error("%s is already defined and is not an array of tables" % ".".join(path), start)
            existing.append({})
            self.current_node = existing[-1]
            self.statements.append(Statement("array", path, start, end, self.line_of(start)))
        else:
            kind = self.tables.get(path)
            if path in self.explicit or (kind and kind != "implicit"):
                raise self.error("table %s is defined twice" % ".".join(path), start)
            self.current_node = self.descend(path, "implicit", start)
            self.tables[path] = "header"
            self.explicit.add(path)
            self.statements.append(Statement("table", path, start, end, self.line_of(start)))
        self.current = path

    def key_value(self, start):
        key = self.parse_key()
        if self.peek() != "=":
            raise self.error("expected '=' after key %s" % ".".join(key))
        self.pos += 1
        self.skip_ws()
        value_start = self.pos
        value = self.parse_value()
        value_end = self.pos
        end = self.end_of_line()
        node = self.current_node
        for depth, part in enumerate(key[:-1]):
            here = self.current + key[:depth + 1]
            if part not in node:
                node[part] = {}
                self.tables[here] = "dotted:" + "\x00".join(self.current)
            elif not isinstance(node[part], dict) or self.tables.get(here, "").split(":")[0] not in ("dotted",):
                raise self.error("%s is already defined and cannot take dotted keys here" % ".".join(here), start)
            node = node[part]
        if key[-1] in node:
            raise self.error("duplicate key %s" % ".".join(self.current + key), start)
        node[key[-1]] = value
        full = self.current + key
        if isinstance(value, dict):
            self.tables[full] = "inline"
            self._freeze(full, value)
        elif isinstance(value, list):
            self.frozen.add(full)
        self.statements.append(Statement("kv", full, start, end, self.line_of(start), self.current, value,
                                         value_start, value_end))

    def _freeze(self, path, value):
        self.frozen.add(path)
        for key, sub in value.items():
            if isinstance(sub, dict):
                self.tables[path + (key,)] = "inline"
                self._freeze(path + (key,), sub)

    def parse(self):
        if self.text.startswith("\ufeff"):
            self.pos = 1
        while True:
            self.skip_trivia()
            if self.pos >= len(self.text):
                break
            start = self.pos
            if self.peek() == "[":
                self.header(start)
            else:
                self.key_value(start)
        return Document(self.text, self.data, self.statements, self.tables)


def parse(text, name="TOML"):
    """Parse TOML text; raises ParseError naming ``name`` and the line on malformed input."""
    return _Parser(text, name).parse()


# -- rendering ---------------------------------------------------------------------------------
def render_key(part):
    """One key part: bare when it can be, else a basic string."""
    return part if _BARE_KEY.match(part) and _BARE_KEY.match(part).end() == len(part) else render_value(part)


def render_path(path):
    """A dotted key path, for headers and dotted keys."""
    return ".".join(render_key(part) for part in path)


def render_value(value):
    """A TOML value for the types this collection writes: str, bool, int, lists of them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -(2 ** 63) <= value < 2 ** 63:
            raise ParseError("TOML integers are 64-bit signed; %d does not fit" % value)
        return str(value)
    if isinstance(value, str):
        out = ['"']
        for char in value:
            if char in ('"', "\\"):
                out.append("\\" + char)
            elif char == "\n":
                out.append("\\n")
            elif char == "\t":
                out.append("\\t")
            elif ord(char) < 0x20 or ord(char) == 0x7F:
                out.append("\\u%04x" % ord(char))
            else:
                out.append(char)
        out.append('"')
        return "".join(out)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_value(item) for item in value) + "]"
    raise ParseError("cannot write %r as a TOML value" % (value,))


# -- editing -----------------------------------------------------------------------------------
def _line_start(text, pos):
    return text.rfind("\n", 0, pos) + 1


def _indent_at(text, pos):
    start = _line_start(text, pos)
    return text[start:pos] if not text[start:pos].strip() else ""


def _block_end(doc, table):
    """Offset just after the last statement that belongs to ``table``'s block (header or its key/values)."""
    last = None
    for stmt in doc.statements:
        if (stmt.kind == "kv" and stmt.table == table) or (stmt.kind == "table" and stmt.path == table):
            last = stmt
    return last


def _insert_line(text, after_pos, line):
    """Insert ``line`` on its own line after the line that ends at ``after_pos`` (or at the top when None)."""
    if after_pos is None:
        return line + "\n" + text
    newline = text.find("\n", after_pos)
    if newline < 0:
        return text + "\n" + line + "\n"
    return text[:newline + 1] + line + "\n" + text[newline + 1:]


def set_key(text, table, key, value, name="TOML"):
    """Return ``text`` with ``table.key = value``, touching nothing else.  ``table``/``key``: tuple / str."""
    doc = parse(text, name)
    table = tuple(table)
    full = table + (key,)
    rendered = render_value(value)
    for stmt in doc.statements:
        if stmt.kind == "kv" and stmt.path == full:
            if stmt.value == value and type(stmt.value) is type(value):  # pylint: disable=unidiomatic-typecheck
                return text
            new = text[:stmt.value_start] + rendered + text[stmt.value_end:]
            return _checked(new, full, value, name)
    for depth in range(len(full) - 1, 0, -1):
        kind = doc.tables.get(full[:depth], "")
        if kind == "inline":
            raise ConflictError("%s: %s is an inline table; rewrite it as a [%s] section so %s can be added"
                                % (name, render_path(full[:depth]), render_path(full[:depth]), key),
                                {"file": name, "table": list(full[:depth])})
        if kind == "array" and depth < len(full):
            raise ConflictError("%s: %s is an array of tables; this collection does not edit inside one"
                                % (name, render_path(full[:depth])), {"file": name})
    existing = doc.get(full)
    if existing is not None and isinstance(existing, dict):
        raise ConflictError("%s: %s is a table, not a value" % (name, render_path(full)), {"file": name})
    kind = doc.tables.get(table)
    if kind == "header" or (table == () and kind):
        anchor = _block_end(doc, table)
        indent = _child_indent(doc, text, table)
        if table == ():
            first_header = next((s for s in doc.statements if s.kind != "kv"), None)
            root_kvs = [s for s in doc.statements if s.kind == "kv" and s.table == ()]
            if root_kvs:
                new = _insert_line(text, root_kvs[-1].end, key_line(indent, (key,), rendered))
            elif first_header is not None:
                start = _line_start(text, first_header.start)
                new = text[:start] + key_line("", (key,), rendered) + "\n" + text[start:]
            else:
                new = text + ("" if not text or text.endswith("\n") else "\n") + key_line("", (key,), rendered) + "\n"
        else:
            new = _insert_line(text, anchor.end, key_line(indent, (key,), rendered))
        return _checked(new, full, value, name)
    if kind and kind.startswith("dotted:"):
        owner = tuple(part for part in kind[len("dotted:"):].split("\x00") if part) if kind != "dotted:" else ()
        anchor = _block_end(doc, owner)
        relative = full[len(owner):]
        indent = _child_indent(doc, text, owner)
        if anchor is None or (owner == () and anchor.kind != "kv"):
            new = key_line(indent, relative, rendered) + "\n" + text
        else:
            new = _insert_line(text, anchor.end, key_line(indent, relative, rendered))
        return _checked(new, full, value, name)
    return _checked(_add_table(doc, text, table, key, rendered), full, value, name)


def key_line(indent, path, rendered):
    """``<indent>key.path = value``."""
    return "%s%s = %s" % (indent, render_path(path), rendered)


def _child_indent(doc, text, table):
    """Indentation for a key in ``table``: that of its last key, else its header's plus two spaces."""
    kvs = [s for s in doc.statements if s.kind == "kv" and s.table == table]
    if kvs:
        return _indent_at(text, kvs[-1].start)
    header = next((s for s in doc.statements if s.kind == "table" and s.path == table), None)
    if header is None:
        return ""
    return _indent_at(text, header.start) + "  "


def _add_table(doc, text, table, key, rendered):
    """A new ``[table]`` header with one key: before the first header inside it, else after its parent's subtree."""
    headers = [s for s in doc.statements if s.kind in ("table", "array")]
    inside = [s for s in headers if s.path[:len(table)] == table and len(s.path) > len(table)]
    if inside:
        target = inside[0]
        indent = _indent_at(text, target.start)
        if len(target.path) > len(table) + 1:
            indent = indent[:max(0, len(indent) - 2 * (len(target.path) - len(table) - 1))]
        start = _line_start(text, target.start)
        block = "%s[%s]\n%s\n" % (indent, render_path(table), key_line(indent + "  ", (key,), rendered))
        return text[:start] + block + "\n" + text[start:]
    parent = table[:-1]
    while parent and not any(s.path[:len(parent)] == parent for s in headers):
        parent = parent[:-1]
    family = [s for s in doc.statements if s.kind != "kv" and s.path[:len(parent)] == parent]
    family_kv = [s for s in doc.statements if s.kind == "kv" and s.table[:len(parent)] == parent]
    last = max(family + family_kv, key=lambda s: s.end) if parent and (family or family_kv) else None
    sibling = [s for s in headers if s.path[:len(parent)] == parent and len(s.path) == len(parent) + 1]
    if sibling:
        indent = _indent_at(text, sibling[-1].start)
    else:
        parent_header = next((s for s in headers if s.path == parent), None)
        indent = _indent_at(text, parent_header.start) + "  " if parent_header is not None else ""
    block = "%s[%s]\n%s\n" % (indent, render_path(table), key_line(indent + "  ", (key,), rendered))
    if last is None:
        body = text if not text or text.endswith("\n") else text + "\n"
        return body + ("\n" if body.strip() else "") + block
    newline = text.find("\n", last.end)
    if newline < 0:
        return text + "\n\n" + block
    return text[:newline + 1] + "\n" + block + text[newline + 1:]


def _checked(new, full, value, name):
    """Parse the edited text again: it must be valid TOML and hold the new value at ``full``."""
    doc = parse(new, name + " (after editing)")
    got = doc.get(full)
    if got != value or type(got) is not type(value):  # pylint: disable=unidiomatic-typecheck
        raise ConflictError("%s: setting %s did not take effect in the edited text (got %r)"
                            % (name, render_path(full), got), {"file": name})
    return new
