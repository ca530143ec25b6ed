"""Debian's newest kernel of a suite, as the packages apt would install, verified as apt verifies them, into the cache.

    debian_kernel.py CACHE SUITE [FLAVOUR]        e.g.  ... /var/cache/rdma-k8s-node/kube trixie-backports

Reads the suite's ``linux-image-FLAVOUR`` metapackage (default flavour ``amd64``), the ``linux-image-<ABI>`` package it
depends on, and what that one depends on and pre-depends on: ``linux-base-<ABI>`` (System.map, config),
``linux-binary-<ABI>`` (vmlinuz), ``linux-modules-<ABI>`` and the ``linux-base`` tools (``linux-run-hooks``) of the
same suite.  The InRelease is checked with gpgv against this machine's debian-archive-keyring, the Packages index
against InRelease, each .deb against its Packages stanza (scripts/lib/debian_containerd.py's checks); the .debs go to
CACHE/kernel-<ABI>/ with ``ABI`` (the ``uname -r`` it boots as) and ``SOURCE``.  A directory that already holds a
complete download is used as it is, with no network.  Prints that directory; exits 1 on any failure.

molecule/node_vm installs it in its Debian 12 VM for the last step: Soft-RoCE devices move to a pod's network
namespace only on kernels newer than Debian 12's 6.1 (docs/kernel.md).  The version is read from the index, never
pinned: the suite keeps only its recent kernels.
"""

import lzma
import pathlib
import shutil
import sys

from debian_containerd import MIRROR, fetch, packages_index, sha256, stanza  # scripts/lib, beside this file

COMPLETE = "ABI"


def depends(fields, key="Depends"):
    """The package names of a Depends-like field; of alternatives (``a | b``), the first."""
    names = []
    for clause in fields.get(key, "").split(","):
        first = clause.split("|")[0].strip()
        if first:
            names.append(first.split()[0])
    return names


def kernel_packages(packages, flavour="amd64"):
    """(ABI, [stanza, ...]) of the newest kernel of a Packages index, in the order dpkg must install them: the
    ``linux-base`` tools first (the image pre-depends on them), then ``linux-base-<ABI>``, ``linux-binary-<ABI>``,
    ``linux-modules-<ABI>`` and ``linux-image-<ABI>``."""
    meta = stanza(packages, "linux-image-" + flavour)
    if meta is None:
        raise RuntimeError("the index has no linux-image-%s" % flavour)
    images = [name for name in depends(meta) if name.startswith("linux-image-")]
    if len(images) != 1:
        raise RuntimeError("linux-image-%s %s depends on %s, not on one linux-image-<ABI>"
                           % (flavour, meta.get("Version"), images or "no image"))
    image = stanza(packages, images[0])
    if image is None:
        raise RuntimeError("the index has no %s (linux-image-%s depends on it)" % (images[0], flavour))
    abi = images[0][len("linux-image-"):]
    wanted = ["linux-base"] if "linux-base" in depends(image, "Pre-Depends") else []
    wanted += [name for name in depends(image) if name.endswith("-" + abi)]
    found = []
    for name in wanted:
        fields = stanza(packages, name)
        if fields is None:
            raise RuntimeError("the index has no %s (%s depends on it)" % (name, images[0]))
        found.append(fields)
    names = [fields["Package"] for fields in found]
    for part in ("linux-binary-", "linux-modules-"):
        if part + abi not in names:
            raise RuntimeError("%s does not depend on %s%s" % (images[0], part, abi))
    return abi, found + [image]


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write(__doc__)
        return 2
    cache, suite = pathlib.Path(argv[1]), argv[2]
    flavour = argv[3] if len(argv) == 4 else "amd64"
    for done in sorted(cache.glob("kernel-*")):
        # kernel-7.3.4+deb13-amd64 is of flavour amd64, kernel-7.3.4+deb13-cloud-amd64 of cloud-amd64
        if done.name.split("-", 2)[-1] == flavour and (done / COMPLETE).is_file():
            print(done)
            return 0
    abi, wanted = kernel_packages(packages_index(suite), flavour)
    target = cache / ("kernel-" + abi)
    partial = cache / (".kernel-" + abi + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    source = []
    for order, fields in enumerate(wanted):
        deb = fetch("%s/%s" % (MIRROR, fields["Filename"]))
        if sha256(deb) != fields["SHA256"]:
            raise RuntimeError("%s: SHA256 differs from %s's Packages" % (fields["Filename"], suite))
        # the number keeps dpkg's order when the step installs them with a glob
        (partial / ("%d-%s" % (order, fields["Filename"].rsplit("/", 1)[1]))).write_bytes(deb)
        source.append("Debian %s %s %s (%s, SHA256 %s)"
                      % (suite, fields["Package"], fields["Version"], fields["Filename"], fields["SHA256"]))
    (partial / "SOURCE").write_text("\n".join(source) + "\n")
    (partial / COMPLETE).write_text(abi + "\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    print(target)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, RuntimeError, KeyError, IndexError, ValueError, lzma.LZMAError) as exc:
        sys.stderr.write("debian_kernel: %s\n" % exc)
        sys.exit(1)
