"""scripts/lib/debian_containerd.py, the reader of Debian's archive index that scripts/build-containerd --required uses
(the download and gpgv check run in scripts/setup on every fresh machine; here the parsing, on text from Debian's
own trixie InRelease and Packages of 2026-12-02, deb.debian.org)."""

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "lib" / "debian_containerd.py"
SPEC = importlib.util.spec_from_file_location("debian_containerd", SCRIPT)
dc = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(dc)

# the SHA256 part of trixie's InRelease (its first lines and the Packages members of main/binary-amd64)
RELEASE = """Origin: Debian
Suite: stable
Codename: trixie
MD5Sum:
 0ee8b2a4e5ec2b7e4e4e7f6f8e3f1d2a 56634892 main/binary-amd64/Packages
SHA256:
 2efd6103f013081f8118f4c9f228739bc97bff2e4e1de496f80458c7e72a24ac 56634892 main/binary-amd64/Packages
 4967137e99422deb3b08e4eab8d6e756abfc826ef2c3744f50c1ab8ed053bf7e 13335627 main/binary-amd64/Packages.gz
 be3d7d96a040eda0505c1808cccc67f183bbc05dff0842c50f88e6c396557412  9679304 main/binary-amd64/Packages.xz
"""
# two stanzas of trixie's main/binary-amd64/Packages (containerd's Built-Using left out)
PACKAGES = """Package: containerd-shim
Version: 9.9
Filename: pool/main/c/other/other_9.9_amd64.deb
SHA256: 00

Package: containerd
Version: 1.7.24~ds1-6+deb13u1
Installed-Size: 118977
Maintainer: Debian Go Packaging Team <team+pkg-go@tracker.debian.org>
Architecture: amd64
Depends: runc (>= 0.1.0~), libc6 (>= 2.34)
Description: open and reliable container runtime
Tag: admin::virtualization, implemented-in::TODO, implemented-in::python,
 role::program, suite::openstack, system::cloud, system::virtual
Section: admin
Filename: pool/main/c/containerd/containerd_1.7.24~ds1-6+deb13u1_amd64.deb
Size: 32784720
SHA256: ed708deb96fe476a3bce4efa5c0538dfbcf717ab9a7c7944ba7260342c25899c
"""


def test_release_gives_the_sha256_of_the_packages_member_not_its_md5():
    assert dc.release_sha256(RELEASE, "main/binary-amd64/Packages.xz") == \
        "be3d7d96a040eda0505c1808cccc67f183bbc05dff0842c50f88e6c396557412"
    assert dc.release_sha256(RELEASE, "main/binary-amd64/Packages") == \
        "2efd6103f013081f8118f4c9f228739bc97bff2e4e1de496f80458c7e72a24ac"
    with pytest.raises(RuntimeError, match="lists no main/binary-arm64/Packages.xz"):
        dc.release_sha256(RELEASE, "main/binary-arm64/Packages.xz")


def test_the_containerd_stanza_is_found_by_its_exact_package_name():
    fields = dc.stanza(PACKAGES, "containerd")
    assert fields["Version"] == "1.7.24~ds1-6+deb13u1"
    assert fields["Filename"] == "pool/main/c/containerd/containerd_1.7.24~ds1-6+deb13u1_amd64.deb"
    assert fields["SHA256"] == "ed708deb96fe476a3bce4efa5c0538dfbcf717ab9a7c7944ba7260342c25899c"
    assert dc.stanza(PACKAGES, "runc") is None


@pytest.mark.parametrize("version, line, of", [
    ("1.7.24~ds1-6+deb13u1", "1.7", True), ("1.6.20~ds1-1+deb12u3", "1.6", True), ("2.1.9+ds1-5", "2.1", True),
    ("2.1.9+ds1-5", "2.2", False), ("1.7.24~ds1-6", "1.6", False), ("1:1.7.2-1", "1.7", True),
    ("1.70.1-1", "1.7", False), ("21.1-1", "2.1", False),
])
def test_a_version_is_of_a_line_by_its_upstream_major_and_minor(version, line, of):
    assert dc.of_line(version, line) is of


def test_a_cached_line_is_used_without_the_network(tmp_path, capsys, monkeypatch):
    done = tmp_path / "deb-1.7.24~ds1-6+deb13u1"
    done.mkdir()
    for name in dc.NAMES:
        (done / name).write_text("")
    (tmp_path / "deb-1.6.20~ds1-1").mkdir()  # another line, and incomplete: neither is taken

    def no_network(url):
        raise AssertionError("fetched %s" % url)

    monkeypatch.setattr(dc, "fetch", no_network)
    assert dc.main(["debian_containerd.py", str(tmp_path), "1.7", "trixie"]) == 0
    assert capsys.readouterr().out.strip() == str(done)
    with pytest.raises(AssertionError, match="fetched .*/dists/bookworm/InRelease"):
        dc.main(["debian_containerd.py", str(tmp_path), "1.6", "bookworm"])
