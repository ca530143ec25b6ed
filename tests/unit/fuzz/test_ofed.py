"""Fuzz _ofed: ofed_info output and its script, versions, the DKMS listing, dpkg's status file and build logs raise
nothing but typed errors, and a version read back from its own label is the same version."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _ofed
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError, ParseError
from unit.fuzz.strategies import HUGE_NUMBERS, FakeHost, byte_soup, huge, long_line, mutated, node_text, odd_text, \
    slow, typed_only

NUM = st.one_of(st.integers(0, 99).map(str), st.sampled_from(["\u0663", "\u00b2", "1" * 5000, "007", ""]))
RELEASE = st.tuples(NUM, NUM).map(".".join)
BUILD = st.lists(NUM, min_size=1, max_size=5).map(".".join)
VERSION = st.tuples(RELEASE, BUILD).map("-".join)
LABEL = st.one_of(
    st.tuples(st.sampled_from(["MLNX_OFED_LINUX", "OFED-internal", "OFED"]), VERSION,
              st.sampled_from([":", "", " (OFED-4.17-1):", "  (x)", ":\n"])).map(lambda t: "%s-%s%s" % t),
    VERSION, mutated(st.just("OFED-internal-24.10-1.1.4:")), odd_text(5),
)
SCRIPT = st.one_of(
    LABEL.map(lambda label: '#!/bin/bash\nif [ "X$1" == "X-s" ]; then echo %s; exit 0; fi\n' % label),
    mutated(LABEL.map(lambda label: "if [ 'X$1' == 'X-s' ] ; then\n  echo '%s'\nfi" % label)),
    node_text(st.sampled_from(['if [ "X$1" == "X-s" ]; then echo ', "fi", "echo"]), ("X-s", '"', "then echo ")),
)


@given(st.one_of(LABEL, SCRIPT, byte_soup(), st.none()))
def test_ofed_info_typed(text):
    info = typed_only(_ofed.parse_ofed_info, text)
    assert info is None or isinstance(info, (dict, ParseError))
    script = typed_only(_ofed.version_from_script, text)
    assert script is None or isinstance(script, (dict, ParseError))
    if isinstance(info, dict):
        assert info["version"] == "%s-%s" % (info["release"], info["build"])
        key = typed_only(_ofed.version_key, info["version"])
        assert isinstance(key, (tuple, InputError))
        assert _ofed.parse_ofed_info(info["label"] or info["version"])["version"] == info["version"]


@given(st.one_of(VERSION, st.none(), st.integers(), odd_text(4), st.sampled_from(list(HUGE_NUMBERS))))
def test_version_key_typed(version):
    key = typed_only(_ofed.version_key, version)
    assert isinstance(key, (tuple, InputError))


@given(st.one_of(VERSION, odd_text(4)), st.one_of(VERSION, st.none(), odd_text(3)))
def test_same_build_never_raises(module_ver, ofed_version):
    typed_only(_ofed.same_build, module_ver, ofed_version)
    if isinstance(ofed_version, str):
        typed_only(_ofed.module_version, ofed_version)


NAME = st.one_of(st.sampled_from(list(_ofed.OFED_MODULES[:4]) + ["mlnx-ofed-kernel"]), odd_text(3))
KO = st.one_of(st.sampled_from(["mlx5_core.ko", "ib_core.ko.xz", "x.ko.zst", ".ko", "readme", "a.ko.gz"]), odd_text(3))


@given(st.fixed_dictionaries({"modules": st.dictionaries(NAME, st.fixed_dictionaries({
    "versions": st.dictionaries(NAME, st.fixed_dictionaries({
        "kernels": st.dictionaries(st.sampled_from(["6.1.0-28-amd64", "5.15.0"]), st.dictionaries(
            st.sampled_from(["x86_64", "aarch64"]), st.lists(KO, max_size=3), max_size=2), max_size=2),
        "build_log": st.booleans()}), max_size=3),
    "installed": st.dictionaries(st.one_of(st.just("kernel-6.1.0-28-amd64-x86_64"), odd_text(4)),
                                 st.one_of(st.none(), st.just("24.10/6.1.0-28-amd64/x86_64"), odd_text(4)), max_size=2),
}), max_size=3)}), st.sampled_from(["6.1.0-28-amd64", "5.15.0", ""]))
def test_dkms_state_never_raises(listing, kernel):
    for item in typed_only(_ofed.dkms_state, listing, kernel):
        assert item["state"] in ("installed", "built", "failed", "added")


STANZA_LINE = st.one_of(
    st.tuples(st.sampled_from(["Package", "Status", "Version", " Status", "Description"]),
              st.sampled_from([": doca-ofed", ": install ok installed", ": 24.10", ":", ": deinstall ok not-installed",
                               ": install ok half-configured", ": a b c d"])).map("".join),
    odd_text(5),
)


@slow()
@given(node_text(STANZA_LINE, ("Package: doca-ofed\n", "\n\n", ":")),
       st.one_of(st.just(_ofed.DOCA_PACKAGES), st.lists(odd_text(3), max_size=2)))
def test_dpkg_status_never_raises(text, names):
    for name, info in typed_only(_ofed.dpkg_packages, text, names).items():
        assert name in names and info["state"] != "not-installed"


@given(node_text(st.sampled_from(["make: *** [x] Error 2", "error: foo", "CC x.o", "", "warning"]), ("error", "\n")),
       st.integers(0, 50))
def test_log_excerpt_never_raises(text, limit):
    lines = typed_only(_ofed.log_excerpt, text, limit)
    assert len(lines) <= max(limit, 0) or limit == 0


@slow()
@given(st.dictionaries(st.sampled_from(["/usr/bin/ofed_info", "/proc/sys/kernel/osrelease", "/sys/module/ib_core/version",
                                        "/sys/module/mlx5_core/version", "/var/lib/dpkg/status",
                                        "/var/lib/dkms/mlnx-ofed-kernel/24.10/build/make.log",
                                        "/var/lib/dkms/mlnx-ofed-kernel/24.10/6.1.0/x86_64/module/mlx5_core.ko"]),
                       st.one_of(SCRIPT, LABEL, VERSION, byte_soup(50),
                                 st.just(HostReadError("cannot read: EIO")))))
def test_ofed_facts_never_fail(files):
    files.setdefault("/sys/module/ib_core/refcnt", "1")
    facts = typed_only(_ofed.ofed_facts, FakeHost(files))
    assert isinstance(facts, dict) and isinstance(facts["installed"], bool)


@huge()
@given(long_line(("OFED-internal-", "1.", "-", "X-s", " ", "then echo "), 20_000, 200_000))
def test_huge_output(text):
    typed_only(_ofed.parse_ofed_info, text)
    typed_only(_ofed.version_from_script, text)
    typed_only(_ofed.log_excerpt, text)
