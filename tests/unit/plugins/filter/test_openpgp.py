"""openpgp_fingerprints and openpgp_key against GnuPG's own keys and fingerprints (ed25519 with subkeys, RSA, several
keys per block), against damaged or wrong input, and against key files built to smuggle a second key past the
fingerprint check (apt and gpg read blocks this parser once ignored). The canonical copy openpgp_key returns - what
the doca_ofed role installs - is checked with the real gpgv, read the way apt 2.6 reads an .asc keyring."""

import base64
import os
import re
import shutil
import subprocess

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.rdma.k8s_node.plugins.filter.openpgp import (
    FilterModule, armor, crc24, openpgp_fingerprints, openpgp_key, packets)

GPG = shutil.which("gpg")
GPGV = shutil.which("gpgv")
APT_KEY = "/usr/bin/apt-key"

BEGIN, END = "-----BEGIN PGP PUBLIC KEY BLOCK-----", "-----END PGP PUBLIC KEY BLOCK-----"


def gpg(home, *args, data=None):
    env = dict(os.environ, GNUPGHOME=str(home))
    return subprocess.run([GPG, "--batch", *args], env=env, input=data, capture_output=True, check=True).stdout


def fingerprints(home):
    """``[(primary, [subkeys])]`` as gpg lists them."""
    keys = []
    kind = None
    for line in gpg(home, "--with-colons", "--list-keys").decode().splitlines():
        fields = line.split(":")
        if fields[0] in ("pub", "sub"):
            kind = fields[0]
        elif fields[0] == "fpr" and kind == "pub":
            keys.append((fields[9], []))
        elif fields[0] == "fpr" and kind == "sub":
            keys[-1][1].append(fields[9])
    return keys


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Throw-away keys: ``pinned`` (ed25519 primary, a signing and an encryption subkey), ``rsa`` (RSA 2048, primary
    only) and ``attacker`` (ed25519 with a signing subkey)."""
    if GPG is None:
        pytest.skip("gpg (GnuPG) is not installed")
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    for uid, algo in (("pinned <pinned@rdma-k8s-node.invalid>", "ed25519"),
                      ("rsa <rsa@rdma-k8s-node.invalid>", "rsa2048"),
                      ("attacker <attacker@rdma-k8s-node.invalid>", "ed25519")):
        gpg(home, "--passphrase", "", "--quick-gen-key", uid, algo, "sign,cert", "never")
    primaries = [fpr for fpr, dummy in fingerprints(home)]
    gpg(home, "--passphrase", "", "--quick-add-key", primaries[0], "ed25519", "sign", "never")
    gpg(home, "--passphrase", "", "--quick-add-key", primaries[0], "cv25519", "encr", "never")
    gpg(home, "--passphrase", "", "--quick-add-key", primaries[2], "ed25519", "sign", "never")
    listed = fingerprints(home)
    assert [len(subs) for dummy, subs in listed] == [2, 0, 1]
    yield {"home": home, "pinned": listed[0][0], "pinned_sign_sub": listed[0][1][0], "rsa": listed[1][0],
           "attacker": listed[2][0], "attacker_sub": listed[2][1][0]}


def export(keys, name, *options):
    return gpg(keys["home"], *options, "--export", keys[name]).decode() if options else \
        gpg(keys["home"], "--export", keys[name])


def retitle(armored, title):
    return armored.replace("BEGIN PGP PUBLIC KEY BLOCK", "BEGIN " + title).replace(
        "END PGP PUBLIC KEY BLOCK", "END " + title)


def test_fingerprints_match_gnupg(keys):
    for name in ("pinned", "rsa", "attacker"):
        assert openpgp_fingerprints(export(keys, name, "--armor")) == [keys[name]]
    # several keys in one block (gpg --armor --export A B): every primary, in block order; CRLF line ends, bytes
    both = gpg(keys["home"], "--armor", "--export", keys["pinned"], keys["rsa"]).decode()
    assert openpgp_fingerprints(both) == [keys["pinned"], keys["rsa"]]
    assert openpgp_fingerprints(both.replace("\n", "\r\n").encode()) == [keys["pinned"], keys["rsa"]]
    assert openpgp_key(both)["fingerprints"] == [keys["pinned"], keys["rsa"]]


def test_gnupg_show_keys_agrees(keys, tmp_path):
    """gpg --show-keys (what a person runs on the key file) prints the same fingerprint."""
    path = tmp_path / "key.asc"
    path.write_text(export(keys, "rsa", "--armor"))
    shown = gpg(keys["home"], "--with-colons", "--show-keys", str(path)).decode()
    assert keys["rsa"] in shown and openpgp_fingerprints(path.read_text()) == [keys["rsa"]]


def test_canonical_copy_holds_exactly_the_checked_packets(keys):
    """Armor headers, indentation, CRLF, blank lines around the block: the copy is GnuPG's own export, byte for byte,
    and its packets are the key's packets, nothing else."""
    plain = export(keys, "pinned", "--armor")
    lines = plain.splitlines()
    assert lines[1] == "", "gpg 2 writes no armor headers"
    noisy = "\r\n".join(["", "   "] + ["  " + lines[0], "Version: GnuPG v1", "Comment: NVIDIA"] + lines[1:]
                        + ["", ""])
    key = openpgp_key(noisy)
    assert key == {"fingerprints": [keys["pinned"]], "armored": plain, "error": ""}
    binary = export(keys, "pinned")
    assert [raw for dummy, dummy2, raw in packets(binary)] == \
        [raw for dummy, dummy2, raw in packets(base64.b64decode("".join(key["armored"].splitlines()[2:-2])))]
    assert gpg(keys["home"], "--dearmor", data=key["armored"].encode()) == binary
    # a block without the checksum line (optional since RFC 9580) gets one
    assert openpgp_key("\n".join(line for line in lines if not line.startswith("=")))["armored"] == plain


def test_damaged_key_is_refused(keys):
    lines = export(keys, "rsa", "--armor").splitlines()
    body = [i for i, line in enumerate(lines) if len(line) == 64][0]
    flipped = list(lines)
    flipped[body] = ("B" if lines[body][10] == "A" else "A").join((lines[body][:10], lines[body][11:]))
    with pytest.raises(AnsibleFilterError, match="checksum does not match"):
        openpgp_fingerprints("\n".join(flipped))
    with pytest.raises(AnsibleFilterError, match="has no '-----END PGP PUBLIC KEY BLOCK-----' line"):
        openpgp_fingerprints("\n".join(lines[:-1]))


def test_truncated_packet_is_refused(keys):
    binary = export(keys, "rsa")
    with pytest.raises(AnsibleFilterError, match="runs past the end"):
        openpgp_fingerprints(armor(binary[:len(binary) // 2]))


# --- the reviewer's attacks: a second key in the file, where apt or gpg read it and the old parser did not ---

def _attack_files(keys):
    pinned = export(keys, "pinned", "--armor")
    attacker = export(keys, "attacker", "--armor")
    return {
        # apt 2.6 (apt-key's awk: /^-----BEGIN/) dearmors every block, whatever its title
        "signature title": pinned + retitle(attacker, "PGP SIGNATURE"),
        # gpg --show-keys (dnf's key import) lists a public key under this title
        "private key title": pinned + retitle(attacker, "PGP PRIVATE KEY BLOCK"),
        # newer apt strips each line before looking for -----BEGIN
        "indented block": pinned + "".join("  " + line + "\n" for line in attacker.splitlines()),
        "second public block": pinned + attacker,
        "attacker first": attacker + retitle(pinned, "PGP MESSAGE"),
        "armor line inside": pinned.replace("\n=", "\n-----BEGIN PGP SIGNATURE-----\n=", 1),
    }


@pytest.mark.parametrize("attack, message", [
    ("signature title", r"line \d+ \(-----BEGIN PGP SIGNATURE-----\) is another armor line"),
    ("private key title", r"line \d+ \(-----BEGIN PGP PRIVATE KEY BLOCK-----\) is another armor line"),
    ("indented block", "2 '-----BEGIN PGP PUBLIC KEY BLOCK-----' lines: exactly one key block"),
    ("second public block", "2 '-----BEGIN PGP PUBLIC KEY BLOCK-----' lines"),
    ("attacker first", "another armor line"),
    ("armor line inside", "another armor line"),
])
def test_a_smuggled_second_key_is_refused(keys, attack, message):
    text = _attack_files(keys)[attack]
    with pytest.raises(AnsibleFilterError, match=message):
        openpgp_fingerprints(text)
    with pytest.raises(AnsibleFilterError, match="^openpgp_key: .*" + message):
        openpgp_key(text)
    refused = openpgp_key(text, errors="return")
    assert refused["fingerprints"] == [] and refused["armored"] == "" and re.search(message, refused["error"])


def test_the_attacks_are_real(keys, tmp_path):
    """What the refused files would do: gpg --show-keys lists the attacker's key under the PRIVATE KEY title, and
    apt 2.6's own dearmor (the awk script of /usr/bin/apt-key) hands it to gpgv under the SIGNATURE title."""
    files = _attack_files(keys)
    path = tmp_path / "private-title.asc"
    path.write_text(files["private key title"])
    shown = gpg(keys["home"], "--with-colons", "--show-keys", str(path)).decode()
    assert keys["pinned"] in shown and keys["attacker"] in shown
    keyring = apt26_dearmor(files["signature title"])
    assert {fpr for fpr, dummy, dummy2 in keyring_primaries(keyring)} == {keys["pinned"], keys["attacker"]}
    if GPGV:
        assert gpgv(keys, tmp_path, keyring, "attacker") == 0, "the attack the filter stops"


def test_another_primary_key_in_the_block_is_reported(keys):
    """Two primary keys in one block are both returned: the role's pin check then refuses the one not pinned."""
    block = armor(export(keys, "pinned") + export(keys, "attacker"))
    assert openpgp_fingerprints(block) == [keys["pinned"], keys["attacker"]]


def _split(binary):
    return [(tag, raw) for tag, dummy, raw in packets(binary)]


def _grafted_subkey(keys):
    """The pinned key's packets with the attacker's signing subkey and its binding signature appended."""
    attacker = _split(export(keys, "attacker"))
    sub = [i for i, (tag, dummy) in enumerate(attacker) if tag == 14][0]
    return export(keys, "pinned") + attacker[sub][1] + attacker[sub + 1][1]


@pytest.mark.parametrize("build, message", [
    (lambda k, p: b"".join(raw for dummy, raw in p) + b"\xca\x03PGP", r"packet \d+ is a marker packet \(tag 10\)"),
    (lambda k, p: p[0][1] + b"\xb0\x02\x00\x00" + b"".join(raw for dummy, raw in p[1:]),
     r"packet 2 is a trust packet \(tag 12\)"),
    (lambda k, p: gpg(k["home"], "--export-secret-keys", k["attacker"]), r"packet 1 is a secret key packet"),
    (lambda k, p: b"".join(raw for dummy, raw in p[2:]), r"packet 1 is a signature packet \(tag 2\)"),
    (lambda k, p: b"".join(raw for tag, raw in p if tag != 2 or raw is not _after(p, 14)),
     "has no binding signature"),
    (lambda k, p: b"".join(raw for dummy, raw in p) + [raw for tag, raw in p if tag == 13][0],
     "a user ID after a subkey"),
    (lambda k, p: _grafted_subkey(k), "names the issuer .*, not its primary key"),
    # a binding signature whose hashed area ends inside a two-octet subpacket length
    (lambda k, p: _upto_subkey(p) + b"\x88\x09\x04\x18\x16\x08\x00\x01\xc0\x00\x00",
     "a malformed signature subpacket"),
    (lambda k, p: _upto_subkey(p) + b"\x88\x05\x04\x18\x16\x08\x00", "a truncated signature packet"),
    (lambda k, p: b"\xb4\x03abc", r"packet 1 is a user ID packet"),
    (lambda k, p: b"\x9b\x00", "indeterminate-length packet"),
    (lambda k, p: b"\xc6\xe1\x00", "partial body lengths"),
    (lambda k, p: b"\x98\x02\x03\x00", "version 3 keys are not supported"),
    (lambda k, p: b"\x00\x01", "not a packet header"),
])
def test_packets_outside_a_transferable_public_key_are_refused(keys, build, message):
    text = armor(build(keys, _split(export(keys, "pinned"))))
    with pytest.raises(AnsibleFilterError, match=message):
        openpgp_key(text)


def test_damaged_packets_fail_cleanly(keys):
    """Truncated and bit-flipped keys (fixed seed) either parse or fail with OpenPGPError, never another exception
    (the role reports the error with errors='return')."""
    import random  # pylint: disable=import-outside-toplevel

    binary = export(keys, "pinned")
    rng = random.Random(9)
    cases = [binary[:cut] for cut in range(len(binary))]
    for dummy in range(800):
        data = bytearray(binary)
        for dummy2 in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        cases.append(bytes(data))
    refused = 0
    for data in cases:
        result = openpgp_key(armor(data), errors="return")
        refused += bool(result["error"])
        assert bool(result["error"]) != bool(result["armored"])
    assert refused > len(binary)


def _upto_subkey(split):
    """The pinned key's packets up to and with its first subkey (the binding signature left out)."""
    index = [i for i, (tag, dummy) in enumerate(split) if tag == 14][0]
    return b"".join(raw for dummy, raw in split[:index + 1])


def _after(split, tag):
    """The raw packet right after the first packet of ``tag`` (the first subkey's binding signature)."""
    index = [i for i, (t, dummy) in enumerate(split) if t == tag][0]
    return split[index + 1][1]


@pytest.mark.parametrize("text, message", [
    ("", "no '-----BEGIN PGP PUBLIC KEY BLOCK-----'"),
    ("<html>404 Not Found</html>", "no '-----BEGIN PGP PUBLIC KEY BLOCK-----'"),
    ("%s\n\n!!!!\n%s\n" % (BEGIN, END), "line 3 is not base64 key data"),
    ("%s\n\nxA==\nmQ==\n%s\n" % (BEGIN, END), "not valid base64"),
    ("%s\n\n%s\n" % (BEGIN, END), "the key block is empty"),
    ("%s\n%s\n\n" % (END, BEGIN), "has no '-----END"),
    ("see below\n%s\n\nmQ==\n%s\n" % (BEGIN, END), r"line 1 is text outside the key block \('see below'\)"),
    ("%s\n\nmQ==\n%s\n# trailing\n" % (BEGIN, END), "line 5 is text outside the key block"),
    ("%s\n\nmQ==\n\nmQ==\n%s\n" % (BEGIN, END), "a blank line inside the key data"),
    ("%s\n\nmQ==\n=AAAA\nmQ==\n%s\n" % (BEGIN, END), "data after the armor checksum line"),
    ("%s\n\nmQ==\n%s\n%s\n" % (BEGIN, END, END), r"line 5 \(-----END PGP PUBLIC KEY BLOCK-----\) is another armor"),
])
def test_not_one_key_block(text, message):
    with pytest.raises(AnsibleFilterError, match=message):
        openpgp_fingerprints(text)
    assert re.search(message, openpgp_key(text, errors="return")["error"])


def test_wrong_arguments():
    with pytest.raises(AnsibleFilterError, match="expects the armored key as a string"):
        openpgp_fingerprints(None)
    with pytest.raises(AnsibleFilterError, match="openpgp_key expects the armored key as a string"):
        openpgp_key(42, errors="return")
    with pytest.raises(AnsibleFilterError, match="errors must be 'raise' or 'return'"):
        openpgp_key(armor(b"\x00"), errors="ignore")
    assert set(FilterModule().filters()) == {"openpgp_fingerprints", "openpgp_key"}


def test_v6_and_new_format_lengths():
    """A v6 key packet in new packet format with a two-octet length: SHA-256 over 0x9b, a 4-octet length, the body
    (RFC 9580 5.5.4.3); the body here is synthetic, the rule is what is checked."""
    import hashlib  # pylint: disable=import-outside-toplevel

    body = b"\x06" + bytes(range(256))
    length = len(body) - 192
    packet = bytes([0xC6, (length >> 8) + 192, length & 0xFF]) + body
    want = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    assert openpgp_fingerprints(armor(packet)) == [want]
    # five-octet length of the same packet
    assert openpgp_fingerprints(armor(b"\xc6\xff" + len(body).to_bytes(4, "big") + body)) == [want]


def test_crc24_known_value():
    assert crc24(b"") == 0xB704CE
    assert crc24(b"123456789") == 0x21CF02  # the CRC-24/OPENPGP check value


# --- the installed copy under the real gpgv ---

def apt26_dearmor(text):
    """An .asc keyring as apt 2.6 hands it to gpgv: apt-key's own dearmor_keyring (awk + base64 -d)."""
    if not os.path.exists(APT_KEY) or not shutil.which("awk") or not shutil.which("base64"):
        pytest.skip("apt-key (apt 2.6), awk or base64 is not installed")
    with open(APT_KEY, encoding="utf-8") as handle:
        found = re.search(r"dearmor_keyring\(\) \{.*?awk '(.*?)' \| base64 -d", handle.read(), re.S)
    assert found, "apt-key's dearmor_keyring changed"
    awk = subprocess.run(["awk", found.group(1)], input=text.encode(), capture_output=True, check=True).stdout
    return subprocess.run(["base64", "-d"], input=awk, capture_output=True, check=True).stdout


def keyring_primaries(binary):
    from ansible_collections.rdma.k8s_node.plugins.filter.openpgp import fingerprint  # pylint: disable=C0415

    return [(fingerprint(body), tag, len(raw)) for tag, body, raw in packets(binary) if tag == 6]


def gpgv(keys, tmp_path, keyring, signer):
    """gpgv's exit code for a detached signature by ``signer`` (a key name, or a subkey with '!') over a file,
    with ``keyring`` (binary) as the only trusted keys."""
    data = tmp_path / "Release"
    data.write_text("Origin: DOCA\n")
    fpr = keys[signer]
    sig = tmp_path / ("Release-%s.gpg" % signer)
    gpg(keys["home"], "--yes", "--local-user", fpr + "!", "--detach-sign", "-o", str(sig), str(data))
    path = tmp_path / "keyring.gpg"
    path.write_bytes(keyring)
    home = tmp_path / "gpgv-home"
    home.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run([GPGV, "--keyring", str(path), str(sig), str(data)], env=dict(os.environ, GNUPGHOME=str(home)),
                          capture_output=True, check=False).returncode


@pytest.fixture
def need_gpgv():
    if GPGV is None:
        pytest.skip("gpgv is not installed")


def test_gpgv_trusts_only_the_checked_key(keys, tmp_path, need_gpgv):  # pylint: disable=unused-argument
    """The copy the role installs, read as apt 2.6 reads it: the pinned key and its bound signing subkey verify,
    the attacker's key does not."""
    noisy = export(keys, "pinned", "--armor").replace(BEGIN + "\n", BEGIN + "\nComment: DOCA repository key\n", 1)
    installed = openpgp_key("\n\n" + noisy + "\n")["armored"]
    keyring = apt26_dearmor(installed)
    assert keyring == export(keys, "pinned")
    assert gpgv(keys, tmp_path, keyring, "pinned") == 0
    assert gpgv(keys, tmp_path, keyring, "pinned_sign_sub") == 0
    assert gpgv(keys, tmp_path, keyring, "attacker") != 0
    assert gpgv(keys, tmp_path, keyring, "attacker_sub") != 0


def test_gpgv_ignores_a_grafted_subkey(keys, tmp_path, need_gpgv):  # pylint: disable=unused-argument
    """A subkey taken from another key with its own binding signature (refused by openpgp_key when the signature
    names its issuer): gpgv checks the binding against the primary key and does not trust it either."""
    keyring = _grafted_subkey(keys)
    assert gpgv(keys, tmp_path, apt26_dearmor(armor(keyring)), "attacker_sub") != 0
    assert gpgv(keys, tmp_path, apt26_dearmor(armor(keyring)), "pinned") == 0
