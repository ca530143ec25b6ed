"""_containerd: limits, versions, unit drop-in order, base spec, effective config and file choice (pure)."""

import json

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import tomledit as _toml
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ConflictError, InputError, ParseError

INF = 18446744073709551615


@pytest.mark.parametrize("value,expected", [
    ("unlimited", INF), ("infinity", INF), ("4194304", 4194304), ("64M", 64 << 20), ("8k", 8192), (" 1G ", 1 << 30),
])
def test_parse_limit(value, expected):
    assert ctd.parse_limit(value) == expected


@pytest.mark.parametrize("value", ["", "-1", "0", "lots", "18446744073709551615", "16E", "1.5M"])
def test_parse_limit_rejects(value):
    with pytest.raises(InputError) as info:
        ctd.parse_limit(value)
    assert info.value.msg.startswith("memlock ")


@pytest.mark.parametrize("text,expected", [
    ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", (1, 6, 20)),
    ("containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", (1, 7, 27)),
    ("containerd github.com/containerd/containerd/v2 v2.1.9 unknown", (2, 1, 9)),
    ("containerd github.com/containerd/containerd/v2 2.1.9+unknown", (2, 1, 9)),
])
def test_parse_version(text, expected):
    assert ctd.parse_version(text) == expected


def test_parse_version_garbage():
    with pytest.raises(ParseError):
        ctd.parse_version("ctr: command not found")


@pytest.mark.parametrize("version,support", [((1, 6, 20), "absent"), ((1, 7, 0), "optional"), ((2, 0, 0), "default")])
def test_cdi_support(version, support):
    assert ctd.cdi_support(version) == support


def test_unit_limit_follows_systemd_order():
    unit = ("/lib/systemd/system/containerd.service", "[Service]\nLimitNOFILE=infinity\nLimitMEMLOCK=8M\n")
    dropins = [
        (0, "/etc/systemd/system/containerd.service.d/50-rdma.conf", "[Service]\nLimitMEMLOCK=infinity\n"),
        (3, "/usr/lib/systemd/system/containerd.service.d/10-vendor.conf", "[Service]\nLimitMEMLOCK=64K\n"),
        (3, "/usr/lib/systemd/system/containerd.service.d/50-rdma.conf", "[Service]\nLimitMEMLOCK=1\n"),  # masked
    ]
    ordered = ctd.order_unit_files(unit[0], unit[1], dropins)
    assert [p for p, dummy in ordered] == [unit[0], dropins[1][1], dropins[0][1]]
    assert ctd.unit_limit(ordered) == (INF, dropins[0][1])
    later = dropins + [(0, "/etc/systemd/system/containerd.service.d/90-other.conf", "[Unit]\nX=1\n[Service]\nLimitMEMLOCK=16M\n")]
    assert ctd.unit_limit(ctd.order_unit_files(unit[0], unit[1], later)) == (16 << 20, later[-1][1])


def test_unit_limit_empty_assignment_resets():
    files = [("/u", "[Service]\nLimitMEMLOCK=8M\n"), ("/d", "[Service]\nLimitMEMLOCK=\n")]
    assert ctd.unit_limit(files) == (None, "/d")


def test_proc_limits():
    text = ("Limit                     Soft Limit           Hard Limit           Units     \n"
            "Max locked memory         8388608              unlimited            bytes     \n")
    assert ctd.parse_proc_limits(text) == {"soft": 8388608, "hard": INF}


def oci_spec(realdata=None):
    if realdata is not None:
        return (realdata / "containerd/generated/containerd-v2.1.9_ctr-oci-spec.json").read_text()
    return json.dumps({"ociVersion": "1.2.1", "process": {"args": ["sh"], "rlimits": [
        {"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}, {"type": "RLIMIT_CORE", "hard": 0, "soft": 0}]}})


def test_base_spec_sets_memlock_and_nofile_exactly():
    text = ctd.build_base_spec(oci_spec(), INF, 1048576)
    assert '"hard": 18446744073709551615' in text and "e+19" not in text
    spec = json.loads(text)
    assert spec["process"]["rlimits"] == [
        {"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576}, {"type": "RLIMIT_CORE", "hard": 0, "soft": 0},
        {"type": "RLIMIT_MEMLOCK", "hard": INF, "soft": INF}]
    assert ctd.build_base_spec(oci_spec(), INF, 1048576) == text  # deterministic: idempotent writes


@pytest.mark.realdata
def test_base_spec_from_real_ctr_oci_spec(realdata):
    spec = json.loads(ctd.build_base_spec(oci_spec(realdata), 4194304, 16384))
    assert ctd.spec_rlimit(json.dumps(spec), "RLIMIT_MEMLOCK") == {"soft": 4194304, "hard": 4194304}
    assert ctd.spec_rlimit(json.dumps(spec), "RLIMIT_NOFILE") == {"soft": 16384, "hard": 16384}
    original = json.loads(oci_spec(realdata))
    del spec["process"]["rlimits"], original["process"]["rlimits"]
    assert spec == original


def test_base_spec_rejects_non_json():
    with pytest.raises(ParseError):
        ctd.build_base_spec("ctr: unknown command", INF, 1024)


V2_DUMP = '''version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = false
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    base_runtime_spec = ""
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
    runtime_type = "io.containerd.kata.v2"
'''
WANT = {"base_runtime_spec": "/etc/containerd/cri-base.json", "runtimes": [], "cdi": True,
        "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]}


def test_desired_keys_on_1_7_covers_runc_runtimes_and_cdi():
    eff = ctd.effective(_toml.parse(V2_DUMP))
    changes, warnings = ctd.desired_keys(eff, WANT, (1, 7, 24))
    assert changes == [("runtime", "nvidia", "base_runtime_spec", WANT["base_runtime_spec"]),
                       ("runtime", "runc", "base_runtime_spec", WANT["base_runtime_spec"]),
                       ("cri", None, "enable_cdi", True)]
    assert warnings == []
    assert ctd.key_diff(changes, eff)["runtimes.runc.base_runtime_spec"] == {"before": "", "after": WANT["base_runtime_spec"]}


def test_desired_keys_on_1_6_warns_about_cdi():
    eff = ctd.effective(_toml.parse(V2_DUMP.replace("  enable_cdi = false\n  cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n", "")))
    changes, warnings = ctd.desired_keys(eff, dict(WANT, runtimes=["runc"]), (1, 6, 20))
    assert changes == [("runtime", "runc", "base_runtime_spec", WANT["base_runtime_spec"])]
    assert "no CDI support" in warnings[0]


def test_named_runtime_must_exist_and_be_runc():
    eff = ctd.effective(_toml.parse(V2_DUMP))
    with pytest.raises(InputError) as info:
        ctd.desired_keys(eff, dict(WANT, runtimes=["runc", "youki"]), (1, 7, 0))
    assert info.value.msg.startswith("runtimes: youki not configured")
    with pytest.raises(InputError):
        ctd.desired_keys(eff, dict(WANT, runtimes=["kata"]), (1, 7, 0))


@pytest.mark.realdata
def test_effective_of_real_2_1_defaults(realdata):
    text = (realdata / "containerd/generated/containerd-v2.1.9_config-default.toml").read_text()
    eff = ctd.effective(_toml.parse(text))
    assert eff["config_version"] == 3 and eff["enable_cdi"] is True
    changes, dummy = ctd.desired_keys(eff, WANT, (2, 1, 9))
    assert changes == [("runtime", "runc", "base_runtime_spec", WANT["base_runtime_spec"])]  # CDI already on


def doc(text):
    return _toml.parse(text)


def test_choose_files_1x_section_owner_is_last_import_with_cri():
    main = ("/etc/containerd/config.toml", doc('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
                                               '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "x"\n'))
    other = ("/etc/containerd/conf.d/10-debug.toml", doc('version = 2\n[debug]\n  level = "debug"\n'))
    nvidia = ("/etc/containerd/conf.d/99-nvidia.toml", doc('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'))
    changes = [("runtime", "runc", "base_runtime_spec", "/s"), ("cri", None, "enable_cdi", True)]
    eff = ctd.effective(_toml.parse(V2_DUMP))
    # by default imported files are not edited: the override is reported and nothing is planned for it
    edits, dummy, overrides = ctd.choose_files([main, other, nvidia], changes, (1, 7, 24), eff)
    assert edits == {}
    assert [(o["file"], o["key"]) for o in overrides] == [(nvidia[0], "runtimes.runc.base_runtime_spec"),
                                                          (nvidia[0], "enable_cdi")]
    assert "replaces the whole" in overrides[0]["why"]
    message = ctd.override_message(overrides, main[0])
    assert nvidia[0] in message and "edit_imports=true" in message
    edits, dummy, overrides = ctd.choose_files([main, other, nvidia], changes, (1, 7, 24), eff, edit_imports=True)
    runc = ctd.CRI_V2 + ("containerd", "runtimes", "runc")
    # the owner file has no runc table yet: it is re-stated first, or 1.x would replace the built-in one
    assert edits == {2: [(runc, "runtime_type", ctd.RUNC_TYPE), (runc, "base_runtime_spec", "/s"),
                         (ctd.CRI_V2, "enable_cdi", True)]}


# Debian's stock /etc/containerd/config.toml (containerd 1.6.20~ds1-1+deb12u3 and 1.7.24~ds1-6+deb13u1): it
# defines no runtime, so runc exists only as containerd's built-in default.
DEBIAN_STOCK = '''version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
'''

# what `containerd config dump` of 1.7.24 prints for runc, before and after a file adds a runc table holding
# only base_runtime_spec (captured on the trixie image of the runtime scenario): the table replaced the default
DUMP_17_RUNC = '''version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  base_runtime_spec = "%s"
  cni_conf_dir = ""
  cni_max_conf_num = 0
  container_annotations = []
  pod_annotations = []
  privileged_without_host_devices = false
  runtime_type = "%s"
  sandbox_mode = "%s"
  snapshotter = ""
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
%s'''
ZERO_OPTIONS = '''    BinaryName = ""
    NoPivotRoot = false
    ShimCgroup = ""
    SystemdCgroup = false
'''


def test_new_runc_table_on_debian_stock_config_keeps_runtime_type_and_sandbox_mode():
    before = ctd.effective(_toml.parse(DUMP_17_RUNC % ("", ctd.RUNC_TYPE, "podsandbox", ZERO_OPTIONS)))
    assert before["runtime_settings"] == {"runc": {"runtime_type": ctd.RUNC_TYPE, "sandbox_mode": "podsandbox"}}
    changes, dummy = ctd.desired_keys(before, WANT, (1, 7, 24))
    edits, versions, dummy = ctd.choose_files([("/etc/containerd/config.toml", doc(DEBIAN_STOCK))], changes, (1, 7, 24),
                                              before)
    text = ctd.apply_edits(DEBIAN_STOCK, versions[0], edits[0], "config.toml")
    runc = _toml.parse(text).get(ctd.CRI_V2 + ("containerd", "runtimes", "runc"))
    # options is a map: re-stated whole, zero values too, so that `config dump` shows the built-in runtime unchanged
    assert runc == {"runtime_type": ctd.RUNC_TYPE, "sandbox_mode": "podsandbox",
                    "base_runtime_spec": WANT["base_runtime_spec"],
                    "options": {"BinaryName": "", "NoPivotRoot": False, "ShimCgroup": "", "SystemdCgroup": False}}
    assert 'bin_dir = "/usr/lib/cni"' in text   # the rest of the file is untouched


def test_runtime_drift_names_what_the_edit_broke():
    before = ctd.effective(_toml.parse(DUMP_17_RUNC % ("", ctd.RUNC_TYPE, "podsandbox", ZERO_OPTIONS)))
    broken = ctd.effective(_toml.parse(DUMP_17_RUNC % ("/s", "", "", "")))
    assert ctd.runtime_drift(before, broken) == [
        'runtimes.runc.runtime_type changed from "io.containerd.runc.v2" to null',
        'runtimes.runc.sandbox_mode changed from "podsandbox" to null']
    # only base_runtime_spec changed; an options table of zero values means the same as none
    fine = ctd.effective(_toml.parse(DUMP_17_RUNC % ("/s", ctd.RUNC_TYPE, "podsandbox", "")))
    assert ctd.runtime_drift(before, fine) == []
    gone = ctd.effective(_toml.parse("version = 2\n"))
    assert ctd.runtime_drift(before, gone) == ["runtime runc disappeared"]


def test_options_that_are_set_are_kept_when_seeding():
    dump = DUMP_17_RUNC % ("", ctd.RUNC_TYPE, "podsandbox", "    SystemdCgroup = true\n    BinaryName = \"/usr/bin/nvidia-container-runtime\"\n")
    eff = ctd.effective(_toml.parse(dump))
    runc = ctd.CRI_V2 + ("containerd", "runtimes", "runc")
    edits, dummy, dummy = ctd.choose_files([("/etc/containerd/config.toml", doc("version = 2\n"))],
                                           [("runtime", "runc", "base_runtime_spec", "/s")], (1, 6, 20), eff)
    assert edits[0] == [(runc + ("options",), "BinaryName", "/usr/bin/nvidia-container-runtime"),
                        (runc + ("options",), "SystemdCgroup", True), (runc, "runtime_type", ctd.RUNC_TYPE),
                        (runc, "sandbox_mode", "podsandbox"), (runc, "base_runtime_spec", "/s")]


def test_seeding_needs_the_current_settings():
    with pytest.raises(ConflictError) as info:
        ctd.choose_files([("/etc/containerd/config.toml", doc(DEBIAN_STOCK))],
                         [("runtime", "runc", "base_runtime_spec", "/s")], (1, 6, 20))
    assert "would replace them" in info.value.msg


def test_2x_merges_runtime_tables_so_nothing_is_seeded():
    eff = ctd.effective(_toml.parse(DUMP_17_RUNC % ("", ctd.RUNC_TYPE, "podsandbox", "")))
    edits, dummy, dummy = ctd.choose_files([("/etc/containerd/config.toml", doc("version = 3\n"))],
                                           [("runtime", "runc", "base_runtime_spec", "/s")], (2, 1, 9), eff)
    assert edits == {0: [(ctd.CRI_V3 + ("containerd", "runtimes", "runc"), "base_runtime_spec", "/s")]}


def test_choose_files_2x_per_key_and_file_versions():
    main = ("/etc/containerd/config.toml", doc("version = 2\n"))   # a v2 file on 2.x: v2 paths (migrated in memory)
    nvidia = ("/etc/containerd/conf.d/99-nvidia.toml", doc(
        "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\n  base_runtime_spec = '/old'\n"))
    changes = [("runtime", "runc", "base_runtime_spec", "/s"), ("runtime", "nvidia", "base_runtime_spec", "/s")]
    edits, versions, overrides = ctd.choose_files([main, nvidia], changes, (2, 1, 9))
    assert versions == [2, 3]
    # runc: nothing later sets it, so the main file; nvidia: the drop-in sets the key and would win -> reported
    assert edits == {0: [(ctd.CRI_V2 + ("containerd", "runtimes", "runc"), "base_runtime_spec", "/s")]}
    assert overrides == [{"file": nvidia[0], "key": "runtimes.nvidia.base_runtime_spec", "wanted": "/s", "value": "/old",
                          "why": "it is loaded after /etc/containerd/config.toml and sets the key (containerd 2.x: the "
                                 "last file wins)"}]
    edits, versions, overrides = ctd.choose_files([main, nvidia], changes, (2, 1, 9), edit_imports=True)
    assert edits == {0: [(ctd.CRI_V2 + ("containerd", "runtimes", "runc"), "base_runtime_spec", "/s")],
                     1: [(ctd.CRI_V3 + ("containerd", "runtimes", "nvidia"), "base_runtime_spec", "/s")]}


def test_version_1_config_is_refused_with_the_reason():
    main = ("/etc/containerd/config.toml", doc('[plugins.cri]\n  sandbox_image = "x"\n'))
    with pytest.raises(ConflictError) as info:
        ctd.choose_files([main], [("cri", None, "enable_cdi", True)], (1, 7, 0))
    assert "version 1" in info.value.msg


def test_version_3_config_on_1x_is_refused():
    with pytest.raises(ConflictError):
        ctd.file_version(doc("version = 3\n"), (1, 7, 0))


def test_apply_edits_new_file_gets_native_version():
    text = ctd.apply_edits("", 3, [(ctd.CRI_V3 + ("containerd", "runtimes", "runc"), "base_runtime_spec", "/s")], "c")
    assert text.startswith("version = 3\n")


# -- another tool's base spec: the derived copy --------------------------------------------------------------------
NODEADM_LIKE = '''{
  "ociVersion": "1.1.0",
  "process": {
    "cwd": "/",
    "rlimits": [
      {
        "type": "RLIMIT_NOFILE",
        "soft": 65536,
        "hard": 1048576
      }
    ]
  },
  "root": {"path": "rootfs"}
}'''


def test_derive_adds_memlock_after_the_last_entry_in_its_style():
    text = ctd.derive_spec(NODEADM_LIKE, INF, None, "s.json")
    assert text == NODEADM_LIKE.replace('''        "hard": 1048576
      }''', '''        "hard": 1048576
      },
      {
        "type": "RLIMIT_MEMLOCK",
        "soft": 18446744073709551615,
        "hard": 18446744073709551615
      }''')
    assert not text.endswith("\n")          # the owner's file had no trailing newline: neither has the copy
    assert ctd.derive_spec(text, INF, None, "s.json") == text   # a second derivation changes nothing


def test_derive_replaces_values_in_place_and_keeps_other_rlimits():
    text = ctd.derive_spec(NODEADM_LIKE, 4194304, 16384, "s.json")
    assert '"soft": 16384,\n        "hard": 16384' in text
    rlimits = json.loads(text)["process"]["rlimits"]
    assert rlimits == [{"type": "RLIMIT_NOFILE", "soft": 16384, "hard": 16384},
                       {"type": "RLIMIT_MEMLOCK", "soft": 4194304, "hard": 4194304}]
    again = ctd.derive_spec(text, INF, None, "s.json")       # memlock changes, the asked-for nofile stays
    assert json.loads(again)["process"]["rlimits"][1] == {"type": "RLIMIT_MEMLOCK", "soft": INF, "hard": INF}
    assert again.replace(str(INF), "4194304") == text


@pytest.mark.parametrize("text,expected", [
    # kubespray's one-line json.dumps (", " and ": "), one rlimit
    ('{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "hard": 65535, "soft": 65535}], "x": 1}}',
     '{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "hard": 65535, "soft": 65535}, {"type": "RLIMIT_MEMLOCK", '
     '"hard": 18446744073709551615, "soft": 18446744073709551615}], "x": 1}}'),
    # Go's compact json.Marshal, no rlimits at all
    ('{"process":{"cwd":"/"}}',
     '{"process":{"cwd":"/","rlimits":[{"type":"RLIMIT_MEMLOCK","hard":18446744073709551615,"soft":18446744073709551615}]}}'),
    ('{"process": {}}',
     '{"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": 18446744073709551615, "soft": 18446744073709551615}]}}'),
    ('{"process": {"rlimits": null}}',
     '{"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": 18446744073709551615, "soft": 18446744073709551615}]}}'),
    # tabs, an empty list
    ('{\n\t"process": {\n\t\t"rlimits": []\n\t}\n}\n',
     '{\n\t"process": {\n\t\t"rlimits": [\n\t\t\t{\n\t\t\t\t"type": "RLIMIT_MEMLOCK",\n\t\t\t\t"hard": 18446744073709551615,'
     '\n\t\t\t\t"soft": 18446744073709551615\n\t\t\t}\n\t\t]\n\t}\n}\n'),
    # an entry without soft: written whole
    ('{"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": 1}]}}',
     '{"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": 18446744073709551615, "soft": 18446744073709551615}]}}'),
])
def test_derive_in_the_files_style(text, expected):
    assert ctd.derive_spec(text, INF) == expected


def test_derive_sets_every_duplicate_entry():
    text = '{"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": 1, "soft": 1}, {"type": "RLIMIT_MEMLOCK", "hard": 2, "soft": 2}]}}'
    assert [r["hard"] for r in json.loads(ctd.derive_spec(text, 64))["process"]["rlimits"]] == [64, 64]


@pytest.mark.parametrize("text,phrase", [
    ("not json", "is not JSON"), ("[1]", "not a JSON object"), ('{"process": 1}', "'process' is not an object"),
    ('{"ociVersion": "1.0.0"}', "has no process object"), ('{"process": {"rlimits": 3}}', "not a list of objects"),
])
def test_derive_refuses_what_is_no_spec(text, phrase):
    with pytest.raises(ParseError) as info:
        ctd.derive_spec(text, INF, None, "/etc/containerd/x.json")
    assert phrase in info.value.msg and "/etc/containerd/x.json" in info.value.msg


def test_derived_names():
    assert ctd.derived_path("/etc/containerd/base-runtime-spec.json") == "/etc/containerd/rdma-k8s-node.base-runtime-spec.json"
    assert ctd.derived_source("/etc/containerd/rdma-k8s-node.cri-base.json") == "/etc/containerd/cri-base.json"
    assert ctd.derived_source("/etc/containerd/rdma-k8s-node-base-spec.json") is None
    assert ctd.derived_source("/etc/containerd/rdma-k8s-node.") is None


SPEC_WANT = {"memlock": INF, "nofile": None, "base_runtime_spec": "/etc/containerd/rdma-k8s-node-base-spec.json"}


def test_plan_specs_generate_derive_keep():
    satisfied = json.dumps({"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": INF, "soft": INF}]}})
    current = {"runc": "", "nvidia": "/etc/containerd/base-runtime-spec.json", "nvidia-cdi": "/etc/containerd/base-runtime-spec.json",
               "kata": "/opt/spec.json"}
    texts = {"/etc/containerd/base-runtime-spec.json": NODEADM_LIKE, "/opt/spec.json": satisfied}
    files, pointers, report, warnings = ctd.plan_specs(current, texts, SPEC_WANT, oci_spec())
    derived = "/etc/containerd/rdma-k8s-node.base-runtime-spec.json"
    assert sorted(files) == sorted([derived, SPEC_WANT["base_runtime_spec"]])   # one copy for both nvidia runtimes
    assert files[derived] == {"content": ctd.derive_spec(NODEADM_LIKE, INF), "kind": "derived",
                              "source": "/etc/containerd/base-runtime-spec.json"}
    assert pointers == {"runc": SPEC_WANT["base_runtime_spec"], "nvidia": derived, "nvidia-cdi": derived}
    assert report["nvidia"]["owner"] == "other" and "nodeadm" in report["nvidia"]["written_by"]
    assert report["kata"] == {"path": "/opt/spec.json", "owner": "other", "written_by": None, "action": "keep",
                              "spec": "/opt/spec.json", "note": report["kata"]["note"]}
    assert json.loads(files[SPEC_WANT["base_runtime_spec"]]["content"])["process"]["rlimits"][0]["hard"] == 1048576
    assert warnings == []


def test_plan_specs_a_derived_copy_follows_its_source():
    derived = "/etc/containerd/rdma-k8s-node.base-runtime-spec.json"
    edited = NODEADM_LIKE.replace('"cwd": "/"', '"cwd": "/srv"')          # the owner changed its file since
    texts = {derived: ctd.derive_spec(NODEADM_LIKE, INF), "/etc/containerd/base-runtime-spec.json": edited}
    files, pointers, report, warnings = ctd.plan_specs({"nvidia": derived}, texts, SPEC_WANT)
    assert files[derived]["content"] == ctd.derive_spec(edited, INF) and pointers == {} and warnings == []
    assert report["nvidia"]["owner"] == "rdma.k8s_node" and report["nvidia"]["derived_from"].endswith("/base-runtime-spec.json")
    # the source is gone: the copy is kept (only the rlimits set), with a warning
    texts["/etc/containerd/base-runtime-spec.json"] = None
    files, pointers, report, warnings = ctd.plan_specs({"nvidia": derived}, texts, SPEC_WANT)
    assert files[derived]["content"] == texts[derived] and "is gone" in warnings[0]


def test_plan_specs_refuses_a_missing_owner_spec_and_needs_ctr_for_a_new_one():
    with pytest.raises(ConflictError) as info:
        ctd.plan_specs({"runc": "/etc/containerd/gone.json"}, {"/etc/containerd/gone.json": None}, SPEC_WANT)
    assert "does not exist" in info.value.msg
    with pytest.raises(ParseError):
        ctd.plan_specs({"runc": ""}, {}, SPEC_WANT)
    with pytest.raises(ConflictError) as info:
        ctd.plan_specs({"runc": "spec.json"}, {}, SPEC_WANT)
    assert "not an absolute path" in info.value.msg
    assert ctd.needs_generated({"a": "/x", "b": ""}, "/g") and not ctd.needs_generated({"a": "/x"}, "/g")


def test_desired_keys_follow_the_spec_plan():
    eff = ctd.effective(_toml.parse(V2_DUMP))
    want = dict(WANT, cdi=False, spec_paths={"runc": "/a", "nvidia": ""})
    changes, dummy = ctd.desired_keys(eff, want, (1, 7, 24))
    assert changes == [("runtime", "runc", "base_runtime_spec", "/a")]      # nvidia: already ""


# -- config versions 4 and imported files ---------------------------------------------------------------------
def test_version_4_needs_containerd_2_3_and_uses_v3_paths():
    assert ctd.file_version(doc("version = 4\n"), (2, 3, 4)) == 4
    assert ctd.cri_paths(4) == ctd.cri_paths(3)
    assert ctd.native_version((2, 3, 0)) == 4 and ctd.native_version((2, 2, 7)) == 3
    with pytest.raises(ConflictError) as info:
        ctd.file_version(doc("version = 4\n"), (2, 2, 7))
    assert "2.3 or later" in info.value.msg
    eff = ctd.effective(_toml.parse("version = 4\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n"))
    assert eff["enable_cdi"] is True


def test_imported_file_without_version_reads_version_2_names():
    dropin = doc('[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n')
    assert ctd.file_version(dropin, (1, 7, 0), imported=True) == 2
    assert ctd.file_version(dropin, (1, 7, 0)) == 1
    main = ("/etc/containerd/config.toml", doc("version = 2\n"))
    edits, dummy, overrides = ctd.choose_files([main, ("/d.toml", dropin)], [("cri", None, "enable_cdi", True)], (1, 7, 0))
    assert overrides[0]["file"] == "/d.toml" and overrides[0]["value"] is False and edits == {}


def test_2x_key_set_in_an_earlier_file_is_overridden_by_the_collections_dropin():
    main = ("/k3s/config.toml", doc("version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n"))
    ours = ("/k3s/config-v3.toml.d/50-rdma-k8s-node.toml", doc(""))
    later = ("/k3s/config-v3.toml.d/90-user.toml",
             doc("version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n"
                 "  base_runtime_spec = '/u.json'\n"))
    changes = [("cri", None, "enable_cdi", True), ("runtime", "runc", "base_runtime_spec", "/s")]
    edits, versions, overrides = ctd.choose_files([main, ours, later], changes, (2, 1, 4), target=1, new_version=3)
    assert versions == [3, 3, 3]
    assert edits == {1: [(ctd.CRI_V3, "enable_cdi", True)]}                 # ours sorts after config.toml: it wins
    assert [(o["file"], o["key"], o["value"]) for o in overrides] == [(later[0], "runtimes.runc.base_runtime_spec", "/u.json")]


# -- generated configs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,text,expected", [
    ("/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
     "# File generated by k3s. DO NOT EDIT. Use config-v3.toml.tmpl instead.\nversion = 3\n",
     {"tool": "k3s", "header": "# File generated by k3s. DO NOT EDIT. Use config-v3.toml.tmpl instead."}),
    ("/var/lib/rancher/rke2/agent/etc/containerd/config.toml", "version = 3\n", {"tool": "rke2", "header": None}),
    ("/opt/k3s-data/agent/etc/containerd/config.toml", "# File generated by k3s. DO NOT EDIT.\n",   # --data-dir
     {"tool": "k3s", "header": "# File generated by k3s. DO NOT EDIT."}),
    ("/etc/containerd/config.toml", "# Managed by Puppet. DO NOT EDIT.\nversion = 2\n",
     {"tool": None, "header": "# Managed by Puppet. DO NOT EDIT."}),
    ("/etc/containerd/config.toml", "# generated with `containerd config default`, then edited\nversion = 2\n", None),
    ("/etc/containerd/config.toml", "version = 2\n# DO NOT EDIT below\n", None),   # only the header counts
    ("/etc/containerd/config.toml", "", None),
])
def test_generated_config(path, text, expected):
    assert ctd.generated_config(path, text) == expected


def test_dropin_dir_and_refusals():
    k3s = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
    main = doc('version = 3\nimports = ["/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.d/*.toml"]\n')
    assert ctd.dropin_dir(main, k3s) == "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.d"
    assert ctd.dropin_dir(doc('imports = ["conf.d/*.toml", "/x/*/y.toml"]\n'), "/etc/containerd/config.toml") == \
        "/etc/containerd/conf.d"
    assert ctd.dropin_dir(doc("version = 3\n"), k3s) is None
    info = {"tool": "k3s", "header": "# File generated by k3s. DO NOT EDIT."}
    changes = [("runtime", "runc", "base_runtime_spec", "/etc/containerd/rdma-k8s-node-base-spec.json")]
    old = ctd.generated_refusal(k3s, info, (1, 7, 27), changes)
    assert "table twice" in old and "config.toml.tmpl" in old and "containerd 2.x" in old
    assert old.endswith('The settings it needs: runtimes.runc.base_runtime_spec = "/etc/containerd/rdma-k8s-node-base-spec.json".')
    new = ctd.generated_refusal(k3s, info, (2, 1, 4), changes)
    assert "config-v3.toml.d" in new and "Upgrade k3s" in new
    assert "edit_generated=true" in ctd.generated_refusal("/etc/containerd/config.toml", {"tool": None, "header": "# x"},
                                                          (2, 1, 4))


# -- found by the fuzz suite (tests/unit/fuzz/test_runtime_facts.py) -----------------------------------------------
@pytest.mark.parametrize("line", ["Max locked memory", "Max locked memory  8388608", "Max locked memory  x  y  bytes",
                                  "Max locked memory  " + "1" * 5000 + "  1  bytes"])
def test_proc_limits_malformed_line_is_a_parse_error(line):
    """IndexError (one field), ValueError (not a number, or 5,000 digits) escaped before."""
    with pytest.raises(ParseError, match="unexpected 'Max locked memory' line"):
        ctd.parse_proc_limits("Limit  Soft Limit  Hard Limit  Units\n" + line + "\n")
    assert ctd.parse_proc_limits("Max locked memory  unlimited  8388608  bytes") == {
        "soft": ctd.RLIM_INFINITY, "hard": 8388608}


def test_numbers_int_refuses_are_typed_errors():
    """5,000 digits: int() raised ValueError (int max str digits) in LimitMEMLOCK=, memlock and the version."""
    with pytest.raises(ParseError, match="cannot read LimitMEMLOCK"):
        ctd.parse_systemd_limit("1" * 5000)
    with pytest.raises(InputError, match="must be 'unlimited' or a byte count"):
        ctd.parse_limit("1" * 5000 + "M")
    with pytest.raises(ParseError, match="cannot read a containerd version"):
        ctd.parse_version("containerd containerd.io 1." + "9" * 5000)


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, '{"process": 5}', '{"process": {"rlimits": 7}}',
                                  '{"process": []}'])
def test_spec_rlimit_of_any_json_is_none(text):
    """RecursionError, AttributeError (process not an object) and TypeError (rlimits not a list) escaped before."""
    assert ctd.spec_rlimit(text, "RLIMIT_MEMLOCK") is None


def test_effective_of_a_dump_with_tables_of_the_wrong_type():
    """'runtimes = 5' in a config: AttributeError ('int' object has no attribute 'items') before."""
    doc = _toml.parse('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nruntimes = 5\n')
    assert ctd.effective(doc)["runtimes"] == {}


def test_key_sources_name_the_file_containerd_keeps_a_key_from():
    main = ("/etc/containerd/config.toml", doc('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
                                               '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n'))
    nvidia = ("/etc/containerd/conf.d/99-nvidia.toml", doc(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  base_runtime_spec = "/s"\n'))
    eff = ctd.effective(_toml.parse(V2_DUMP))
    # 1.x: the drop-in names the CRI plugin, so every CRI key comes from it (enable_cdi: its default, not config.toml's)
    assert ctd.key_sources([main, nvidia], (1, 7, 24), eff) == {
        "runtimes.nvidia.base_runtime_spec": None, "runtimes.runc.base_runtime_spec": nvidia[0], "enable_cdi": None,
        "cdi_spec_dirs": None}
    # 2.x: key by key
    assert ctd.key_sources([main, nvidia], (2, 1, 4), eff) == {
        "runtimes.nvidia.base_runtime_spec": None, "runtimes.runc.base_runtime_spec": nvidia[0],
        "enable_cdi": main[0], "cdi_spec_dirs": None}
    assert ctd.rancher_bin_dirs("/var/lib/rancher/rke2/agent/etc/containerd/config.toml") == [
        "/var/lib/rancher/rke2/data/current/bin", "/var/lib/rancher/rke2/bin"]
    assert ctd.rancher_bin_dirs("/etc/containerd/config.toml") == []
