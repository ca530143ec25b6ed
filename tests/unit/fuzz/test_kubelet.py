"""Fuzz layers/kubelet/rules.py: versions, memory quantities, cpusets, flags, the YAML/JSON KubeletConfiguration reader and editor,
the drop-in merge and the planner raise only typed errors; edits keep every other byte; the merge is RFC 7386's."""

import json

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, InputError, ParseError, \
    RdmaNodeError
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, huge, long_line, mutated, nested, node_text, odd_text, \
    slow, typed_only

NUMBER = st.one_of(st.integers(0, 300).map(str), st.sampled_from(list(HUGE_NUMBERS) + ["\u0663", "\u00b2", "1.5", ""]))
QUANTITY = st.one_of(
    st.tuples(NUMBER, st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "Ei", "k", "M", "E", "m", "mi", "iB"])).map("".join),
    st.integers(), st.floats(), st.none(), odd_text(4))
CPUSET = st.one_of(
    st.lists(st.one_of(NUMBER, st.tuples(NUMBER, NUMBER).map("-".join)), max_size=5).map(",".join),
    st.sampled_from(["0-4294967295", "0-" + "9" * 30, "5-1", ",,", " 0 - 3 ", "0-3,1-2"]),
    st.integers(), odd_text(4))


@given(st.one_of(st.tuples(st.sampled_from(["Kubernetes v", "v", ""]), NUMBER, NUMBER, NUMBER).map(
    lambda t: "%s%s.%s.%s" % t), byte_soup(), odd_text(), st.none()))
def test_version_typed(text):
    version = typed_only(kub.parse_kubelet_version, text)
    assert isinstance(version, ParseError) or (len(version) == 3 and all(isinstance(p, int) for p in version))


@given(QUANTITY)
def test_quantity_typed(value):
    result = typed_only(kub.parse_quantity, value, "reserved_memory limits.memory")
    assert isinstance(result, InputError) or (isinstance(result, int) and result >= 0)


@given(CPUSET)
def test_cpuset_typed_and_bounded(text):
    cpus = typed_only(kub.parse_cpuset, text, "reserved_system_cpus")
    if isinstance(cpus, set):
        assert kub.parse_cpuset(kub.format_cpuset(cpus), "x") == cpus


@given(st.sets(st.integers(0, 4096), max_size=60))
def test_cpuset_round_trip(cpus):
    assert kub.parse_cpuset(kub.format_cpuset(cpus), "x") == cpus


JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.text(max_size=8),
              st.sampled_from(["none", "static", "Static", "best-effort", "single-numa-node", "1Gi", "100Mi", "0-3"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=10)
KEY = st.one_of(st.sampled_from(list(kub.RELEVANT_KEYS) + ["kind", "apiVersion", "a"]), st.text(max_size=5))
CONFIG = st.dictionaries(KEY, JSON_VALUE, max_size=6)


@slow()
@given(CONFIG, CONFIG)
def test_merge_is_a_json_merge_patch(base, overlay):
    merged = kub.merge(base, overlay)
    for key, value in overlay.items():
        if value is None:
            assert merged.get(key) == base.get(key)
        elif not (isinstance(value, dict) and isinstance(base.get(key), dict)):
            assert merged[key] == value
    assert all(key in merged for key in base)
    assert kub.merge(merged, overlay) == merged  # applying a patch twice changes nothing more


WANT = st.fixed_dictionaries({}, optional={
    "topologyManagerPolicy": st.sampled_from(list(kub.TOPOLOGY_POLICIES) + ["x"]),
    "topologyManagerScope": st.sampled_from(list(kub.TOPOLOGY_SCOPES) + ["x"]),
    "topologyManagerPolicyOptions": st.dictionaries(st.sampled_from(list(kub.TOPOLOGY_OPTIONS) + ["x"]),
                                                    st.one_of(NUMBER, st.sampled_from(["true", "false", "none"])),
                                                    max_size=2),
    "cpuManagerPolicy": st.sampled_from(list(kub.CPU_POLICIES) + ["x"]),
    "reservedSystemCPUs": CPUSET,
    "memoryManagerPolicy": st.sampled_from(list(kub.MEMORY_POLICIES) + ["x"]),
    # as desired_settings() builds it from the module's options: limits is always a mapping
    "reservedMemory": st.lists(st.fixed_dictionaries({"numaNode": st.one_of(st.integers(-1, 3), st.none()),
                                                      "limits": st.dictionaries(st.sampled_from(["memory", "hugepages-1Gi"]),
                                                                                QUANTITY, max_size=2)}), max_size=3),
})
CURRENT = st.one_of(CONFIG, st.fixed_dictionaries({}, optional={
    "kubeReserved": st.one_of(st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITY, max_size=2), JSON_VALUE),
    "systemReserved": st.one_of(st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITY, max_size=2), JSON_VALUE),
    "evictionHard": st.one_of(st.dictionaries(st.just("memory.available"), QUANTITY, max_size=1), JSON_VALUE),
    "featureGates": st.dictionaries(st.just(kub.ALPHA_GATE), st.one_of(st.booleans(), JSON_VALUE), max_size=1),
    "cpuManagerPolicy": st.sampled_from(list(kub.CPU_POLICIES) + ["x"]),
}))


@slow()
@given(WANT, CURRENT, st.tuples(st.integers(1, 1), st.integers(10, 40), st.integers(0, 5)),
       st.lists(st.integers(0, 64), max_size=8), st.lists(st.integers(-1, 12), max_size=10))
def test_validate_typed(want, current, version, cpus_online, numa_nodes):
    # the kubelet's files reach validate() through check_shapes (layers/kubelet/host.read_document): a field of the wrong
    # type is that file's ParseError, so validate() is only ever given the shapes the kubelet accepts
    if isinstance(typed_only(kub.check_shapes, current, "/var/lib/kubelet/config.yaml"), ParseError):
        return
    result = typed_only(kub.validate, want, current, version, cpus_online, numa_nodes)
    assert isinstance(result, (list, InputError)), result
    typed_only(kub.key_changes, current, want)


FLAG_NAMES = ["--" + f for f in list(kub.FLAG_FIELDS)[:8]] + [
    "--config", "--v", "--x", "-v", "--", "--feature-gates", "--reserved-memory", "--eviction-hard", "--kube-reserved"]
FLAG_WORD = st.one_of(
    st.tuples(st.sampled_from(FLAG_NAMES),
              st.sampled_from(["=", " "]),
              st.one_of(st.sampled_from(["static", "0-3", "a=b", "a=b,c=d", "memory.available<100Mi",
                                         "TopologyManagerPolicyAlphaOptions=true", "X=maybe", "0:memory=1Gi",
                                         "0:memory=1Gi;1:memory=2Gi", "\u00b2:memory=1Gi", "x", "", "a<", "1" * 5000 +
                                         ":memory=1"]), odd_text(3))).map("".join),
    odd_text(3))
COMMAND = st.lists(FLAG_WORD, max_size=8)


@given(COMMAND)
def test_flags_typed(words):
    text = " ".join(words)
    flags = typed_only(kub.parse_flags, text)
    assert isinstance(flags, dict)
    parsed = typed_only(kub.parse_command, [(w, {"how": "ExecStart", "file": "/x"}) for w in text.split()], 0)
    settings = typed_only(kub.flag_settings, parsed)
    if isinstance(settings, dict):
        relevant = kub.relevant_flags(parsed)
        layer = kub.flags_layer(relevant, "/proc/1/cmdline")
        typed_only(kub.effective, [{"kind": "config", "path": "/c", "settings": {}}, layer])


DOC_LINE = st.one_of(
    st.tuples(KEY, st.sampled_from([": ", ":", " : "]), st.one_of(st.sampled_from(
        ["none", "static", "{}", "[]", "{a: 1}", "'q'", '"d"', "&a x", "*a", "!!python/object:os.system x", "|",
         "1" * 5000, "1e400", "0x1f", "~", "null", "[1, [2, [3]]]", "? a", "{[1]: 2}"]), odd_text(3))).map("".join),
    st.tuples(st.sampled_from(["  ", "- ", "  - "]), KEY, st.just(": 1")).map("".join),
    st.sampled_from(["---", "...", "# comment", "apiVersion: kubelet.config.k8s.io/v1beta1", "kind: KubeletConfiguration"]),
)
DOCUMENT = st.one_of(
    node_text(DOC_LINE, (": ", "- ", "{", "[", "&a ", "*a ")),
    CONFIG.map(json.dumps), CONFIG.map(lambda d: json.dumps(d, indent=2)), CONFIG.map(lambda d: json.dumps(d, indent="\t")),
    mutated(CONFIG.map(lambda d: json.dumps(d, indent=2))),
    CONFIG.map(lambda d: "# Managed by rdma.k8s_node.kubelet_topology\n" + json.dumps(d)),
    nested("[", "]", prefix="{\"a\": ", suffix="}", high=300), nested("a:\n" + " ", prefix="x: ", high=200),
    nested("- ", prefix="a:\n", high=300), nested("{a: ", "}", prefix="x: ", high=300),
    st.just('a: &a ["lol","lol"]\nb: &b [*a,*a]\nc: &c [*b,*b]\n'), st.just('{"a": 1, "a": 2}'), st.just('{"a": NaN}'),
    st.just("{" + '"a": ' * 1 + "1" * 5000 + "}"),
)


@given(DOCUMENT)
def test_load_document_typed(text):
    result = typed_only(kub.load_document, text, "/var/lib/kubelet/config.yaml")
    if isinstance(result, RdmaNodeError):
        assert "/var/lib/kubelet/config.yaml" in result.msg
    else:
        data, fmt = result
        assert isinstance(data, dict) and fmt in ("json", "yaml")


UPDATES = st.dictionaries(st.sampled_from(list(kub.MANAGED_KEYS) + ["kind"]), JSON_VALUE.filter(lambda v: v is not None),
                          min_size=1, max_size=3)


@slow()
@given(DOCUMENT, UPDATES)
def test_edit_document_sets_exactly_the_keys(text, updates):
    loaded = typed_only(kub.load_document, text, "/c")
    if isinstance(loaded, RdmaNodeError):
        return
    before, fmt = loaded
    new = typed_only(kub.edit_document, text, fmt, updates, "/c")
    if isinstance(new, RdmaNodeError):
        assert isinstance(new, (ApplyError, ParseError)), new
        return
    after, dummy = kub.load_document(new, "/c")
    expected = dict(before)
    expected.update(updates)
    assert after == expected
    if fmt == "json" and text.lstrip().startswith("{"):
        # every byte outside the edited values is kept
        opening, members, closing = kub.json_members(text, "/c")
        kept = [text[:members[0]["value_start"]] if members else text[:opening + 1]]
        kept += [text[m["value_end"]:n["value_start"]] for m, n in zip(members, members[1:])]
        assert all(piece in new for piece in kept if "\n" not in piece or piece.strip())
        assert new.endswith(text[closing:])


@given(st.one_of(DOCUMENT, byte_soup(), odd_text()), UPDATES)
def test_json_editor_on_any_text_typed(text, updates):
    typed_only(kub.json_members, text, "/c")
    typed_only(kub.json_set_top_level, text, updates, "/c")


@given(st.one_of(DOCUMENT, byte_soup()), st.sampled_from(list(kub.MANAGED_KEYS) + ["a.b", "(", ""]),
       st.sampled_from(["topologyManagerPolicy: none\n", "x:\n  a: 1\n", ""]))
def test_replace_top_level_keeps_other_lines(text, key, block):
    new = typed_only(kub.replace_top_level, text, key, block)
    assert isinstance(new, str)


LAYER_SETTINGS = st.dictionaries(st.sampled_from(list(kub.RELEVANT_KEYS)), JSON_VALUE, max_size=4)


RAW_LAYER = st.tuples(st.sampled_from(["config", "dropin", "dropin"]), st.sampled_from(["10-a.conf", "50-b.conf", "99-z.conf"]),
                      LAYER_SETTINGS, st.booleans())


@slow()
@given(st.lists(RAW_LAYER, max_size=4),
       COMMAND, WANT, st.sampled_from(["fail", "ignore", "override"]), st.booleans())
def test_plan_typed(raw_layers, words, want, on_conflict, dropin_mode):
    layers = [{"kind": kind, "path": "/etc/kubernetes/kubelet.conf.d/" + name if kind == "dropin" else "/c",
               "name": name, "settings": settings, "ours": ours and kind == "dropin"}
              for kind, name, settings, ours in raw_layers]
    parsed = typed_only(kub.parse_command, [(w, {"how": "EnvironmentFile", "file": "/e", "var": "A"})
                                            for w in " ".join(words).split()], 0)
    try:
        layers.append(kub.flags_layer(kub.relevant_flags(parsed), "/proc/1/cmdline"))
    except ParseError:
        pass
    target = {"mode": "dropin", "dir": "/etc/kubernetes/kubelet.conf.d", "name": "50-rdma-k8s-node-topology.conf"} \
        if dropin_mode else {"mode": "config", "path": "/c"}
    result = typed_only(kub.plan, layers, want, target, on_conflict)
    if isinstance(result, dict):
        typed_only(kub.changes, result["before"], result["after"], want)


@huge()
@given(st.one_of(long_line(("a: ", "- ", "{", '"a": ', " ", "#", "\n", "1,"), 20_000, 200_000),
                 long_line(("--a=b ", "--reserved-memory ", "0-1,", "'", '"'), 20_000, 200_000)))
def test_huge_inputs(text):
    typed_only(kub.load_document, text, "/c")
    typed_only(kub.parse_flags, text)
    typed_only(kub.parse_cpuset, text[:100_000], "x")
    typed_only(kub.replace_top_level, text, "topologyManagerPolicy", "topologyManagerPolicy: none\n")
