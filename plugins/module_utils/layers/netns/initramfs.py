# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``netns`` layer's initramfs probe: does the running kernel's initramfs hold ib_core (so it loads before
/etc/modprobe.d is read, and our option only applies once the image is regenerated)?

lsinitramfs/lsinitrd unpack the whole image through shell pipelines and cpio (about 15 s for a 35 MB image in an
emulated VM); reading only the member names, in-process and stopping at the first ib_core module, costs at most
one pass of decompression (about 1 s natively for that image).  The kernel's initramfs format: newc/crc cpio
archives, uncompressed or compressed, one after another with NUL padding between them (early microcode + main
image).  The parsing is pure; :func:`initramfs_has_ib_core` and :func:`initramfs_argv` read the node.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import os
import re

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError

IB_CORE_FILES = (b"ib_core.ko", b"ib_core.ko.xz", b"ib_core.ko.zst", b"ib_core.ko.gz")
CPIO_MAGICS = (b"070701", b"070702")
CPIO_HEADER_LEN = 110
CPIO_TRAILER = b"TRAILER!!!"
# (magic, method); stdlib decompresses gzip, bzip2, xz and lzma, the others go through their own command
COMPRESSIONS = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x5d\x00\x00", "lzma"),
                (b"\x28\xb5\x2f\xfd", "zstd"), (b"\x02\x21\x4c\x18", "lz4"), (b"\x89LZO", "lzo"))
EXTERNAL_DECOMPRESSORS = {"zstd": ["zstd", "-d", "-c", "-q"], "lz4": ["lz4", "-d", "-c", "-q"],
                          "lzo": ["lzop", "-d", "-c", "-q"]}
_NON_NUL = re.compile(b"[^\x00]")


class InitramfsFormatError(Exception):
    """The image is not what the kernel would unpack, or a segment cannot be decompressed here."""


def _align4(length):
    return (length + 3) & ~3


class CpioNames:
    """Member names of newc/crc cpio archives fed in pieces of any size.

    ``feed(data)`` returns the names completed by ``data``.  With ``one_archive`` the reader stops after the first
    ``TRAILER!!!`` and keeps what follows in ``buf`` (an uncompressed segment followed by another one); otherwise
    archives may follow each other with NUL padding, as inside one decompressed segment.
    """

    def __init__(self, one_archive=False):
        self.one_archive = one_archive
        self.buf = bytearray()
        self.skip = 0            # file data still to drop
        self.in_archive = False  # between a header and the trailer
        self.done = False

    def feed(self, data):
        """Consume ``data``; return the member names whose headers it completed."""
        view = memoryview(data)
        if self.skip and not self.done:
            dropped = min(self.skip, len(view))
            self.skip -= dropped
            view = view[dropped:]
        self.buf += view
        names = []
        buf = self.buf
        while not self.done:
            if not self.in_archive:
                start = _NON_NUL.search(buf)
                if start is None:
                    del buf[:]
                    break
                del buf[:start.start()]
            if len(buf) < CPIO_HEADER_LEN:
                break
            if bytes(buf[:6]) not in CPIO_MAGICS:
                raise InitramfsFormatError("no cpio header where one must start (%r)" % bytes(buf[:6]))
            try:
                filesize = int(bytes(buf[54:62]), 16)
                namesize = int(bytes(buf[94:102]), 16)
            except ValueError as exc:
                raise InitramfsFormatError("a cpio header with non-hex sizes") from exc
            header = _align4(CPIO_HEADER_LEN + namesize)
            if len(buf) < header:
                break
            name = bytes(buf[CPIO_HEADER_LEN:CPIO_HEADER_LEN + namesize]).rstrip(b"\x00")
            del buf[:header]
            if name == CPIO_TRAILER:
                self.in_archive = False
                self.done = self.one_archive
                continue
            self.in_archive = True
            names.append(name)
            body = _align4(filesize)
            if len(buf) >= body:
                del buf[:body]
            else:
                self.skip = body - len(buf)
                del buf[:]
        return names

    def finish(self):
        """Raise unless the data ended at an archive boundary (a truncated image)."""
        if self.in_archive or self.skip:
            raise InitramfsFormatError("the image ends inside a cpio archive")


def _stdlib_decompressor(method):
    import bz2  # pylint: disable=import-outside-toplevel
    import lzma  # pylint: disable=import-outside-toplevel
    import zlib  # pylint: disable=import-outside-toplevel
    if method == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if method == "bzip2":
        return bz2.BZ2Decompressor()
    if method == "xz":
        return lzma.LZMADecompressor(lzma.FORMAT_XZ)
    if method == "lzma":
        return lzma.LZMADecompressor(lzma.FORMAT_ALONE)
    return None


def initramfs_names(read, decompress, chunk=1 << 20):
    """Yield the member names (bytes) of an initramfs image, segment by segment, as the kernel unpacks it.

    ``read(n)`` reads the image; ``decompress(method, data)`` returns the decompressed bytes of a segment the
    standard library cannot decompress (zstd, lz4, lzo), which then runs to the end of the image.
    """
    pending = b""
    while True:
        start = _NON_NUL.search(pending)
        while start is None:
            pending = read(chunk)
            if not pending:
                return
            start = _NON_NUL.search(pending)
        pending = pending[start.start():]
        while len(pending) < 6:
            more = read(chunk)
            if not more:
                break
            pending += more
        if pending[:6] in CPIO_MAGICS:
            archive = CpioNames(one_archive=True)
            data = pending
            while True:
                yield from archive.feed(data)
                if archive.done:
                    pending = bytes(archive.buf)
                    break
                data = read(chunk)
                if not data:
                    archive.finish()
                    raise InitramfsFormatError("the image ends inside an uncompressed cpio archive")
            continue
        method = next((m for magic, m in COMPRESSIONS if pending.startswith(magic)), None)
        if method is None:
            raise InitramfsFormatError("a segment that is neither cpio nor compressed (%r)" % pending[:6])
        archives = CpioNames()
        decompressor = _stdlib_decompressor(method)
        if decompressor is None:
            rest = [pending]
            while True:
                more = read(chunk)
                if not more:
                    break
                rest.append(more)
            yield from archives.feed(decompress(method, b"".join(rest)))
            archives.finish()
            return
        data = pending
        while True:
            yield from archives.feed(decompressor.decompress(data))
            if decompressor.eof:
                pending = decompressor.unused_data
                archives.finish()
                break
            data = read(chunk)
            if not data:
                raise InitramfsFormatError("the image ends inside a %s stream" % method)


def external_decompressor(module, commands):
    """``decompress(method, data)`` for initramfs_names: the method's own command as a stdin->stdout filter.

    A filter's output does not depend on whose copy runs, so the one on this PATH comes first; a pod auditing a
    mounted host without it uses the host's, chrooted.
    """
    def decompress(method, data):
        argv = list(EXTERNAL_DECOMPRESSORS[method])
        path = module.get_bin_path(argv[0])
        if path is not None:
            argv[0] = path
        elif commands.host.root != "/" and commands.find(argv[0]):
            argv = [module.get_bin_path("chroot", required=True), commands.host.root, commands.find(argv[0])] + argv[1:]
        else:
            raise InitramfsFormatError("the image is %s-compressed and %s is not installed" % (method, argv[0]))
        rc, out, err = module.run_command(argv, data=data, binary_data=True, encoding=None, check_rc=False)
        if rc != 0:
            raise InitramfsFormatError("%s failed (rc=%s): %s" % (argv[0], rc, err.decode("utf-8", "replace").strip()))
        return out
    return decompress


def initramfs_has_ib_core(module, host, commands):
    """Whether the running kernel's initramfs contains ib_core (so it loads before /etc/modprobe.d is read).

    Reads the image's member names (stops at the first ib_core module); an image that cannot be read counts as
    containing it, with a warning: regenerating needlessly costs time, missing it costs the setting.
    """
    release = host.read_attr("/proc/sys/kernel/osrelease")
    if not release:
        return False
    for image in ("/boot/initrd.img-%s" % release, "/boot/initramfs-%s.img" % release):
        if not host.exists(image):
            continue
        try:
            with os.fdopen(host.open_fd(image), "rb") as raw:  # resolved inside the root, as every node read
                return any(os.path.basename(name) in IB_CORE_FILES
                           for name in initramfs_names(raw.read, external_decompressor(module, commands)))
        except (InitramfsFormatError, EnvironmentError) as exc:
            module.warn("cannot list %s (%s); assuming ib_core is in the initramfs" % (image, exc))
            return True
    return False


def initramfs_argv(host, commands):
    """The initramfs regeneration command for the running kernel on this node."""
    release = host.read_attr("/proc/sys/kernel/osrelease") or ""
    if commands.find("update-initramfs"):
        return ["update-initramfs", "-u", "-k", release or "all"]
    if commands.find("dracut"):
        return ["dracut", "-f", "--kver", release] if release else ["dracut", "-f"]
    raise ApplyError("neither update-initramfs nor dracut is installed; cannot put the option into the initramfs")
