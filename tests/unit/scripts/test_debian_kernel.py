"""scripts/lib/debian_kernel.py, which picks the packages of Debian's newest backported kernel for molecule/node_vm's
exclusive-mode step (scripts/build-kube downloads and gpgv-checks them on every fresh machine; here the choice, on
stanzas of Debian's trixie-backports main/binary-amd64/Packages of 2026-12-03, deb.debian.org, fields the script does
not read left out)."""

import importlib.util
import pathlib
import re
import sys

import pytest

LIB = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "lib"
sys.path.insert(0, str(LIB))  # the script imports debian_containerd from its own directory
try:
    SPEC = importlib.util.spec_from_file_location("debian_kernel", LIB / "debian_kernel.py")
    dk = importlib.util.module_from_spec(SPEC)
    SPEC.loader.exec_module(dk)
finally:
    sys.path.remove(str(LIB))

# (a backslash joins the image's Depends line, one line in the index)
PACKAGES = """Package: linux-base-7.3.4+deb13-amd64
Source: linux
Version: 7.3.4-1~bpo13+1
Filename: pool/main/l/linux/linux-base-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb
SHA256: 5663505495b5c90be94af42105c7b28629802516779102dac48d5a00cc00fccf

Package: linux-modules-7.3.4+deb13-amd64
Source: linux
Version: 7.3.4-1~bpo13+1
Depends: kmod, linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)
Filename: pool/main/l/linux/linux-modules-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb
SHA256: b3ea01922c9f133767a83cf6891c19b3693858ded617bf22d1e34f95382c08ea

Package: linux-base
Version: 4.17~bpo13+1
Depends: debconf (>= 0.5) | debconf-2.0
Filename: pool/main/l/linux-base/linux-base_4.17~bpo13+1_all.deb
SHA256: 9c1a30ccf8d94672d8a89425fe419d954096718527155fd58974bd1a1043c55f

Package: linux-binary-7.3.4+deb13-amd64
Source: linux-signed-amd64 (7.3.4+1~bpo13+1)
Version: 7.3.4-1~bpo13+1
Depends: linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)
Filename: pool/main/l/linux-signed-amd64/linux-binary-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb
SHA256: 7e3248d03a84dcdda88c567aa8c4038f2e7795d2dd167b112c56f8901b6f513f

Package: linux-image-7.3.4+deb13-amd64
Source: linux-signed-amd64 (7.3.4+1~bpo13+1)
Version: 7.3.4-1~bpo13+1
Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), \
linux-binary-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), linux-modules-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)
Pre-Depends: linux-base (>= 4.17~)
Filename: pool/main/l/linux-signed-amd64/linux-image-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb
SHA256: 7a6ff1ee63d0aafedbab6a507939ab6bce618f8fda1b3f0c42b78678ec661844

Package: linux-image-amd64
Source: linux-signed-amd64 (7.3.4+1~bpo13+1)
Version: 7.3.4-1~bpo13+1
Depends: linux-base-amd64 (= 7.3.4-1~bpo13+1), linux-image-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), linux-modules-amd64 (= 7.3.4-1~bpo13+1)
Filename: pool/main/l/linux-signed-amd64/linux-image-amd64_7.3.4-1~bpo13+1_amd64.deb
SHA256: 0d0df6eaed28e664cc0e95edb872112fcc3165cdbb011e5c56a4d3b104ef87d8
"""


def test_the_metapackage_leads_to_the_kernel_and_its_packages_in_dpkg_order():
    abi, found = dk.kernel_packages(PACKAGES)
    assert abi == "7.3.4+deb13-amd64"
    # the linux-base tools first: linux-image-<ABI> pre-depends on them (dpkg refuses it before they are configured)
    assert [fields["Package"] for fields in found] == [
        "linux-base", "linux-base-7.3.4+deb13-amd64", "linux-binary-7.3.4+deb13-amd64",
        "linux-modules-7.3.4+deb13-amd64", "linux-image-7.3.4+deb13-amd64"]
    assert found[3]["SHA256"] == "b3ea01922c9f133767a83cf6891c19b3693858ded617bf22d1e34f95382c08ea"


def test_depends_keeps_the_first_of_alternatives_and_drops_versions():
    fields = {"Depends": "dracut | initramfs-tools (>= 0.120+deb8u2), kmod , linux-base-7.3.4+deb13-amd64 (= 7.3.4-1)"}
    assert dk.depends(fields) == ["dracut", "kmod", "linux-base-7.3.4+deb13-amd64"]
    assert dk.depends({}, "Pre-Depends") == []


def test_another_flavour_is_looked_up_by_its_metapackage():
    cloud = PACKAGES.replace("linux-image-amd64", "linux-image-cloud-amd64")
    assert dk.kernel_packages(cloud, "cloud-amd64")[0] == "7.3.4+deb13-amd64"
    with pytest.raises(RuntimeError, match="the index has no linux-image-amd64"):
        dk.kernel_packages(cloud)


@pytest.mark.parametrize("edit, message", [
    # the image package of the metapackage is missing from the index
    (lambda text: text.replace("Package: linux-image-7.3.4+deb13-amd64\n", "Package: gone\n"),
     r"the index has no linux-image-7\.3\.4\+deb13-amd64 \(linux-image-amd64 depends on it\)"),
    # a package the image depends on is missing
    (lambda text: text.replace("Package: linux-modules-7.3.4+deb13-amd64\n", "Package: gone\n"),
     r"the index has no linux-modules-7\.3\.4\+deb13-amd64 \(linux-image-7\.3\.4\+deb13-amd64 depends on it\)"),
    # Debian 12's layout: the image package holds vmlinuz and the modules itself
    (lambda text: text.replace(", linux-binary-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)", ""),
     r"linux-image-7\.3\.4\+deb13-amd64 does not depend on linux-binary-7\.3\.4\+deb13-amd64"),
    # a metapackage that names no image (or two)
    (lambda text: text.replace("linux-image-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), linux-modules-amd64",
                               "linux-modules-amd64"),
     r"linux-image-amd64 7\.3\.4-1~bpo13\+1 depends on no image, not on one linux-image-<ABI>"),
])
def test_an_index_without_a_whole_kernel_is_refused_by_name(edit, message):
    with pytest.raises(RuntimeError, match=message):
        dk.kernel_packages(edit(PACKAGES))


def test_a_complete_download_is_used_without_the_network(tmp_path, capsys, monkeypatch):
    done = tmp_path / "kernel-7.3.4+deb13-amd64"
    done.mkdir()
    (done / "ABI").write_text("7.3.4+deb13-amd64\n")
    (tmp_path / "kernel-7.2.12+deb13-amd64").mkdir()       # an interrupted download: no ABI file
    cloud = tmp_path / "kernel-7.3.4+deb13-cloud-amd64"    # another flavour
    cloud.mkdir()
    (cloud / "ABI").write_text("7.3.4+deb13-cloud-amd64\n")

    def no_network(*args):
        raise AssertionError("fetched %s" % (args,))

    monkeypatch.setattr(dk, "packages_index", no_network)
    assert dk.main(["debian_kernel.py", str(tmp_path), "trixie-backports"]) == 0
    assert capsys.readouterr().out == "%s\n" % done
    assert dk.main(["debian_kernel.py", str(tmp_path), "trixie-backports", "cloud-amd64"]) == 0
    assert capsys.readouterr().out == "%s\n" % cloud


def test_a_download_lands_whole_with_its_sources(tmp_path, capsys, monkeypatch):
    debs = {}

    def fetch(url):
        debs[url] = ("deb of " + url).encode()
        return debs[url]

    def index(suite):
        assert suite == "trixie-backports"
        stanzas = []
        for block in PACKAGES.split("\n\n"):    # each SHA256 made the digest of what fetch returns for its file
            url = "%s/%s" % (dk.MIRROR, re.search(r"^Filename: (.*)$", block, re.M).group(1))
            stanzas.append(re.sub(r"^SHA256: .*$", "SHA256: " + dk.sha256(("deb of " + url).encode()), block,
                                  flags=re.M))
        return "\n\n".join(stanzas)

    monkeypatch.setattr(dk, "fetch", fetch)
    monkeypatch.setattr(dk, "packages_index", index)
    assert dk.main(["debian_kernel.py", str(tmp_path), "trixie-backports"]) == 0
    target = tmp_path / "kernel-7.3.4+deb13-amd64"
    assert capsys.readouterr().out == "%s\n" % target
    assert sorted(path.name for path in target.iterdir()) == [
        "0-linux-base_4.17~bpo13+1_all.deb", "1-linux-base-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb",
        "2-linux-binary-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb",
        "3-linux-modules-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb",
        "4-linux-image-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb", "ABI", "SOURCE"]
    assert (target / "ABI").read_text() == "7.3.4+deb13-amd64\n"
    assert (target / "SOURCE").read_text().splitlines()[0].startswith(
        "Debian trixie-backports linux-base 4.17~bpo13+1 (pool/main/l/linux-base/linux-base_4.17~bpo13+1_all.deb")
    assert not list(tmp_path.glob(".kernel-*"))


def test_a_deb_that_differs_from_its_stanza_leaves_no_kernel_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(dk, "fetch", lambda url: b"tampered")
    monkeypatch.setattr(dk, "packages_index", lambda suite: PACKAGES)
    with pytest.raises(RuntimeError, match=r"linux-base_4\.17~bpo13\+1_all\.deb: SHA256 differs from trixie-backports"):
        dk.main(["debian_kernel.py", str(tmp_path), "trixie-backports"])
    assert not (tmp_path / "kernel-7.3.4+deb13-amd64").exists()
