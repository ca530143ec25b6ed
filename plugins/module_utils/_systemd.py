# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How systemd turns a service's unit files into a command line: pure parsers, no I/O.

* :func:`parse_unit` reads a unit file or drop-in as systemd's config parser does (``\\`` line continuations,
  ``#``/``;`` comments, ``[Section]``, ``Key=value``).
* :func:`service_settings` folds the unit and its drop-ins, in systemd's order, into the ``ExecStart=`` command,
  the ``Environment=`` assignments and the ``EnvironmentFile=`` list (an empty assignment resets each list).
* :func:`parse_env_file` is systemd's environment-file grammar (src/basic/env-file.c): ``#``/``;`` comments at the
  start of a line, single quotes literal, double quotes with ``\\`` escapes of ``" \\ ` $`` and escaped newlines
  eaten, unquoted values with ``\\`` escapes and trailing whitespace chopped.  It keeps where each assignment is in the
  text so that one value can be rewritten without touching the rest of the file (:func:`replace_env_value`).
* :func:`expand_exec` is systemd's ``replace_env_argv``: a word that is exactly ``$NAME`` becomes the variable's
  value split at whitespace (quotes removed; nothing when unset), ``${NAME}`` is replaced inside a word (empty when
  unset), ``$$`` is a ``$``; the ``:`` prefix turns expansion off.  Every resulting word remembers where it came
  from (the unit file of the ``ExecStart=`` line, or the variable and the file that set it).
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

#: systemd's search path for system units, highest priority first (systemd.unit(5), "Unit File Load Path")
UNIT_DIRS = ("/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
             "/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached",
             "/run/systemd/system", "/run/systemd/system.attached", "/run/systemd/generator",
             "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system",
             "/run/systemd/generator.late")

_WHITESPACE = " \t\n\r"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_VAR_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "s": " ",
              "\\": "\\", '"': '"', "'": "'"}


def env_name_ok(name):
    """True for a name systemd accepts as an environment variable of a service."""
    return bool(_NAME.match(name or ""))


# -- unit files ------------------------------------------------------------------------------------------------------
def parse_unit(text):
    """``[(section, key, value, line number)]`` of a unit file, continuation lines joined as systemd joins them."""
    out = []
    section = None
    pending, start = None, 0
    for number, raw in enumerate((text or "").split("\n"), 1):
        line = raw.rstrip("\r")
        stripped = line.strip()
        if pending is not None and stripped[:1] in ("#", ";"):
            continue  # a comment inside a continuation is skipped (systemd >= 243)
        if pending is None:
            if not stripped or stripped[0] in "#;":
                continue
            start = number
        if line.endswith("\\"):
            pending = (pending or "") + line[:-1] + " "
            continue
        logical = ((pending or "") + line).strip()
        pending = None
        if logical.startswith("[") and logical.endswith("]"):
            section = logical[1:-1]
            continue
        if "=" not in logical:
            continue  # systemd warns and ignores it
        key, value = logical.split("=", 1)
        out.append((section, key.strip(), value.strip(), start))
    if pending is not None and pending.strip():
        logical = pending.strip()
        if "=" in logical:
            key, value = logical.split("=", 1)
            out.append((section, key.strip(), value.strip(), start))
    return out


def order_dropins(entries):
    """systemd's drop-in order: ``entries`` is ``[(directory rank, name, path)]``; a name found in several directories
    is taken from the highest-priority one (lowest rank); the result is sorted by file name."""
    chosen = {}
    for rank, name, path in entries:
        if name not in chosen or rank < chosen[name][0]:
            chosen[name] = (rank, path)
    return [chosen[name][1] for name in sorted(chosen)]


def _specifiers(value):
    return value.replace("%%", "%")


def service_settings(unit_files):
    """``{"exec_start": (value, path, line) or None, "environment": [(assignment, path)], "environment_files":
    [(path pattern, optional, unit path)], "problems": [...]}`` of ``unit_files`` = ``[(path, text)]`` in systemd's
    order (the unit, then its drop-ins)."""
    exec_start, environment, env_files, problems = [], [], [], []
    for path, text in unit_files:
        for section, key, value, line in parse_unit(text):
            if section != "Service":
                continue
            if key == "ExecStart":
                if value == "":
                    exec_start = []
                else:
                    exec_start.append((value, path, line))
            elif key == "Environment":
                if value == "":
                    environment = []
                    continue
                for word in split_words(_specifiers(value), cunescape=True):
                    name = word.split("=", 1)[0]
                    if "=" in word and env_name_ok(name):
                        environment.append((word, path))
                    else:
                        problems.append({"what": "%s:%d" % (path, line),
                                         "error": "Environment=%s is not NAME=value: systemd ignores it" % word})
            elif key == "EnvironmentFile":
                if value == "":
                    env_files = []
                    continue
                optional = value.startswith("-")
                name = _specifiers(value[1:] if optional else value).strip()
                env_files.append((name, optional, path))
    if len(exec_start) > 1:
        problems.append({"what": exec_start[-1][1], "error": "the unit has %d ExecStart= lines (only Type=oneshot may): "
                         "systemd refuses to start it" % len(exec_start)})
    return {"exec_start": exec_start[-1] if exec_start else None, "environment": environment,
            "environment_files": env_files, "problems": problems}


# -- words -----------------------------------------------------------------------------------------------------------
def _cunescape(text, index):
    """``(character(s), next index)`` of the C escape at ``text[index]`` (just after the backslash)."""
    char = text[index]
    if char in _C_ESCAPES:
        return _C_ESCAPES[char], index + 1
    if char == "x" and re.match(r"[0-9a-fA-F]{2}", text[index + 1:index + 3]):
        return chr(int(text[index + 1:index + 3], 16)), index + 3
    if char in "01234567" and re.match(r"[0-7]{3}", text[index:index + 3]):
        return chr(int(text[index:index + 3], 8)), index + 3
    if char == "u" and re.match(r"[0-9a-fA-F]{4}", text[index + 1:index + 5]):
        return chr(int(text[index + 1:index + 5], 16)), index + 5
    return char, index + 1


def split_words(text, cunescape=False):
    """Words of ``text`` as systemd's ``extract_first_word`` gives them with quotes removed: single and double quotes
    group (anywhere in a word), ``\\`` escapes the next character (C escapes with ``cunescape``)."""
    return [word for word, dummy_start, dummy_end in word_spans(text, cunescape)]


def word_spans(text, cunescape=False):
    """``[(word, start, end)]``: the words of :func:`split_words` and where each one is in ``text``."""
    words = []
    index, size = 0, len(text)
    while True:
        while index < size and text[index] in _WHITESPACE:
            index += 1
        if index >= size:
            return words
        start, word, quote = index, [], None
        while index < size:
            char = text[index]
            if quote is None and char in _WHITESPACE:
                break
            if char == "\\" and index + 1 < size:
                if cunescape:
                    got, index = _cunescape(text, index + 1)
                else:
                    got, index = text[index + 1], index + 2
                word.append(got)
                continue
            if quote is None and char in "'\"":
                quote = char
            elif char == quote:
                quote = None
            else:
                word.append(char)
            index += 1
        words.append(("".join(word), start, index))


# -- environment files -----------------------------------------------------------------------------------------------
def parse_env_file(text):
    """``[{"name", "value", "start", "end", "quote", "spans"}]`` of an environment file, in file order (a later
    assignment of a name wins).  ``start``/``end`` delimit the assignment in ``text`` (the key to the end of its value);
    ``quote`` is the first quote character the value used (``'``, ``"`` or None); ``spans[i]`` is where the value's
    character ``i`` comes from in ``text`` (``(start, end)``, an escape included)."""
    out = []
    state = "pre_key"
    key, value, quote, spans = [], None, None, []
    start = 0
    last_value_ws = last_key_ws = None

    def push(end):
        name = "".join(key[:last_key_ws] if last_key_ws is not None else key)
        val = None if value is None else "".join(value)
        where = list(spans)
        if state == "value" and last_value_ws is not None and val is not None:
            val, where = val[:last_value_ws], where[:last_value_ws]
        out.append({"name": name, "value": val, "start": start, "end": end, "quote": quote, "spans": where})

    def add(char, first, last):
        value.append(char)
        spans.append((first, last))

    for index, char in enumerate(text):
        if state == "pre_key":
            if char in "#;":
                state = "comment"
            elif char not in _WHITESPACE:
                state, key, value, quote, start, last_key_ws = "key", [char], None, None, index, None
                spans = []
        elif state == "key":
            if char in "\n\r":
                state = "pre_key"
            elif char == "=":
                state, value, last_value_ws = "pre_value", [], None
            else:
                if char not in _WHITESPACE:
                    last_key_ws = None
                elif last_key_ws is None:
                    last_key_ws = len(key)
                key.append(char)
        elif state == "pre_value":
            if char in "\n\r":
                push(index)
                state = "pre_key"
            elif char == "'":
                state, quote = "single", quote or "'"
            elif char == '"':
                state, quote = "double", quote or '"'
            elif char == "\\":
                state = "value_escape"
            elif char not in _WHITESPACE:
                state = "value"
                add(char, index, index + 1)
        elif state == "value":
            if char in "\n\r":
                push(index)
                state = "pre_key"
            elif char == "\\":
                state, last_value_ws = "value_escape", None
            else:
                if char not in _WHITESPACE:
                    last_value_ws = None
                elif last_value_ws is None:
                    last_value_ws = len(value)
                add(char, index, index + 1)
        elif state == "value_escape":
            state = "value"
            if char not in "\n\r":
                add(char, index - 1, index + 1)  # an escaped newline is eaten
        elif state == "single":
            if char == "'":
                state = "pre_value"
            else:
                add(char, index, index + 1)
        elif state == "double":
            if char == '"':
                state = "pre_value"
            elif char == "\\":
                state = "double_escape"
            else:
                add(char, index, index + 1)
        elif state == "double_escape":
            state = "double"
            if char in '"\\`$':
                add(char, index - 1, index + 1)
            elif char != "\n":
                add("\\", index - 1, index)
                add(char, index, index + 1)
        elif state == "comment":
            if char == "\\":
                state = "comment_escape"
            elif char in "\n\r":
                state = "pre_key"
        elif state == "comment_escape":
            state = "pre_key" if char in "\n\r" else "comment"
    if state in ("pre_value", "value", "value_escape", "single", "double", "double_escape"):
        push(len(text))
    return out


def env_assignments(text):
    """``{name: value}`` as systemd loads an EnvironmentFile (later wins; names that are not valid are dropped)."""
    return dict((a["name"], a["value"]) for a in parse_env_file(text) if a["value"] is not None and env_name_ok(a["name"]))


def cut_value_words(text, assignment, drop):
    """``text`` with the words ``drop`` (indexes into :func:`word_spans` of the assignment's value) cut out where they
    are written, with the space or line continuation before the next kept word (or after the previous one), so the
    rest keeps its layout; None when the words cannot be cut cleanly (the caller rewrites the assignment)."""
    value, where = assignment["value"], assignment["spans"]
    words = word_spans(value)
    if not drop or len(where) != len(value):
        return None
    cuts = []
    runs, run = [], []
    for index in range(len(words)):
        if index in drop:
            run.append(index)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    for run in runs:
        first, last = run[0], run[-1]
        if last + 1 < len(words):  # up to the next kept word
            cut_from, cut_to = where[words[first][1]][0], where[words[last + 1][1]][0]
        elif first > 0:  # the last words: from the end of the previous kept word
            cut_from, cut_to = where[words[first - 1][2] - 1][1], where[words[last][2] - 1][1]
        else:
            return None  # every word goes: rewrite the assignment
        cuts.append((cut_from, cut_to))
    for cut_from, cut_to in sorted(cuts, reverse=True):
        text = text[:cut_from] + text[cut_to:]
    return text


def quote_env_value(value, quote):
    """An environment-file value that reads back as ``value``, in the quoting style ``quote`` when possible."""
    if quote == "'" and "'" not in value:
        return "'%s'" % value
    if quote is None and value and not re.search(r"[\s'\"\\#;$`]", value):
        return value
    return '"%s"' % re.sub(r'(["\\`$])', r"\\\1", value)


def replace_env_value(text, assignment, new_value):
    """``text`` with one assignment (from :func:`parse_env_file`) given ``new_value``; the rest of the text as it was."""
    rendered = "%s=%s" % (assignment["name"], quote_env_value(new_value, assignment["quote"]))
    return text[:assignment["start"]] + rendered + text[assignment["end"]:]


# -- the command line ------------------------------------------------------------------------------------------------
def exec_command(value):
    """``(prefixes, words)`` of an ``ExecStart=`` value: its ``-@:+!`` prefixes and its words (C-unescaped)."""
    prefixes = ""
    text = value.lstrip()
    while text[:1] in ("-", "@", ":", "+", "!"):
        prefixes += text[0]
        text = text[1:]
    words = split_words(_specifiers(text), cunescape=True)
    if ";" in words:  # "a ; b" (removed from systemd, but a lone ';' still ends the first command)
        words = words[:words.index(";")]
    if "@" in prefixes and len(words) > 1:
        words = [words[0]] + words[2:]  # @: the second word is argv[0], the binary is the first
    return prefixes, words


def _replace_in_word(word, env, used):
    out, index = [], 0
    while index < len(word):
        if word.startswith("$$", index):
            out.append("$")
            index += 2
            continue
        match = _VAR_REF.match(word, index)  # (not word[index:]: a copy of the rest per character, quadratic)
        if match:
            name = match.group(1)
            used.append(name)
            out.append(env.get(name, ("",))[0])
            index = match.end()
            continue
        out.append(word[index])
        index += 1
    return "".join(out)


def expand_exec(exec_start, env):
    """``[(word, origin)]`` of the command systemd runs: ``exec_start`` is ``(value, unit path, line)``; ``env`` is
    ``{name: (value, origin)}``.  ``origin`` is ``{"file": path, "var": NAME or None}``."""
    value, path, dummy_line = exec_start
    prefixes, words = exec_command(value)
    literal = {"file": path, "how": "ExecStart", "var": None}
    if ":" in prefixes:
        return [(word, literal) for word in words]
    out = []
    for word in words:
        if word.startswith("$") and word[1:2] not in ("{", "$"):
            name = word[1:]
            if name in env:
                origin = dict(env[name][1], var=name)
                out.extend((part, origin) for part in split_words(env[name][0]))
            continue  # an unset $NAME word disappears
        used = []
        replaced = _replace_in_word(word, env, used)
        origin = literal
        if used and used[0] in env:
            origin = dict(env[used[0]][1], var=used[0])
        out.append((replaced, origin))
    return out


def describe_origin(origin):
    """Where a word of the command line comes from, for people: ``$KUBELET_EXTRA_ARGS from /etc/default/kubelet``,
    ``ExecStart= in /usr/lib/systemd/system/kubelet.service``, ``/proc/1234/cmdline``."""
    if not origin or not origin.get("file"):
        return "the command line"
    if origin.get("var"):
        how = " (Environment=)" if origin.get("how") == "Environment" else ""
        return "$%s from %s%s" % (origin["var"], origin["file"], how)
    if origin.get("how") == "ExecStart":
        return "ExecStart= in %s" % origin["file"]
    return origin["file"]


# -- drop-ins of other tools: which one wins a setting we write -------------------------------------------------------
# Read in systemd's source: src/shared/dropin.c (unit_file_find_dropin_paths, unit_file_find_dirs: the unit's own
# "<name>.d" in every unit directory, then its dash prefixes "foo-bar-.service.d", "foo-.service.d", then the
# top-level "<type>.d" as the least specific), src/basic/conf-files.c (a file name found in an earlier directory of
# that list hides the same name later; the drop-ins are read sorted by file name) and src/core/load-fragment.c (a
# later assignment of a setting wins; for list settings an empty assignment drops everything assigned before).
#: settings that accumulate: a later non-empty assignment adds, an empty one resets the list
LIST_SETTINGS = frozenset(("ExecCondition", "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop",
                           "ExecStopPost", "Environment", "EnvironmentFile", "PassEnvironment", "UnsetEnvironment"))


def _dash_prefixes(name):
    """``foo-bar-.service``, ``foo-.service`` for ``foo-bar-baz.service`` (systemd's unit_file_find_dirs)."""
    stem, dummy, kind = name.rpartition(".")
    out = []
    prefix, chopped = stem.split("@", 1)[0], False
    while True:
        dash = prefix.rfind("-")
        if dash <= 0:
            return out
        if dash + 1 < len(prefix) or chopped:
            prefix = prefix[:dash + 1]
            out.append("%s.%s" % (prefix, kind))
            prefix, chopped = prefix[:-1], True
        else:
            prefix, chopped = prefix[:dash], True


def dropin_dirs(unit):
    """The drop-in directories systemd searches for ``unit``, in the order that decides a shared file name."""
    kind = unit.rpartition(".")[2]
    names = [unit] + _dash_prefixes(unit)
    specific = ["%s/%s.d" % (directory, name) for directory in UNIT_DIRS for name in names]
    return specific + ["%s/%s.d" % (directory, kind) for directory in UNIT_DIRS]


def dropin_order(listing, unit):
    """Drop-in paths systemd reads for ``unit``, from ``{directory: [names]}`` (``*.conf``, not hidden): a name found in
    an earlier directory of :func:`dropin_dirs` hides it in later ones; sorted by name."""
    chosen = {}
    for directory in dropin_dirs(unit):
        for name in listing.get(directory) or []:
            if isinstance(name, str) and name.endswith(".conf") and not name.startswith(".") and name not in chosen:
                chosen[name] = directory
    return ["%s/%s" % (chosen[name], name) for name in sorted(chosen)]


def dropin_overrides(files, ours, settings):
    """What beats the ``settings`` (``[(section, key, value)]``) our drop-in ``ours`` writes, given ``files``
    (``[(path, text)]``, every drop-in systemd reads in its order, ours among them as it will be; a text may also be
    given already parsed, as :func:`parse_unit` returns it):

    * ``masked``: ours is not read at all, because a drop-in of the same name in a more important directory is (its
      path is ``files``' entry of that name; ``ours`` missing from ``files`` with no such entry means not masked);
    * ``reset``: a later drop-in empties a list setting of ours (``ExecStartPost=``);
    * ``later_value``: a later drop-in assigns another value to a plain setting of ours (``LimitMEMLOCK=64K``).

    Returns ``[{file, line, section, key, value, kind}]``.
    """
    paths = [path for path, dummy in files]
    name = ours.rsplit("/", 1)[-1]
    if ours not in paths:
        return [{"file": path, "line": None, "section": None, "key": None, "value": None, "kind": "masked"}
                for path in paths if path.rsplit("/", 1)[-1] == name]
    later = files[paths.index(ours) + 1:]
    found = []
    for section, key, value in settings:
        last = None
        for path, text in later:
            for sec, entry, entry_value, line in (parse_unit(text) if isinstance(text, str) else text):
                if sec != section or entry != key:
                    continue
                if key in LIST_SETTINGS:
                    if entry_value == "":
                        last = {"file": path, "line": line, "section": sec, "key": key, "value": "", "kind": "reset"}
                    elif last is not None and last["kind"] == "reset" and entry_value == value:
                        last = None  # put back after the reset
                else:
                    last = {"file": path, "line": line, "section": sec, "key": key, "value": entry_value,
                            "kind": "later_value"} if entry_value != value else None
        if last is not None:
            found.append(last)
    return found


def describe_dropin_override(item, ours):
    """One line for a warning or an error."""
    if item["kind"] == "masked":
        return "%s has the name of %s in a more important directory, so systemd reads it instead of ours" % (
            item["file"], ours)
    if item["kind"] == "reset":
        return "%s:%s empties %s= after %s, which drops ours" % (item["file"], item["line"], item["key"], ours)
    return "%s:%s sets %s=%s after %s, so systemd uses that value" % (
        item["file"], item["line"], item["key"], item["value"], ours)
