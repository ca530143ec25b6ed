"""Fuzz _systemd (how the kubelet's command line is built from units and environment files): unit files,
environment files, word splitting, ExecStart= expansion never raise, in linear time; rewriting one assignment of an
environment file reads back as the new value and keeps every other assignment; flags are cut out of one (through
kubelet rules.remove_flags_from_env) with typed errors only."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils import _systemd as sd
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError
from unit.fuzz.strategies import byte_soup, huge, long_line, node_text, odd_text, slow, typed_only

WORD = st.one_of(st.sampled_from(["--cpu-manager-policy=static", "--config", "/var/lib/kubelet/config.yaml", "$KUBELET_ARGS",
                                  "${KUBELET_EXTRA_ARGS}", "$$", "'a b'", '"a b"', "a\\ b", "\\x41", "\\u00e9", "\\101", "\\",
                                  "%%", ";", "--feature-gates=A=true", "x"]), odd_text(3))
VALUE = st.lists(WORD, max_size=5).map(" ".join)
UNIT_LINE = st.one_of(
    st.sampled_from(["[Service]", "[Unit]", "[Service", "# c", "; c", "", "ExecStart=", "Environment=", "EnvironmentFile=",
                     "EnvironmentFile=-/etc/default/kubelet", "ExecStart=/usr/bin/kubelet \\", "  $KUBELET_ARGS"]),
    st.tuples(st.sampled_from(["ExecStart=", "ExecStart=-", "ExecStart=@", "ExecStart=:", "Environment=",
                               "Environment=\"A=1 2\" B=3 ", "EnvironmentFile="]), VALUE,
              st.sampled_from(["", " \\", "\\"])).map("".join))
ENV_LINE = st.one_of(
    st.tuples(st.sampled_from(["KUBELET_EXTRA_ARGS", "KUBELET_KUBEADM_ARGS", "A", "1A", "a-b", " A", "export A", ""]),
              st.sampled_from(["=", " = ", "="]),
              st.one_of(VALUE, VALUE.map('"{}"'.format), VALUE.map("'{}'".format)),
              st.sampled_from(["", " # c", " \\", "\\", " ;c"])).map("".join),
    st.sampled_from(["# c", "; c", "", "=", "A", "A=\"unterminated", "A='x", "A=\\"]))
UNIT = node_text(UNIT_LINE, ("ExecStart=", "\\\n", "\\", " ", "$", "\""))
ENV = node_text(ENV_LINE, ("A=", "\\\n", "\\", "\"", "'", " ", "#"))


@slow()
@given(UNIT)
def test_unit_files_never_raise(text):
    entries = typed_only(sd.parse_unit, text)
    assert all(isinstance(value, str) for dummy_section, dummy_key, value, dummy_line in entries)
    settings = typed_only(sd.service_settings, [("/lib/systemd/system/kubelet.service", text)])
    if settings.get("exec_start"):
        env = dict((name, (value, {"file": "/e", "how": "Environment"})) for name, value in
                   (a.split("=", 1) for a, dummy in settings["environment"] if "=" in a))
        typed_only(sd.expand_exec, settings["exec_start"], env)


@given(st.one_of(VALUE, byte_soup(), odd_text()), st.booleans())
def test_word_splitting_never_raises(text, cunescape):
    spans = typed_only(sd.word_spans, text, cunescape)
    assert all(0 <= start < end <= len(text) for dummy, start, end in spans)
    assert [w for w, dummy, dummy2 in spans] == sd.split_words(text, cunescape)
    typed_only(sd.exec_command, text)


@slow()
@given(ENV)
def test_env_file_never_raises(text):
    for assignment in typed_only(sd.parse_env_file, text):
        assert 0 <= assignment["start"] <= assignment["end"] <= len(text)
    typed_only(sd.env_assignments, text)


@slow()
@given(ENV, VALUE)
def test_replacing_an_assignment_reads_back(text, new_value):
    assignments = [a for a in sd.parse_env_file(text) if a["value"] is not None and sd.env_name_ok(a["name"])]
    if not assignments:
        return
    target = assignments[-1]
    new = typed_only(sd.replace_env_value, text, target, new_value)
    got = sd.env_assignments(new)
    expected = sd.env_assignments(text)
    expected[target["name"]] = new_value
    assert got == expected


@slow()
@given(ENV, st.sampled_from(["KUBELET_EXTRA_ARGS", "A"]), st.sets(st.sampled_from(list(kub.FLAG_FIELDS)[:6] + ["config"]),
                                                                  min_size=1, max_size=3))
def test_flags_cut_from_env_files(text, var, names):
    new = typed_only(kub.remove_flags_from_env, text, var, names, "/etc/default/kubelet")
    if isinstance(new, ApplyError):
        return
    before, after = sd.env_assignments(text), sd.env_assignments(new)
    assert set(before) == set(after) and all(after[k] == before[k] for k in before if k != var)
    remaining = kub.parse_command([(w, None) for w in sd.split_words(after[var])], 0)
    assert not any(flag["name"] in names for flag in remaining)


@huge()
@given(st.one_of(long_line(("\\", "$", "${A}", " ", "'", '"', "A=", "\\\n", "x"), 20_000, 200_000)))
def test_huge_text(text):
    typed_only(sd.parse_unit, text)
    typed_only(sd.parse_env_file, text)
    typed_only(sd.word_spans, text, True)
    typed_only(sd.expand_exec, (text, "/u", 1), {"A": ("a", {"file": "/e"})})
