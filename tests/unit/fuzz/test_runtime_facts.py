"""Fuzz _runtime_facts and the containerd parsers it uses: /proc/<pid>/limits, systemd LimitMEMLOCK= in units and
drop-ins, ``containerd --version``, ``containerd config dump``, base specs, kubelet state files; the facts never fail
(what cannot be read is None plus a problem), the parsers raise only typed errors."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils import _runtime_facts as rf
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, examples, huge, long_line, mutated, nested, node_text, \
    node_tree, odd_text, slow, typed_only
from unit.fuzz.test_toml import DOC

NUM = st.one_of(st.integers(0, 2 ** 64).map(str), st.sampled_from(list(HUGE_NUMBERS) + ["unlimited", "\u0663", "x"]))
LIMITS_LINE = st.one_of(
    st.tuples(st.sampled_from(["Max locked memory", "Max locked memory ", "Max open files", "Limit"]),
              st.lists(st.one_of(NUM, st.sampled_from(["bytes", "files", "     "])), max_size=4)).map(
        lambda t: t[0] + "    " + "  ".join(t[1])),
    st.just("Limit                     Soft Limit           Hard Limit           Units"),
)
LIMIT_VALUE = st.one_of(
    st.tuples(NUM, st.sampled_from(["", "K", "M", "G", "T", "KiB", "MB", "k", " M", "P"])).map("".join),
    st.tuples(NUM, NUM).map(":".join), st.sampled_from(["infinity", "INFINITY", "", ":", "8M:", ":8M"]), odd_text(4))
UNIT_LINE = st.one_of(
    st.sampled_from(["[Service]", "[Unit]", "[Service", "# c", "; c", "", "ExecStart=/usr/bin/containerd"]),
    LIMIT_VALUE.map(lambda v: "LimitMEMLOCK=" + v), LIMIT_VALUE.map(lambda v: "  LimitMEMLOCK = " + v))
VERSION = st.one_of(
    st.tuples(st.sampled_from(["containerd containerd.io ", "containerd github.com/containerd/containerd v", "x "]),
              NUM, NUM, st.sampled_from(["", ".1", ".9+unknown", "." + "9" * 5000])).map(lambda t: "%s%s.%s%s" % t),
    byte_soup(), odd_text())


@slow()
@given(node_text(LIMITS_LINE, ("Max locked memory ", " ", "unlimited ")))
def test_proc_limits_typed(text):
    limits = typed_only(ctd.parse_proc_limits, text)
    assert limits is None or isinstance(limits, (dict, ParseError))


@slow()
@given(st.lists(st.tuples(st.sampled_from(["/lib/systemd/system/containerd.service",
                                           "/etc/systemd/system/containerd.service.d/a.conf"]),
                          node_text(UNIT_LINE, ("LimitMEMLOCK=", "[", "]", "="))), max_size=3))
def test_unit_limit_typed(files):
    result = typed_only(ctd.unit_limit, files)
    assert isinstance(result, (tuple, ParseError))


@slow()
@given(LIMIT_VALUE)
def test_systemd_limit_typed(value):
    result = typed_only(ctd.parse_systemd_limit, value)
    assert isinstance(result, (int, ParseError))


@slow()
@given(VERSION)
def test_containerd_version_typed(text):
    result = typed_only(ctd.parse_version, text)
    assert isinstance(result, (tuple, ParseError))


CRI = ['[plugins."io.containerd.grpc.v1.cri"]', '[plugins."io.containerd.grpc.v1.cri".containerd]',
       '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
       '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes]', "version = 2", "version = 3", 'version = "x"',
       "runtimes = 5", 'runtimes = ["a"]', "enable_cdi = true", "cdi_spec_dirs = 1", 'runtime_type = "io.containerd.runc.v2"',
       'base_runtime_spec = "/etc/containerd/cri-base.json"', "runc = 1", "options = {}", 'containerd = "x"']
DUMP = st.one_of(DOC, st.lists(st.sampled_from(CRI), max_size=10).map("\n".join),
                 mutated(st.lists(st.sampled_from(CRI), max_size=10).map("\n".join)))


@slow()
@given(DUMP)
def test_config_dump_effective_typed(text):
    doc = typed_only(_toml.parse, text, "containerd config dump")
    if isinstance(doc, _toml.Document):
        eff = typed_only(ctd.effective, doc)
        if isinstance(eff, dict):
            typed_only(ctd.runtime_drift, eff, eff)


SPEC = st.one_of(
    st.recursive(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans()),
                 lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(
                     st.sampled_from(["process", "rlimits", "type", "soft", "hard", "x"]), inner, max_size=3)),
                 max_leaves=12).map(json.dumps),
    st.just('{"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "soft": 1, "hard": 2}]}}'),
    byte_soup(), nested("[", "]"), nested('{"process":', "}", suffix="1"))


@given(SPEC)
def test_spec_rlimit_typed(text):
    result = typed_only(ctd.spec_rlimit, text, "RLIMIT_MEMLOCK")
    assert result is None or isinstance(result, (dict, ParseError))


STATE = st.one_of(SPEC, st.just('{"policyName": "static"}'), nested("[", "]", prefix='{"policyName": ', suffix="}"))
FILES = st.fixed_dictionaries({}, optional={
    "/proc/1234/comm": st.sampled_from(["containerd\n", "kubelet\n", "x"]),
    "/proc/1234/limits": node_text(LIMITS_LINE, ("Max locked memory ",)),
    "/proc/1234/cmdline": st.lists(st.sampled_from(["/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml",
                                                    "--cpu-manager-policy", "static", "--reserved-memory", "\u00b2:memory=1"]),
                                   max_size=5).map(lambda words: "\0".join(words) + "\0"),
    "/lib/systemd/system/containerd.service": node_text(UNIT_LINE),
    "/etc/systemd/system/containerd.service.d/10-memlock.conf": node_text(UNIT_LINE),
    "/var/lib/kubelet/cpu_manager_state": STATE,
    "/var/lib/kubelet/memory_manager_state": STATE,
    "/var/lib/kubelet/config.yaml": st.one_of(st.sampled_from(["cpuManagerPolicy: static\n", "{}", "a: [", "- 1"]),
                                              byte_soup(60)),
})


@settings(max_examples=examples(0.1))  # a real tree per example: 10 % of the profile's count
@given(FILES)
def test_facts_never_fail(files):
    """The whole gatherer on a real node tree (HostRoot) whose files hold the generated text."""
    with node_tree(files) as host:
        facts = typed_only(rf.runtime_facts, host)
    assert isinstance(facts, dict), facts
    assert isinstance(facts["containerd"]["problems"], list) and isinstance(facts["kubelet"]["problems"], list)


@huge()
@given(long_line(("Max locked memory ", " ", "1", "LimitMEMLOCK=", "containerd ", "1.", "["), 20_000, 200_000))
def test_huge_text(text):
    typed_only(ctd.parse_proc_limits, text)
    typed_only(ctd.unit_limit, [("/x", text)])
    typed_only(ctd.parse_version, text)
