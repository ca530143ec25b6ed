"""Bounded loaders for node text: aliases, nesting, size, huge numbers are ParseErrors."""

import pytest
import yaml

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._untrusted import load_json, load_yaml

BILLION_LAUGHS = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] +
                           ["%s: &%s [%s]" % (chr(98 + i), chr(98 + i), ", ".join(["*%s" % chr(97 + i)] * 9))
                            for i in range(8)]) + "\n"


def test_the_billion_laughs_is_refused_at_the_first_alias():
    with pytest.raises(ParseError, match=r"line 2: YAML aliases \(\*a\) are not accepted"):
        load_yaml(BILLION_LAUGHS, "/var/lib/kubelet/config.yaml")


@pytest.mark.parametrize("text, says", [
    ("[" * 10000, "nests deeper|not valid"),
    ("a: " + "[" * 200 + "]" * 200, "nests deeper"),
    ("a: !!python/object:os.system {}", "not valid YAML"),
    ("x" * (5 * 1024 * 1024), "larger than"),
])
def test_hostile_yaml_is_a_parse_error(text, says):
    with pytest.raises(ParseError, match=says):
        load_yaml(text, "/f.yaml")


def test_plain_kubelet_yaml_loads():
    text = "kind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: '0-1'\nfailSwapOn: True\n"
    assert load_yaml(text, "/f", yaml) == {"kind": "KubeletConfiguration", "cpuManagerPolicy": "static",
                                           "reservedSystemCPUs": "0-1", "failSwapOn": True}


@pytest.mark.parametrize("text, says", [("[" * 100000, "not valid JSON"), ("9" * 5000, "not valid JSON"),
                                        ("[" * 80 + "]" * 80, "nests deeper"), ("{", "not valid JSON")])
def test_hostile_json_is_a_parse_error(text, says):
    with pytest.raises(ParseError, match=says):
        load_json(text, "/f.json")
