"""_systemd: unit files, environment files and ExecStart expansion as systemd does them (pure).

Grammar sources: systemd src/basic/env-file.c (parse_env_file_internal), src/shared/conf-parser.c (continuations,
comments), src/core/execute.c / env-util.c replace_env_argv (``$VAR`` split, ``${VAR}`` in place, ``$$``).
"""

import pathlib
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _systemd as sd

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "realworld"


def corpus(path):
    return (CORPUS / path).read_text()


# -- environment files -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("A=1\nB=two words  \n", {"A": "1", "B": "two words"}),            # unquoted: trailing blanks chopped
    ("A='single $x \\n'\n", {"A": "single $x \\n"}),                     # single quotes: literal
    ('A="a \\"b\\" \\$c \\q"\n', {"A": 'a "b" $c \\q'}),                # double: \" \$ unescaped, \q kept
    ('A="one \\\ntwo"\n', {"A": "one two"}),                             # escaped newline eaten
    ("A=one \\\ntwo\n", {"A": "one two"}),
    ("# A=1\n; B=2\n  C=3\n", {"C": "3"}),                               # comments at the start of a line only
    ("A=x # not a comment\n", {"A": "x # not a comment"}),
    ("A=1\nA=2\n", {"A": "2"}),                                          # later wins
    ("A\nB=1\n", {"B": "1"}),                                            # no '=': nothing
    ("export A=1\nB-C=2\nD=3", {"D": "3"}),                              # invalid names dropped, no final newline
    ('A="x"y\n', {"A": "xy"}),
    ("A=\n", {"A": ""}),
])
def test_env_file_grammar(text, expected):
    assert sd.env_assignments(text) == expected


def test_kubespray_kubelet_env_continued_inside_double_quotes():
    env = sd.env_assignments(corpus("kubespray/etc/kubernetes/kubelet.env"))
    assert sd.split_words(env["KUBELET_ARGS"]) == [
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--config=/etc/kubernetes/kubelet-config.yaml",
        "--kubeconfig=/etc/kubernetes/kubelet.conf", "--runtime-cgroups=/system.slice/containerd.service"]
    assert env["KUBELET_CLOUDPROVIDER"] == "" and env["KUBE_LOG_LEVEL"] == "--v=2"


def test_hand_edited_kubeadm_flags_env():
    env = sd.env_assignments(corpus("kubeadm/user-edited/var/lib/kubelet/kubeadm-flags.env"))
    assert env == {"KUBELET_KUBEADM_ARGS": " --pod-infra-container-image=registry.k8s.io/pause:3.8"}


def test_spans_point_at_the_text_of_each_value_character():
    text = 'X=1\nA="a \\"b\\" \\\nc"\n'
    assignment = sd.parse_env_file(text)[1]
    assert assignment["value"] == 'a "b" c'
    assert [text[s:e] for s, e in assignment["spans"]] == ["a", " ", '\\"', "b", '\\"', " ", "c"]
    assert (assignment["start"], assignment["end"]) == (4, len(text) - 1)


@pytest.mark.parametrize("text,drop,expected", [
    ('A="--a=1 --b=2 --c=3"\n', {1}, 'A="--a=1 --c=3"\n'),
    ('A="--a=1 --b=2 --c=3"\n', {2}, 'A="--a=1 --b=2"\n'),
    ("A=--a=1 \\\n  --b 2 \\\n  --c=3\n", {1, 2}, "A=--a=1 \\\n  --c=3\n"),
    ('A="--b=2"\n', {0}, None),  # every word: the caller rewrites the assignment
])
def test_cut_value_words(text, drop, expected):
    assert sd.cut_value_words(text, sd.parse_env_file(text)[0], drop) == expected


@pytest.mark.parametrize("value,quote,expected", [
    ("--a=1 --b=2", '"', '"--a=1 --b=2"'),
    ("--a=1", None, "--a=1"),
    ("--a=1 --b", None, '"--a=1 --b"'),
    ("it's $x", "'", '"it\'s \\$x"'),
    ("--a", "'", "'--a'"),
])
def test_quote_env_value_reads_back(value, quote, expected):
    assert sd.quote_env_value(value, quote) == expected
    assert sd.env_assignments("A=%s\n" % expected) == {"A": value}


# -- unit files ------------------------------------------------------------------------------------------------------
def test_unit_continuations_and_comments():
    parsed = sd.parse_unit(corpus("eks-al2/etc/systemd/system/kubelet.service"))
    exec_start = [v for section, key, v, line in parsed if key == "ExecStart"]
    assert len(exec_start) == 1 and exec_start[0].split()[:3] == ["/usr/bin/kubelet", "--config",
                                                                  "/etc/kubernetes/kubelet/kubelet-config.json"]
    assert exec_start[0].split()[-1] == "$KUBELET_EXTRA_ARGS"
    assert sd.parse_unit("[Service]\nExecStart=/bin/a \\\n# skipped\n  --b\n") == [("Service", "ExecStart", "/bin/a    --b", 2)]


def test_an_empty_exec_start_resets_and_environment_files_keep_their_order():
    unit = corpus("kubeadm/rpm/usr/lib/systemd/system/kubelet.service")
    dropin = corpus("kubeadm/deb/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf")
    settings = sd.service_settings([("/u/kubelet.service", unit), ("/u/kubelet.service.d/10-kubeadm.conf", dropin)])
    assert settings["exec_start"][0].startswith("/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS")
    assert settings["exec_start"][1] == "/u/kubelet.service.d/10-kubeadm.conf"
    assert settings["environment_files"] == [("/var/lib/kubelet/kubeadm-flags.env", True, "/u/kubelet.service.d/10-kubeadm.conf"),
                                             ("/etc/default/kubelet", True, "/u/kubelet.service.d/10-kubeadm.conf")]
    assert [a.split("=", 1)[0] for a, dummy in settings["environment"]] == ["KUBELET_KUBECONFIG_ARGS", "KUBELET_CONFIG_ARGS"]
    assert settings["problems"] == []


def test_resets_and_single_quoted_environment_of_eks_drop_ins():
    args = corpus("eks-al2/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf")
    settings = sd.service_settings([("/e/10.conf", args), ("/e/20.conf", "[Service]\nEnvironment=\nEnvironmentFile=\n"),
                                    ("/e/30.conf", "[Service]\nEnvironment=A=1 'B=two words' bad\n")])
    assert settings["environment"] == [("A=1", "/e/30.conf"), ("B=two words", "/e/30.conf")]
    assert settings["problems"][0]["error"].startswith("Environment=bad is not NAME=value")
    settings = sd.service_settings([("/e/10.conf", args)])
    name, value = settings["environment"][0][0].split("=", 1)
    assert name == "KUBELET_ARGS" and value.startswith("--node-ip=192.0.2.10 --pod-infra-container-image=")


def test_two_exec_start_lines_are_a_problem():
    settings = sd.service_settings([("/u", "[Service]\nExecStart=/a\nExecStart=/b\n")])
    assert "refuses to start it" in settings["problems"][0]["error"]


def test_drop_in_order_name_first_then_directory_priority():
    entries = [(4, "10-a.conf", "/etc/x/10-a.conf"), (10, "10-a.conf", "/usr/x/10-a.conf"),
               (10, "05-b.conf", "/usr/x/05-b.conf"), (13, "99-c.conf", "/usr/service.d/99-c.conf")]
    assert sd.order_dropins(entries) == ["/usr/x/05-b.conf", "/etc/x/10-a.conf", "/usr/service.d/99-c.conf"]


# -- the command line ------------------------------------------------------------------------------------------------
ENV = {"A": ("--x=1 --y 'two words'", {"file": "/f", "how": "EnvironmentFile"}),
       "EMPTY": ("", {"file": "/f", "how": "EnvironmentFile"}),
       "C": ("/etc/c.yaml", {"file": "/u", "how": "Environment"})}


@pytest.mark.parametrize("exec_start,expected", [
    ("/bin/k $A", ["/bin/k", "--x=1", "--y", "two words"]),
    ("/bin/k $UNSET $EMPTY --z", ["/bin/k", "--z"]),                  # unset and empty $VAR words disappear
    ("/bin/k --config=${C} ${UNSET}", ["/bin/k", "--config=/etc/c.yaml", ""]),
    ("/bin/k $$A ${A}", ["/bin/k", "$A", "--x=1 --y 'two words'"]),   # ${VAR} is one word, $$ is a $
    (":/bin/k $A", ["/bin/k", "$A"]),                                   # ':' turns expansion off
    ("-/bin/k '--a b' \"--c\\td\"", ["/bin/k", "--a b", "--c\td"]),
    ("@/bin/k kubelet --v=2", ["/bin/k", "--v=2"]),
    ("/bin/k --a ; /bin/other", ["/bin/k", "--a"]),
])
def test_expand_exec(exec_start, expected):
    assert [w for w, o in sd.expand_exec((exec_start, "/u/kubelet.service", 1), ENV)] == expected


def test_expanded_words_know_where_they_come_from():
    words = sd.expand_exec(("/bin/k --v=2 $A", "/u/kubelet.service", 3), ENV)
    assert words[1][1] == {"file": "/u/kubelet.service", "how": "ExecStart", "var": None}
    assert words[2][1] == {"file": "/f", "how": "EnvironmentFile", "var": "A"}
    assert sd.describe_origin(words[2][1]) == "$A from /f"
    assert sd.describe_origin(dict(ENV["C"][1], var="C")) == "$C from /u (Environment=)"
    assert sd.describe_origin(words[1][1]) == "ExecStart= in /u/kubelet.service"


def test_long_exec_word_is_expanded_in_linear_time():
    """Found by the fuzz suite: each character of a word copied the rest of it (re.match on word[index:]), so a
    1,000,000-character ExecStart= word took about 40 s."""
    start = time.monotonic()
    words = sd.expand_exec(("/usr/bin/kubelet " + "x" * 1_000_000 + "${A}", "/u", 1), {"A": ("1", {"file": "/e"})})
    assert words[1][0] == "x" * 1_000_000 + "1" and time.monotonic() - start < 5


# -- drop-ins of other tools (src/shared/dropin.c, conf-files.c, load-fragment.c read upstream) ----------------------
def test_dropin_dirs_specific_then_dash_prefixes_then_type_level():
    dirs = sd.dropin_dirs("sriov-config.service")
    assert dirs[:3] == ["/etc/systemd/system.control/sriov-config.service.d",
                        "/etc/systemd/system.control/sriov-.service.d",
                        "/run/systemd/system.control/sriov-config.service.d"]
    assert dirs[-1] == "/run/systemd/generator.late/service.d"
    assert len(dirs) == 3 * len(sd.UNIT_DIRS)


def test_dropin_order_hides_names_by_directory_priority_and_sorts():
    listing = {"/usr/lib/systemd/system/containerd.service.d": ["10-a.conf", "50-x.conf"],
               "/etc/systemd/system/containerd.service.d": ["50-x.conf", ".hidden.conf", "README"],
               "/etc/systemd/system/service.d": ["10-a.conf", "99-all.conf"],
               "/run/systemd/transient/containerd.service.d": ["20-t.conf"]}
    assert sd.dropin_order(listing, "containerd.service") == [
        "/usr/lib/systemd/system/containerd.service.d/10-a.conf", "/run/systemd/transient/containerd.service.d/20-t.conf",
        "/etc/systemd/system/containerd.service.d/50-x.conf", "/etc/systemd/system/service.d/99-all.conf"]


OURS = "/etc/systemd/system/containerd.service.d/50-rdma-k8s-node-memlock.conf"


@pytest.mark.parametrize("later, found", [
    ("[Service]\nLimitMEMLOCK=64K\n", [("later_value", "64K", 2)]),
    ("[Service]\nLimitMEMLOCK=infinity\n", []),
    ("[Service]\nLimitMEMLOCK=64K\nLimitMEMLOCK=infinity\n", []),
    ("[Unit]\nLimitMEMLOCK=64K\n", []),
    ("[Service]\nLimitMEMLOCK=\n", [("later_value", "", 2)]),
])
def test_dropin_overrides_of_a_plain_setting(later, found):
    files = [(OURS, "[Service]\nLimitMEMLOCK=infinity\n"), ("/etc/systemd/system/containerd.service.d/99-x.conf", later)]
    got = sd.dropin_overrides(files, OURS, [("Service", "LimitMEMLOCK", "infinity")])
    assert [(o["kind"], o["value"], o["line"]) for o in got] == found


def test_dropin_overrides_of_a_list_setting_and_masking():
    ours = "/etc/systemd/system/openibd.service.d/10-ours.conf"
    mine = [("Service", "ExecStartPost", "-/sbin/modprobe nvidia_peermem")]
    reset = [(ours, "[Service]\nExecStartPost=-/sbin/modprobe nvidia_peermem\n"), ("/x/90.conf", "[Service]\nExecStartPost=\n")]
    assert [o["kind"] for o in sd.dropin_overrides(reset, ours, mine)] == ["reset"]
    readded = reset[:1] + [("/x/90.conf", "[Service]\nExecStartPost=\nExecStartPost=-/sbin/modprobe nvidia_peermem\n")]
    assert sd.dropin_overrides(readded, ours, mine) == []
    earlier = [("/x/05.conf", "[Service]\nExecStartPost=\n")] + reset[:1]
    assert sd.dropin_overrides(earlier, ours, mine) == []
    masked = [("/etc/systemd/system.control/openibd.service.d/10-ours.conf", "")]
    assert [(o["kind"], o["file"]) for o in sd.dropin_overrides(masked, ours, mine)] == [
        ("masked", "/etc/systemd/system.control/openibd.service.d/10-ours.conf")]
