"""openpgp_fingerprints against GnuPG's own fingerprints of keys it generated (ed25519, RSA, several keys per block),
and against damaged or wrong input."""

import base64
import os
import shutil
import subprocess

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.filter.openpgp import crc24, openpgp_fingerprints

GPG = shutil.which("gpg")


def gpg(home, *args, data=None):
    env = dict(os.environ, GNUPGHOME=str(home))
    return subprocess.run([GPG, "--batch", *args], env=env, input=data, capture_output=True, check=True).stdout


@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    """Two throw-away keys (ed25519 and RSA 2048 with a subkey) and their fingerprints as gpg reports them."""
    if GPG is None:
        pytest.skip("gpg (GnuPG) is not installed")
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    gpg(home, "--passphrase", "", "--quick-gen-key", "test one <one@rdma-k8s-node.invalid>", "ed25519", "sign", "never")
    gpg(home, "--passphrase", "", "--quick-gen-key", "test two <two@rdma-k8s-node.invalid>", "rsa2048", "sign,cert",
        "never")
    listing = gpg(home, "--with-colons", "--list-keys").decode()
    primaries = []
    take = False
    for line in listing.splitlines():
        fields = line.split(":")
        if fields[0] in ("pub", "sub"):
            take = fields[0] == "pub"
        elif fields[0] == "fpr" and take:
            primaries.append(fields[9])
            take = False
    assert len(primaries) == 2
    yield home, primaries


def test_fingerprints_match_gnupg(keyring):
    home, primaries = keyring
    for fpr in primaries:
        armored = gpg(home, "--armor", "--export", fpr).decode()
        assert openpgp_fingerprints(armored) == [fpr]
    both = gpg(home, "--armor", "--export").decode()
    assert openpgp_fingerprints(both) == primaries
    # two blocks one after the other (cat key1.asc key2.asc), CRLF line ends, bytes
    joined = "".join(gpg(home, "--armor", "--export", f).decode() for f in primaries)
    assert openpgp_fingerprints(joined.replace("\n", "\r\n").encode()) == primaries


def test_gnupg_show_keys_agrees(keyring, tmp_path):
    """gpg --show-keys (what a person runs on the key file) prints the same fingerprint."""
    home, primaries = keyring
    path = tmp_path / "key.asc"
    path.write_bytes(gpg(home, "--armor", "--export", primaries[1]))
    shown = gpg(home, "--with-colons", "--show-keys", str(path)).decode()
    assert primaries[1] in shown and openpgp_fingerprints(path.read_text()) == [primaries[1]]


def test_damaged_key_is_refused(keyring):
    home, primaries = keyring
    armored = gpg(home, "--armor", "--export", primaries[0]).decode()
    lines = armored.splitlines()
    body = [i for i, line in enumerate(lines) if len(line) == 64][0]
    flipped = list(lines)
    flipped[body] = ("B" if lines[body][10] == "A" else "A").join((lines[body][:10], lines[body][11:]))
    with pytest.raises(AnsibleFilterError, match="checksum does not match"):
        openpgp_fingerprints("\n".join(flipped))
    with pytest.raises(AnsibleFilterError, match="no END line"):
        openpgp_fingerprints("\n".join(lines[:-1]))


def test_truncated_packet_is_refused(keyring):
    home, primaries = keyring
    binary = gpg(home, "--export", primaries[1])
    short = base64.b64encode(binary[:len(binary) // 2]).decode()
    text = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n%s\n-----END PGP PUBLIC KEY BLOCK-----\n" % short
    with pytest.raises(AnsibleFilterError, match="runs past the end"):
        openpgp_fingerprints(text)


@pytest.mark.parametrize("text, message", [
    ("", "no '-----BEGIN PGP PUBLIC KEY BLOCK-----'"),
    ("<html>404 Not Found</html>", "no '-----BEGIN PGP PUBLIC KEY BLOCK-----'"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "not valid base64"),
    # a user ID packet only (tag 13): no key in it
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n%s\n-----END PGP PUBLIC KEY BLOCK-----\n"
     % base64.b64encode(b"\xb4\x03abc").decode(), "holds no public key"),
    # a v3 public key packet (old format, tag 6)
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n%s\n-----END PGP PUBLIC KEY BLOCK-----\n"
     % base64.b64encode(b"\x98\x02\x03\x00").decode(), "version 3 keys are not supported"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n%s\n-----END PGP PUBLIC KEY BLOCK-----\n"
     % base64.b64encode(b"\x00\x01").decode(), "not a packet header"),
])
def test_not_a_key(text, message):
    with pytest.raises(AnsibleFilterError, match=message):
        openpgp_fingerprints(text)
    with pytest.raises(AnsibleFilterError, match="expects the armored key as a string"):
        openpgp_fingerprints(None)


def test_v6_and_new_format_lengths():
    """A v6 key packet in new packet format with a two-octet length: SHA-256 over 0x9b, a 4-octet length, the body
    (RFC 9580 5.5.4.3); the body here is synthetic, the rule is what is checked."""
    import hashlib  # pylint: disable=import-outside-toplevel

    body = b"\x06" + bytes(range(256))
    length = len(body) - 192
    packet = bytes([0xC6, (length >> 8) + 192, length & 0xFF]) + body
    text = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n%s\n=%s\n-----END PGP PUBLIC KEY BLOCK-----\n" % (
        base64.b64encode(packet).decode(), base64.b64encode(crc24(packet).to_bytes(3, "big")).decode())
    want = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    assert openpgp_fingerprints(text) == [want]


def test_crc24_known_value():
    assert crc24(b"") == 0xB704CE
    assert crc24(b"123456789") == 0x21CF02  # the CRC-24/OPENPGP check value
