"""layers/kubelet/rules.py: JSON/YAML documents, command-line flags, the kubelet's layers and the planner (pure).

Merge semantics from the kubelet: cmd/kubelet/app/server.go mergeKubeletConfigurations (filepath.WalkDir of
--config-dir, ``*.conf``, jsonpatch.MergePatch in order) and kubeletConfigFlagPrecedence (flags re-parsed over the
result; feature gates merged back); flag names and parsers from cmd/kubelet/app/options/options.go.
"""

import json
import pathlib

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.kubelet import rules as kub
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ApplyError, ConflictError, ParseError

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "realworld"
AL2 = (CORPUS / "eks-al2/etc/kubernetes/kubelet/kubelet-config.json").read_text()
AL2023 = (CORPUS / "eks-al2023/etc/kubernetes/kubelet/config.json").read_text()
NODEADM_DROPIN = (CORPUS / "eks-al2023/etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf").read_text()
KUBESPRAY = (CORPUS / "kubespray/etc/kubernetes/kubelet-config.yaml.raw").read_text()
WANT = {"topologyManagerPolicy": "single-numa-node", "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}}


# -- documents -------------------------------------------------------------------------------------------------------
def test_load_document_json_yaml_and_json_in_a_conf():
    assert kub.load_document(AL2, "a")[1] == "json"
    assert kub.load_document(NODEADM_DROPIN, "b") == (json.loads(NODEADM_DROPIN), "json")
    data, fmt = kub.load_document(KUBESPRAY, "c")
    assert fmt == "yaml" and data["containerRuntimeEndpoint"] == "unix:///var/run/containerd/containerd.sock"
    assert data["failSwapOn"] is True
    assert kub.load_document(kub.OWN_HEADER + "\n{\"a\": 1}\n", "d") == ({"a": 1}, "yaml")
    assert kub.load_document("", "e") == ({}, "yaml")


@pytest.mark.parametrize("text,message", [
    ('{"a": 1, "a": 2}', "has the key 'a' twice"),
    ("[1, 2]", "must hold a YAML mapping"),
    ('{"a": 1', "is not valid YAML"),
    ("- a\n", "must hold a YAML mapping"),
    ("a: [1\n", "is not valid YAML"),
    ("a: &x 1\nb: *x\n", "aliases"),
    ("[" * 200 + "]" * 200, "nests deeper"),
])
def test_malformed_documents_are_parse_errors_naming_the_file(text, message):
    with pytest.raises(ParseError) as info:
        kub.load_document(text, "/etc/kubernetes/x.conf")
    assert message in info.value.msg and "/etc/kubernetes/x.conf" in info.value.msg


@pytest.mark.parametrize("text,indent", [(AL2, "  "), (AL2023, "    ")])
def test_json_edit_keeps_every_byte_and_the_indentation(text, indent):
    new = kub.json_set_top_level(text, dict(WANT, cgroupDriver="systemd"), "x")
    head = text.rstrip()[:-1].rstrip()
    assert new.replace('"cgroupDriver": "systemd"', '"cgroupDriver": "cgroupfs"').startswith(head) or \
        new.startswith(head)
    assert ('\n%s"topologyManagerPolicyOptions": {\n%s%s"prefer-closest-numa-nodes": "true"\n%s}\n}\n'
            % (indent, indent, indent, indent)) in new
    data = json.loads(new)
    assert list(data)[-2:] == ["topologyManagerPolicy", "topologyManagerPolicyOptions"]
    assert dict((k, v) for k, v in data.items() if k not in WANT and k != "cgroupDriver") == \
        dict((k, v) for k, v in json.loads(text).items() if k != "cgroupDriver")
    if "tlsCipherSuites\": [\"" in text:  # AL2's one-line list stays one line
        assert [line for line in text.splitlines() if "tlsCipherSuites" in line][0] + "," in new.splitlines()


@pytest.mark.parametrize("text,expected", [
    ('{"a":1}', '{"a":1,"topologyManagerPolicy":"none"}'),
    ('{"a": 1, "b": 2}', '{"a": 1, "b": 2, "topologyManagerPolicy": "none"}'),
    ("{}\n", '{\n  "topologyManagerPolicy": "none"\n}\n'),
    ('{\n\t"topologyManagerPolicy": "best-effort"\n}', '{\n\t"topologyManagerPolicy": "none"\n}'),
])
def test_json_edit_styles(text, expected):
    assert kub.json_set_top_level(text, {"topologyManagerPolicy": "none"}, "x") == expected


def test_yaml_edit_keeps_comments_and_odd_spacing():
    text = "# kubespray\n" + KUBESPRAY + "topologyManagerPolicy : none   # old\ntopologyManagerPolicyOptions:\n" \
        "# a comment inside\n  max-allowable-numa-nodes: '16'\n\nlast: 1\n"
    new = kub.edit_document(text, "yaml", {"topologyManagerPolicy": "restricted",
                                           "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"}}, "x")
    assert new.startswith("# kubespray\n" + KUBESPRAY)
    assert new.endswith("topologyManagerPolicy: restricted\ntopologyManagerPolicyOptions:\n  prefer-closest-numa-nodes: "
                        "'true'\n\nlast: 1\n")


def test_edit_document_refuses_what_it_cannot_edit_exactly():
    with pytest.raises(ApplyError) as info:
        kub.edit_document("{a: 1, b: 2}\n", "yaml", {"topologyManagerPolicy": "none"}, "/x.yaml")
    assert "/x.yaml" in info.value.msg and "nothing was written" in info.value.msg


def test_edit_document_json_without_change_of_other_keys():
    new = kub.edit_document(AL2023, "json", kub.config_update(json.loads(AL2023), WANT), "x")
    assert json.loads(new)["kubeReserved"] == json.loads(AL2023)["kubeReserved"]


def test_a_config_map_of_options_keeps_the_owners_options():
    data = {"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"}}
    assert kub.config_update(data, WANT)["topologyManagerPolicyOptions"] == {
        "max-allowable-numa-nodes": "16", "prefer-closest-numa-nodes": "true"}


# -- merge and flags -------------------------------------------------------------------------------------------------
def test_merge_is_a_json_merge_patch_where_null_changes_nothing():
    base = {"authorization": {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "5m"}}, "clusterDNS": ["a", "b"],
            "featureGates": {"A": True}, "topologyManagerPolicy": "none"}
    patch = {"authorization": {"webhook": {"cacheAuthorizedTTL": "8m"}}, "clusterDNS": ["c"],
             "featureGates": {"B": False}, "topologyManagerPolicy": None}
    assert kub.merge(base, patch) == {"authorization": {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "8m"}},
                                      "clusterDNS": ["c"], "featureGates": {"A": True, "B": False},
                                      "topologyManagerPolicy": "none"}


def test_parse_command_as_pflag_reads_it():
    words = [(w, None) for w in ["/usr/bin/kubelet", "--config", "/c.yaml", "--topology_manager_policy=restricted",
                                 "-v", "2", "--fail-swap-on", "--reserved-cpus", "0-1", "--", "--cpu-manager-policy=static"]]
    flags = kub.parse_command(words)
    assert [(f["name"], f["value"]) for f in flags] == [("config", "/c.yaml"), ("topology-manager-policy", "restricted"),
                                                        ("fail-swap-on", "true"), ("reserved-cpus", "0-1")]
    assert flags[0]["words"] == [1, 2]


def _flags(*texts):
    return [dict(f, source="test") for f in kub.relevant_flags(kub.parse_command([(t, None) for t in texts], 0))]


def test_flag_settings_parse_as_the_kubelet_does():
    settings = kub.flag_settings(_flags(
        "--topology-manager-policy=best-effort", "--topology-manager-policy=restricted",
        "--topology-manager-policy-options=prefer-closest-numa-nodes=true",
        "--topology-manager-policy-options=max-allowable-numa-nodes=16",
        "--kube-reserved=cpu=100m,memory=1Gi", "--kube-reserved=pid=100", "--eviction-hard=memory.available<200Mi",
        "--feature-gates=TopologyManagerPolicyAlphaOptions=true,Foo=0",
        "--reserved-memory", "0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=2Gi", "--reserved-memory=2:memory=1Gi"))
    assert settings == {
        "topologyManagerPolicy": "restricted",
        "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "16"},
        "kubeReserved": {"cpu": "100m", "memory": "1Gi", "pid": "100"},
        "evictionHard": {"memory.available": "200Mi"},
        "featureGates": {"TopologyManagerPolicyAlphaOptions": True, "Foo": False},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi", "hugepages-1Gi": "2Gi"}},
                           {"numaNode": 1, "limits": {"memory": "2Gi"}}, {"numaNode": 2, "limits": {"memory": "1Gi"}}]}


@pytest.mark.parametrize("flag", ["--topology-manager-policy-options=prefer", "--kube-reserved=cpu",
                                  "--feature-gates=A=maybe", "--reserved-memory=x:memory=1Gi", "--eviction-hard=a=b"])
def test_a_flag_value_the_kubelet_refuses_is_a_parse_error(flag):
    with pytest.raises(ParseError) as info:
        kub.flag_settings(_flags(flag))
    assert flag.split("=", 1)[0] in info.value.msg and "refuses to start" in info.value.msg


def test_flags_override_files_a_map_flag_replaces_the_map_feature_gates_merge():
    layers = [{"kind": "config", "path": "/c", "settings": {"kubeReserved": {"cpu": "1", "memory": "1Gi"},
                                                            "featureGates": {"A": True}, "cpuManagerPolicy": "static"}},
              kub.flags_layer(_flags("--kube-reserved=cpu=2", "--feature-gates=B=true", "--cpu-manager-policy=none"), "/u")]
    assert kub.effective(layers) == {"kubeReserved": {"cpu": "2"}, "featureGates": {"A": True, "B": True},
                                     "cpuManagerPolicy": "none"}


# -- layers and the planner ------------------------------------------------------------------------------------------
def _config(**settings):
    return {"kind": "config", "path": "/etc/kubelet/config.json", "settings": settings}


def _dropin(name, ours=False, **settings):
    return {"kind": "dropin", "path": "/d/" + name, "name": name, "settings": settings, "ours": ours}


DROPIN_TARGET = {"mode": "dropin", "dir": "/d", "name": kub.DEFAULT_DROPIN_NAME}
CONFIG_TARGET = {"mode": "config", "path": "/etc/kubelet/config.json"}


def test_walk_order_subdirectories_come_with_their_name():
    names = ["50-x.conf", "40-sub/zz.conf", "60-y.conf", "40-sub/aa.conf", "zz-z.conf"]
    assert sorted(names, key=kub.walk_key) == ["40-sub/aa.conf", "40-sub/zz.conf", "50-x.conf", "60-y.conf", "zz-z.conf"]


def test_plan_places_the_drop_in_and_finds_nothing_to_override():
    layers = [_config(topologyManagerPolicy="none"), _dropin("40-nodeadm.conf", maxPods=58),
              kub.flags_layer([], "/u")]
    planned = kub.plan(layers, WANT, DROPIN_TARGET)
    assert [layer["path"] for layer in planned["layers"]] == [
        "/etc/kubelet/config.json", "/d/40-nodeadm.conf", "/d/" + kub.DEFAULT_DROPIN_NAME, "/u"]
    assert planned["ours"] == 2 and planned["conflicts"] == [] and planned["delete"] == []
    assert planned["after"]["topologyManagerPolicy"] == "single-numa-node"
    assert kub.changes(planned["before"], planned["after"], WANT) == {
        "topologyManagerPolicy": {"before": "none", "after": "single-numa-node"},
        "topologyManagerPolicyOptions": {"before": None, "after": {"prefer-closest-numa-nodes": "true"}}}


def test_a_later_drop_in_fails_ignores_or_is_beaten_by_a_later_name():
    later = _dropin("60-user.conf", topologyManagerPolicy="best-effort",
                    topologyManagerPolicyOptions={"prefer-closest-numa-nodes": "false", "max-allowable-numa-nodes": "16"})
    layers = [_config(), later, kub.flags_layer([], "/u")]
    with pytest.raises(ConflictError) as info:
        kub.plan(layers, WANT, DROPIN_TARGET)
    assert len(info.value.details["conflicts"]) == 2
    assert "topologyManagerPolicyOptions.prefer-closest-numa-nodes=\"true\" is overridden by the later drop-in " \
           "/d/60-user.conf" in info.value.msg
    ignored = kub.plan(layers, WANT, DROPIN_TARGET, "ignore")
    assert [(c["key"], c["option"]) for c in ignored["conflicts"]] == [
        ("topologyManagerPolicy", None), ("topologyManagerPolicyOptions", "prefer-closest-numa-nodes")]
    won = kub.plan(layers, WANT, DROPIN_TARGET, "override")
    assert won["name"] == "99-rdma-k8s-node-topology.conf" and won["conflicts"] == []
    assert len(won["overridden"]) == 2
    assert won["after"]["topologyManagerPolicyOptions"] == {"prefer-closest-numa-nodes": "true",
                                                            "max-allowable-numa-nodes": "16"}
    zz = kub.plan([_config(), dict(later, name="zz-user.conf", path="/d/zz-user.conf"), kub.flags_layer([], "/u")],
                  WANT, DROPIN_TARGET, "override")
    assert zz["name"] == "zzzz-rdma-k8s-node-topology.conf"


def test_the_collections_own_drop_ins_are_replaced_not_counted_as_rivals():
    layers = [_config(), _dropin("60-user.conf", topologyManagerPolicy="best-effort"),
              _dropin("99-rdma-k8s-node-topology.conf", ours=True, **WANT), kub.flags_layer([], "/u")]
    again = kub.plan(layers, WANT, DROPIN_TARGET, "override", own_content=dict(WANT))
    assert again["name"] == "99-rdma-k8s-node-topology.conf" and again["delete"] == []
    with pytest.raises(ConflictError):  # on_conflict=fail: back to 50-..., where 60-user.conf wins
        kub.plan(layers, WANT, DROPIN_TARGET)
    gone = kub.plan([layers[0], layers[2], layers[3]], WANT, DROPIN_TARGET)
    assert gone["name"] == kub.DEFAULT_DROPIN_NAME and gone["delete"] == ["/d/99-rdma-k8s-node-topology.conf"]


def test_an_earlier_drop_in_is_no_conflict():
    layers = [_config(), _dropin("10-early.conf", topologyManagerPolicy="best-effort"), kub.flags_layer([], "/u")]
    assert kub.plan(layers, WANT, DROPIN_TARGET)["conflicts"] == []


def test_config_mode_against_a_drop_in_override_is_refused_with_the_way_out():
    layers = [_config(), _dropin("40-nodeadm.conf", topologyManagerPolicy="none"), kub.flags_layer([], "/u")]
    with pytest.raises(ConflictError) as info:
        kub.plan(layers, WANT, CONFIG_TARGET, "override")
    assert "mode=dropin" in info.value.msg and "/d/40-nodeadm.conf" in info.value.msg
    with pytest.raises(ApplyError):
        kub.plan([kub.flags_layer([], "/u")], WANT, CONFIG_TARGET)


def _env_flag(text, var="KUBELET_EXTRA_ARGS", path="/etc/default/kubelet", how="EnvironmentFile"):
    flag = _flags(text)[0]
    flag["origin"] = {"file": path, "how": how, "var": var}
    flag["source"] = "$%s from %s" % (var, path)
    return flag


def test_flags_override_files_and_override_takes_them_out_of_environment_files():
    flag = _env_flag("--topology-manager-policy=none")
    layers = [_config(topologyManagerPolicy="restricted"), kub.flags_layer([flag], "/u")]
    with pytest.raises(ConflictError) as info:
        kub.plan(layers, WANT, CONFIG_TARGET)
    assert "the command-line flag --topology-manager-policy=none ($KUBELET_EXTRA_ARGS from /etc/default/kubelet)" \
        in info.value.msg
    won = kub.plan(layers, WANT, CONFIG_TARGET, "override")
    assert won["remove_flags"] == [flag] and won["after"]["topologyManagerPolicy"] == "single-numa-node"


@pytest.mark.parametrize("how,var,message", [
    ("Environment", "KUBELET_ARGS", "Environment= in /u/10.conf"),
    ("ExecStart", None, "ExecStart= of /u/10.conf"),
    ("process", None, "the running kubelet's command line"),
])
def test_override_does_not_edit_units_or_unknown_command_lines(how, var, message):
    flag = _env_flag("--cpu-manager-policy=none", var=var, path="/u/10.conf", how=how)
    with pytest.raises(ConflictError) as info:
        kub.plan([_config(), kub.flags_layer([flag], "/u")], {"cpuManagerPolicy": "static"}, CONFIG_TARGET, "override")
    assert message in info.value.msg and "does not edit systemd units" in info.value.msg


def test_override_keeps_a_policy_option_flag_that_carries_options_the_collection_does_not_set():
    flags = [_env_flag("--topology-manager-policy-options=max-allowable-numa-nodes=16")]
    with pytest.raises(ConflictError) as info:
        kub.plan([_config(), kub.flags_layer(flags, "/u")], WANT, CONFIG_TARGET, "override")
    assert "max-allowable-numa-nodes" in info.value.msg and "move that option" in info.value.msg


def test_reserved_memory_compares_quantities():
    want = {"reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}
    layers = [_config(), kub.flags_layer(_flags("--reserved-memory=0:memory=1024Mi"), "/u")]
    assert kub.plan(layers, want, CONFIG_TARGET)["conflicts"] == []


def test_remove_flags_from_env_keeps_the_rest():
    text = 'A=1\nKUBELET_EXTRA_ARGS="--cpu-manager-policy none --max-pods=200" # x\n'
    assert kub.remove_flags_from_env(text, "KUBELET_EXTRA_ARGS", {"cpu-manager-policy"}, "/f") == \
        'A=1\nKUBELET_EXTRA_ARGS="--max-pods=200" # x\n'
    with pytest.raises(ApplyError):
        kub.remove_flags_from_env(text, "KUBELET_EXTRA_ARGS", {"topology-manager-policy"}, "/f")
    with pytest.raises(ApplyError):
        kub.remove_flags_from_env(text, "OTHER", {"cpu-manager-policy"}, "/f")


@pytest.mark.parametrize("facts,mode,expected", [
    ({"version": "1.31.2", "config_dir": "/d", "config_file": "/c"}, "auto", "dropin"),
    ({"version": "1.29.2", "config_dir": "/d", "config_file": "/c"}, "auto", "config"),
    ({"version": None, "config_dir": "/d", "config_file": "/c"}, "auto", "dropin"),
    ({"version": "1.31.2", "config_dir": "/d", "config_file": "/c"}, "config", "config"),
    ({"version": "1.31.2", "config_dir": None, "config_file": "/c"}, "auto", "config"),
])
def test_audit_target(facts, mode, expected):
    assert kub.audit_target(facts, mode)["mode"] == expected


def test_yaml_rendering_of_the_own_drop_in_is_what_earlier_releases_wrote():
    content = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cpuManagerPolicy": "static"}
    assert kub.render_own_dropin(content) == "# Managed by rdma.k8s_node.kubelet_topology\n" + yaml.safe_dump(
        content, default_flow_style=False, sort_keys=False)


def test_reserved_cpus_compare_as_cpu_sets():
    layers = [_config(), kub.flags_layer(_flags("--reserved-cpus=0,1"), "/u")]
    assert kub.plan(layers, {"reservedSystemCPUs": "0-1"}, CONFIG_TARGET)["conflicts"] == []
    with pytest.raises(ConflictError):
        kub.plan(layers, {"reservedSystemCPUs": "0-2"}, CONFIG_TARGET)


@pytest.mark.parametrize("data", [
    {"topologyManagerPolicy": ["none"]}, {"reservedSystemCPUs": 0}, {"kubeReserved": ["cpu=1"]},
    {"topologyManagerPolicyOptions": {"a": {"b": 1}}}, {"reservedMemory": {"numaNode": 0}},
    {"reservedMemory": [{"numaNode": "0", "limits": {}}]}, {"featureGates": "A=true"},
])
def test_fields_of_the_wrong_type_are_refused_naming_the_file(data):
    with pytest.raises(ParseError) as info:
        kub.check_shapes(data, "/etc/k.json")
    assert "/etc/k.json: %s must be" % list(data)[0] in info.value.msg


def test_override_refuses_a_flag_whose_value_comes_from_another_variable():
    one, two = {"file": "/f", "how": "EnvironmentFile", "var": "A"}, {"file": "/f", "how": "EnvironmentFile", "var": "B"}
    flags = kub.relevant_flags(kub.parse_command([("--cpu-manager-policy", one), ("none", two)], 0))
    assert flags[0]["origin"]["split"] is True
    with pytest.raises(ConflictError) as info:
        kub.plan([_config(), kub.flags_layer(flags, "/u")], {"cpuManagerPolicy": "static"}, CONFIG_TARGET, "override")
    assert "separate word that comes from another variable" in info.value.msg
