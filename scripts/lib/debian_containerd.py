"""Debian's own containerd binaries of one release line, verified as apt verifies them, into the cache.

    debian_containerd.py CACHE LINE SUITE [SUITE ...]      e.g.  ... /var/cache/rdma-k8s-node/containerd 1.7 trixie

Takes the first SUITE whose ``containerd`` package is of LINE (``1.6``, ``1.7``, ``2.1``): the suite's InRelease is
checked with gpgv against this machine's debian-archive-keyring, main/binary-amd64/Packages.xz against the SHA256
InRelease gives, the .deb against the SHA256 of its Packages stanza; then ``usr/bin/containerd`` and ``usr/bin/ctr``
go to CACHE/deb-<Debian version>/ (a directory that already holds both is used as it is, with no download).  Prints
that directory; exits 3 when no SUITE has a containerd of LINE (scripts/build-containerd then builds the line from
source), 1 on any other failure.

Debian's binaries are the ones real Debian nodes run (cgo, dynamically linked to glibc >= 2.34, every snapshotter
built in); fetching three packages takes seconds where building the three lines from their Go modules took 14 to 21
minutes of a fresh 2-CPU machine.  The pool keeps only the suites' current versions, so the version is read from the
index each time it is not cached, never pinned.
"""

import hashlib
import lzma
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import urllib.request

MIRROR = os.environ.get("DEBIAN_MIRROR", "https://deb.debian.org/debian")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
NAMES = ("containerd", "ctr")


def fetch(url):
    with urllib.request.urlopen(url, timeout=120) as reply:  # noqa: S310 (a fixed https mirror)
        return reply.read()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def verified_release(suite, work):
    """The signed text of the suite's InRelease (gpgv with the archive keyring), or an exception."""
    path = work / ("InRelease-" + suite)
    path.write_bytes(fetch("%s/dists/%s/InRelease" % (MIRROR, suite)))
    out = work / ("Release-" + suite)
    proc = subprocess.run(["gpgv", "--keyring", KEYRING, "--output", str(out), str(path)], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError("%s InRelease: bad or unknown signature: %s" % (suite, proc.stderr.strip()[-300:]))
    return out.read_text(encoding="utf-8")


def release_sha256(release, name):
    section = release.split("\nSHA256:\n", 1)[1]
    for line in section.splitlines():
        if not line.startswith(" "):
            break
        digest, dummy_size, member = line.split()
        if member == name:
            return digest
    raise RuntimeError("InRelease lists no %s" % name)


def packages_index(suite):
    """The text of the suite's main/binary-amd64/Packages, its InRelease signature and SHA256 checked."""
    with tempfile.TemporaryDirectory(prefix="debian-index.") as tmp:
        release = verified_release(suite, pathlib.Path(tmp))
    member = "main/binary-amd64/Packages.xz"
    packed = fetch("%s/dists/%s/%s" % (MIRROR, suite, member))
    if sha256(packed) != release_sha256(release, member):
        raise RuntimeError("%s %s: SHA256 differs from InRelease" % (suite, member))
    return lzma.decompress(packed).decode("utf-8", "replace")


def stanza(packages, package):
    for block in packages.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if fields.get("Package") == package:
            return fields
    return None


def of_line(version, line):
    """``1.7.24~ds1-6+deb13u1`` is of line ``1.7``; ``1:...`` epochs are dropped."""
    upstream = version.split(":", 1)[-1]
    return upstream.startswith(line + ".")


def main(argv):
    if len(argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    cache, line, suites = pathlib.Path(argv[1]), argv[2], argv[3:]
    for done in sorted(cache.glob("deb-%s.*" % line)):
        if all((done / name).is_file() for name in NAMES):
            print(done)
            return 0
    with tempfile.TemporaryDirectory(prefix="debian-containerd.") as tmp:
        work = pathlib.Path(tmp)
        for suite in suites:
            fields = stanza(packages_index(suite), "containerd")
            if not fields or not of_line(fields["Version"], line):
                continue
            deb = fetch("%s/%s" % (MIRROR, fields["Filename"]))
            if sha256(deb) != fields["SHA256"]:
                raise RuntimeError("%s: SHA256 differs from %s's Packages" % (fields["Filename"], suite))
            (work / "pkg.deb").write_bytes(deb)
            subprocess.run(["dpkg-deb", "-x", str(work / "pkg.deb"), str(work / "x")], check=True)
            target = cache / ("deb-" + fields["Version"])
            partial = cache / (".deb-" + fields["Version"] + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            for name in NAMES:
                shutil.copy2(work / "x/usr/bin" / name, partial / name)
            (partial / "SOURCE").write_text("Debian %s containerd %s (%s, SHA256 %s)\n"
                                            % (suite, fields["Version"], fields["Filename"], fields["SHA256"]))
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
            print(target)
            return 0
    sys.stderr.write("no containerd of line %s in %s\n" % (line, ", ".join(suites)))
    return 3


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, RuntimeError, subprocess.CalledProcessError, lzma.LZMAError, KeyError, IndexError) as exc:
        sys.stderr.write("debian_containerd: %s\n" % exc)
        sys.exit(1)
