"""HostRoot resolves paths exactly as inside a chroot: checked against the kernel itself.

The oracle is the real thing: ``chroot(2)`` in a child process opening the same node path (root only; skipped
otherwise), and ``openat2(RESOLVE_IN_ROOT)``.  Random trees of relative and absolute links, ``..``, loops and
dangling links are generated with hypothesis; every resolution must agree with the kernel, and no read may ever
return a byte from outside the root (a sentinel sits next to it, reachable by every escape a link could try).
"""

import errno
import os
import stat

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot, _Openat2

NAMES = ["a", "b", "c", "etc", "sys"]
SENTINEL = b"OUTSIDE-THE-ROOT\n"


def _component():
    return st.sampled_from(NAMES + ["..", "."])


def _target():
    rel = st.lists(_component(), min_size=1, max_size=4).map("/".join)
    absolute = rel.map(lambda t: "/" + t)
    escape = st.sampled_from(["../../..", "../../../outside", "/../../outside", "../outside/secret"])
    return st.one_of(rel, absolute, escape)


@st.composite
def trees(draw):
    """``[(relative path, kind, payload)]``: directories, files (their own path as content) and links."""
    entries = []
    dirs = [""]
    for dummy in range(draw(st.integers(2, 14))):
        parent = draw(st.sampled_from(dirs))
        name = draw(st.sampled_from(NAMES))
        path = (parent + "/" + name).lstrip("/")
        if any(entry[0] == path for entry in entries):
            continue
        kind = draw(st.sampled_from(["dir", "file", "link", "link"]))
        if kind == "dir":
            dirs.append(path)
            entries.append((path, "dir", None))
        elif kind == "file":
            entries.append((path, "file", path.encode()))
        else:
            entries.append((path, "link", draw(_target())))
    return entries


def _build(base, entries):
    root = base / "root"
    root.mkdir()
    (base / "outside").write_bytes(SENTINEL)
    (base / "secret").write_bytes(SENTINEL)
    for path, kind, payload in entries:
        full = root / path
        if not full.parent.is_dir() or os.path.lexists(full):
            continue
        if kind == "dir":
            full.mkdir()
        elif kind == "file":
            full.write_bytes(payload)
        else:
            os.symlink(payload, full)
    return root


def _kernel_read(root, node_path):
    """What a process chrooted at ``root`` reads at ``node_path``: bytes, or the errno name of the failure."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(rfd)
        try:
            os.chroot(str(root))
            os.chdir("/")
            fd = os.open(node_path, os.O_RDONLY | os.O_NONBLOCK)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                data = b"E:DIR"
            else:
                data = b"D:" + os.read(fd, 4096)
        except OSError as exc:
            data = b"E:" + errno.errorcode.get(exc.errno, "?").encode()
        os.write(wfd, data)
        os._exit(0)
    os.close(wfd)
    out = b""
    while True:
        chunk = os.read(rfd, 4096)
        if not chunk:
            break
        out += chunk
    os.close(rfd)
    os.waitpid(pid, 0)
    return out


def _ours(host, node_path):
    try:
        data = host.read_bytes(node_path)
    except HostReadError as exc:
        if exc.details.get("errno") == errno.EISDIR:
            return b"E:DIR"
        return b"E:" + errno.errorcode.get(exc.details.get("errno") or 0, "?").encode()
    return b"E:ENOENT" if data is None else b"D:" + data


def _normalise(answer):
    # ENOTDIR and ENOENT are both "absent" to the collection (read_bytes returns the default for either)
    return b"E:ENOENT" if answer == b"E:ENOTDIR" else answer


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot(2) as the oracle needs root")


@needs_root
@pytest.mark.parametrize("use_openat2", [True, False], ids=["openat2", "python-walk"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=trees(), lookup=st.lists(_component(), min_size=1, max_size=5), leading_abs=st.booleans())
def test_reads_agree_with_a_real_chroot(tmp_path_factory, use_openat2, entries, lookup, leading_abs):
    if use_openat2 and _Openat2.get() is None:
        pytest.skip("openat2 unavailable on this kernel")
    base = tmp_path_factory.mktemp("tree")
    root = _build(base, entries)
    host = HostRoot(str(root), use_openat2=use_openat2)
    node_path = "/" + "/".join(lookup)
    ours = _ours(host, node_path)
    assert SENTINEL not in ours
    assert _normalise(ours) == _normalise(_kernel_read(root, node_path)), (entries, node_path)
    try:
        canonical = host.resolve(node_path)
    except HostReadError as exc:
        assert "symbolic links" in exc.msg and ours == b"E:ELOOP"
        canonical = None
    if canonical is not None:
        assert canonical.startswith("/") and ".." not in canonical.split("/")
        assert os.path.realpath(host.lexical(canonical)).startswith(str(root))


def test_a_loop_is_a_clear_error_not_a_hang(tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    for use in (True, False):
        host = HostRoot(str(tmp_path), use_openat2=use)
        with pytest.raises(HostReadError, match="symbolic links"):
            host.read_text("/a")
        with pytest.raises(HostReadError, match="loop at /"):
            host.chase("/a/x")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(HostReadError, match="is a FIFO, not a file"):
        HostRoot(str(tmp_path)).read_text("/fifo")


def test_a_directory_where_a_file_is_expected_is_an_error(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(HostReadError, match="is a directory, not a file"):
        HostRoot(str(tmp_path)).read_text("/d")


def test_a_huge_file_is_refused(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 2048)
    with pytest.raises(HostReadError, match="larger than 1024 bytes"):
        HostRoot(str(tmp_path)).read_bytes("/big", limit=1024)


def test_write_attr_refuses_a_link_and_a_fifo(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("sentinel\n")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(str(outside), root / "attr")
    os.mkfifo(root / "fifo")
    host = HostRoot(str(root))
    with pytest.raises(OSError):
        host.write_attr("/attr", "1")
    with pytest.raises(OSError) as info:  # O_NONBLOCK: ENXIO without a reader, never a hang
        host.write_attr("/fifo", "1")
    assert info.value.errno in (errno.ENXIO, errno.EINVAL)
    assert outside.read_text() == "sentinel\n"


def test_unlink_and_rename_never_follow_links(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("sentinel\n")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(str(outside), root / "state")
    host = HostRoot(str(root))
    host.rename("/state", "/state.saved")
    assert os.readlink(root / "state.saved") == str(outside)
    host.unlink("/state.saved")
    assert outside.read_text() == "sentinel\n" and not os.path.lexists(root / "state.saved")


def test_nul_bytes_and_relative_paths_are_refused(tmp_path):
    host = HostRoot(str(tmp_path))
    with pytest.raises(Exception, match="NUL"):
        host.read_text("/a\0b")
    with pytest.raises(Exception, match="absolute"):
        host.read_text("a")


@pytest.mark.parametrize("use_openat2", [True, False])
def test_mkdir_and_rmdir_stay_in_the_root_and_never_follow_links(tmp_path, use_openat2):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "sys/kernel/config").mkdir(parents=True)
    (root / "outside").mkdir()  # where the climbing link lands: the root's own /outside
    os.symlink("/sys/kernel/config", root / "cfg")          # an absolute link in a parent: re-rooted
    os.symlink("../../outside", root / "sys/escape")        # a relative link climbing out: stays at the root
    os.symlink(str(outside), root / "sys/kernel/config/grp")  # the last component a link: refused
    host = HostRoot(str(root), use_openat2=use_openat2)
    host.mkdir("/cfg/rdma_cm")
    assert (root / "sys/kernel/config/rdma_cm").is_dir() and list(outside.iterdir()) == []
    host.mkdir("/sys/escape/made")
    assert (root / "outside/made").is_dir() and list(outside.iterdir()) == []
    with pytest.raises(OSError) as info:
        host.mkdir("/sys/kernel/config/grp")
    assert info.value.errno == errno.EEXIST
    with pytest.raises(OSError) as info:
        host.rmdir("/sys/kernel/config/grp")
    assert info.value.errno == errno.ENOTDIR and outside.is_dir()
    host.rmdir("/cfg/rdma_cm")
    assert not (root / "sys/kernel/config/rdma_cm").exists()
    with pytest.raises(OSError) as info:
        host.rmdir("/cfg/rdma_cm")
    assert info.value.errno == errno.ENOENT
