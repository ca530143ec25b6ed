"""Shared generators and checks of the fuzz suite.

Node text is built three ways, mixed by :func:`node_text`: from a target's grammar pieces (valid-ish input), the
same with random mutations (insert/delete/duplicate/replace), and plain hostile text (byte soup decoded with
surrogateescape, NUL bytes, odd line ends, Unicode digits and spaces, numbers of 400 to 5,000 digits, lines of up
to 200,000 characters, brackets nested 10,000 deep).  :func:`typed_only` is the property every parser must keep:
it returns or raises one of the collection's typed errors, within a time bound (no hang, no quadratic blow-up).
Ordinary properties draw lines of up to a few thousand characters; the ``huge`` ones (:func:`huge` settings) the
200,000-character lines and 10,000-level nesting, on fewer examples.
"""

import contextlib
import os
import signal
import tempfile

from hypothesis import settings
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import RdmaNodeError

#: seconds one parser call may take on any generated input (linear parsers take milliseconds on the largest)
CALL_LIMIT = 10.0

HUGE_NUMBERS = ("1" * 5000, "9" * 4301, str(10 ** 400), "-" + str(10 ** 400), "1e400", "-1e400", "1e-400", "0x" + "f" * 300,
                "18446744073709551616", "9223372036854775808", "-9223372036854775809", "nan", "inf", "-0", "00", "+1")
ODD_CHARS = ("\x00", "\ufeff", "\r\n", "\r", "\n", "\t", "\x0b", "\x0c", "\x1c", "\x1e", "\x85", "\xa0", "\u2028",
             "\u3000", "\udcff", "\udc80", "\ud800", "\x7f", "\u00b2", "\u0663", "\U0001d7d8", "\u00bd", "\ufffd",
             "\U0010ffff", '"', "'", "\\", "$", "`", "#", ";", "=", ":", ",", ".", "-", "_", "/", "*", "?", "[", "]",
             "{", "}", "(", ")", " ", "  ")


class Hang(AssertionError):
    """A call ran past :data:`CALL_LIMIT`."""


def examples(share, floor=10):
    """``share`` of the loaded profile's ``max_examples``, at least ``floor`` (and never more than the profile's)."""
    count = settings().max_examples
    return min(count, max(floor, int(count * share)))


def huge():
    """Settings of a property on huge inputs (lines of 200,000 characters, 10,000-level nesting): 2 % of the
    profile's examples, as one such example costs as much as a hundred ordinary ones."""
    return settings(max_examples=examples(0.02))


def slow():
    """Settings of the properties whose examples cost most (rich generators, a parse and an edit and a parse
    again): 20 % of the long profile's count (2,000), the ci profile's full count, so that the long run of the
    whole suite stays within about 20 minutes on two cores (docs/fuzz.md)."""
    return settings(max_examples=examples(0.2, floor=40))


@contextlib.contextmanager
def time_limit(seconds=CALL_LIMIT):
    """Raise :class:`Hang` in the block after ``seconds`` (SIGALRM: the re module checks signals, so it also stops
    a backtracking regex)."""
    def expired(signum, frame):  # pylint: disable=unused-argument
        raise Hang("call took more than %.0f s" % seconds)
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def typed_only(func, *args, **kwargs):
    """``func(*args, **kwargs)``: its result, or the typed error it raised (any other exception fails the property,
    and so does a call that runs past :data:`CALL_LIMIT`)."""
    with time_limit():
        try:
            return func(*args, **kwargs)
        except RdmaNodeError as exc:
            assert isinstance(exc.msg, str) and exc.msg, "a typed error needs a message"
            return exc


def byte_soup(max_size=200):
    """Arbitrary bytes as a node read would decode them: UTF-8 with surrogateescape (invalid bytes kept)."""
    return st.binary(max_size=max_size).map(lambda raw: raw.decode("utf-8", "surrogateescape"))


def odd_text(max_size=30):
    """Short runs of the characters parsers trip on, with arbitrary text (all of Unicode, surrogates included)."""
    return st.lists(st.one_of(st.sampled_from(ODD_CHARS), st.sampled_from(HUGE_NUMBERS), st.text(max_size=8)),
                    max_size=max_size).map("".join)


def long_line(pieces, low=200, high=1_500):
    """One piece repeated into a very long line (what makes a backtracking regex quadratic)."""
    return st.tuples(st.sampled_from(list(pieces)), st.sampled_from(list(pieces)), st.integers(low, high)).map(
        lambda t: t[0] + t[1] * max(1, t[2] // max(1, len(t[1]))) + t[0])


def nested(opener, closer="", prefix="", suffix="", low=1, high=10_000):
    """``prefix + opener * n + closer * n + suffix`` for n up to 10,000 by default (recursion depth)."""
    return st.integers(low, high).map(lambda n: prefix + opener * n + closer * n + suffix)


@st.composite
def mutated(draw, base):
    """A text from ``base`` with up to five edits: insert odd text, delete, duplicate or swap a slice."""
    text = draw(base)
    for dummy in range(draw(st.integers(0, 5))):
        op = draw(st.sampled_from(("insert", "delete", "duplicate", "swapcase", "truncate")))
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 40)))
        if op == "insert":
            text = text[:start] + draw(st.one_of(st.sampled_from(ODD_CHARS), st.sampled_from(HUGE_NUMBERS))) + text[start:]
        elif op == "delete":
            text = text[:start] + text[end:]
        elif op == "duplicate":
            text = text[:end] + text[start:end] * draw(st.integers(1, 50)) + text[end:]
        elif op == "swapcase":
            text = text[:start] + text[start:end].swapcase() + text[end:]
        else:
            text = text[:start]
    return text


def lines_of(line, max_lines=8, sep=st.sampled_from(("\n", "\n", "\n", "\r\n", "\r", "\x0b", "\x1c", "\u2028"))):
    """Several lines from the ``line`` strategy, joined with (mostly) newlines."""
    return st.lists(st.tuples(line, sep), max_size=max_lines).map(lambda items: "".join(a + b for a, b in items))


def node_text(grammar, pieces=(), max_lines=8):
    """Text a node might hold: grammar lines, mutated grammar, hostile text, very long lines of the grammar's pieces.

    ``grammar``: a strategy for one valid-ish line; ``pieces``: short tokens of the format (for long lines).
    """
    pieces = tuple(pieces) + ("a", " ", "0", "\t", "=", ":", "\\")
    valid = lines_of(grammar, max_lines)
    return st.one_of(
        valid,
        mutated(valid),
        byte_soup(),
        odd_text(),
        lines_of(st.one_of(grammar, odd_text(12)), max_lines),
        st.tuples(valid, long_line(pieces), valid).map("\n".join),
    )


class FakeHost:
    """A node behind the :class:`~._host.HostRoot` read interface, in memory: ``files`` maps node paths to text (or
    an exception instance to raise, e.g. a HostReadError), ``links`` maps node paths to link targets; directories are
    implied by the paths below them."""

    def __init__(self, files=None, links=None, dirs=()):
        self.files = dict(files or {})
        self.links = dict(links or {})
        self.dirs = set(["/"])
        for path in list(self.files) + list(self.links) + list(dirs):
            parts = path.strip("/").split("/")
            for depth in range(1, len(parts)):
                self.dirs.add("/" + "/".join(parts[:depth]))
        self.dirs.update(dirs)

    def exists(self, path):
        return path in self.files or path in self.dirs or path in self.links

    def isdir(self, path):
        return path in self.dirs

    def islink(self, path):
        return path in self.links

    def read_text(self, path, default=None):
        value = self.files.get(path)
        if isinstance(value, Exception):
            raise value
        return default if value is None else value

    def read_attr(self, path, default=None):
        text = self.read_text(path)
        return default if text is None else text.rstrip("\n").strip()

    def try_attr(self, path, default=None, problems=None):
        try:
            return self.read_attr(path, default)
        except RdmaNodeError as exc:
            if problems is not None:
                problems.append({"path": path, "error": exc.msg})
            return default

    def read_int(self, path, default=None, base=10, problems=None):
        text = self.try_attr(path, None, problems)
        if text is None or text == "":
            return default
        try:
            return int(text, base)
        except ValueError:
            if problems is not None:
                problems.append({"path": path, "error": "not an integer: %r" % text})
            return default

    def listdir(self, path):
        path = path.rstrip("/") or "/"
        prefix = "/" if path == "/" else path + "/"
        names = set()
        for entry in list(self.files) + list(self.links) + list(self.dirs):
            if entry.startswith(prefix) and entry != path:
                names.add(entry[len(prefix):].split("/", 1)[0])
        return sorted(n for n in names if n)

    def readlink(self, path):
        return self.links.get(path)

    def resolve(self, path):
        return path if self.exists(path) else None

    def follow(self, path, target=False):
        import posixpath  # pylint: disable=import-outside-toplevel
        if target is False:
            target = self.readlink(path)
        if target is None:
            return path
        if target.startswith("/"):
            return self.resolve(target)
        return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))

    def link_name(self, path):
        import posixpath  # pylint: disable=import-outside-toplevel
        target = self.readlink(path)
        return posixpath.basename(target.rstrip("/")) if target else None


def _encode(text):
    if isinstance(text, bytes):
        return text
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that escapes no byte: written as CESU-8 (invalid UTF-8 all the same)
        return text.encode("utf-8", "surrogatepass")


@contextlib.contextmanager
def node_tree(files, links=None):
    """A real node tree for :class:`~._host.HostRoot` (the facts gatherers use its whole interface): ``files`` maps
    node paths to text (written as UTF-8, surrogates as the bytes they escape), ``links`` node paths to targets."""
    from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory(prefix="fuzz-node-") as root:
        for path, text in sorted(files.items()):
            local = root + path
            try:
                os.makedirs(os.path.dirname(local), exist_ok=True)
                with open(local, "wb") as handle:
                    handle.write(_encode(text))
            except (IsADirectoryError, NotADirectoryError, FileExistsError):
                continue  # a path that is also a directory of another: the first one wins
        for path, target in sorted((links or {}).items()):
            local = root + path
            try:
                os.makedirs(os.path.dirname(local), exist_ok=True)
                os.symlink(target, local)
            except (FileExistsError, NotADirectoryError):
                continue
        yield HostRoot(root)
