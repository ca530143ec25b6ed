"""The node audit's timer on the simulated nodes (rdma_audit_node role, issue 21 item 3).

converge.yml installs it (health and netns layers, through /opt/hostroot), side_effect.yml starts its service once;
here the metrics it left in node_exporter's textfile directory are read with prometheus_client's text parser and
compared with the node's expectations in vars/<archetype>.yml (audit_node): the degraded DGX node fails and drifts,
the RoCE node is clean.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

SCENARIO = Path(__file__).resolve().parent.parent
TEXTFILE = "/var/lib/node_exporter/textfile_collector/rdma_k8s_node.prom"
PREFIX = "rdma_k8s_node_audit_"
VALUE = {"ok": 0, "drift": 1, "unknown": 2, "fail": 3}


@pytest.fixture(scope="module")
def expect(host):
    spec = host.run("printenv HWSIM_SPEC").stdout.strip()
    assert spec, "the container has no HWSIM_SPEC: was it made by this scenario's create.yml?"
    name = os.path.basename(spec)
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    with (SCENARIO / "vars" / f"{name}.yml").open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)["audit_node"]


@pytest.fixture(scope="module")
def families(host):
    textfile = host.file(TEXTFILE)
    assert textfile.is_file, f"{TEXTFILE} is missing: did side_effect.yml start rdma-k8s-node-audit.service?"
    return dict((f.name, f) for f in text_string_to_metric_families(textfile.content_string))


def test_timer_is_enabled_and_waiting(host):
    timer = host.service("rdma-k8s-node-audit.timer")
    assert timer.is_enabled
    assert host.run("systemctl is-active rdma-k8s-node-audit.timer").stdout.strip() == "active"
    assert host.file("/etc/systemd/system/rdma-k8s-node-audit.service").contains("^ProtectSystem=strict$")


def test_service_run_succeeded(host):
    shown = host.run("systemctl show --property=Result --property=ExecMainStatus rdma-k8s-node-audit.service")
    properties = dict(line.split("=", 1) for line in shown.stdout.split())
    assert properties == {"Result": "success", "ExecMainStatus": "0"}, host.run(
        "journalctl --no-pager -u rdma-k8s-node-audit.service -n 60").stdout


def test_metrics_of_every_check(families, expect):
    series = dict(((s.labels["layer"], s.labels["check"], s.labels["subject"], s.labels["status"]), s.value)
                  for s in families[PREFIX + "check_status"].samples)
    assert len(series) > 5
    not_ok = dict((key, value) for key, value in series.items() if key[3] != "ok")
    assert sorted(not_ok) == sorted(tuple(item) for item in expect["not_ok"])
    assert all(value == VALUE[key[3]] for key, value in series.items())
    assert {key[1] for key in series} >= {"netns.mode", "health.pcie_link"}


def test_metrics_of_the_node(families, expect, host):
    assert all(f.type == "gauge" for f in families.values())
    [status] = families[PREFIX + "status"].samples
    assert (status.labels["status"], status.value) == (expect["status"], VALUE[expect["status"]])
    counts = dict((s.labels["status"], s.value) for s in families[PREFIX + "checks"].samples)
    assert counts["fail"] + counts["drift"] + counts["unknown"] == len(expect["not_ok"])
    [labels] = families[PREFIX + "node_labels"].samples
    assert labels.labels["audit"] == expect["status"] and labels.labels["netns_mode"] == "shared"
    now = int(host.run("date +%s").stdout)
    finished = families[PREFIX + "last_run_timestamp_seconds"].samples[0].value
    assert now - 3600 < finished <= now + 1
    assert 0 < families[PREFIX + "run_duration_seconds"].samples[0].value < 600


def test_textfile_written_by_rename(host):
    """Only the .prom file is left in the directory (the temporary file was renamed over it), readable by all."""
    listing = host.run("ls -A /var/lib/node_exporter/textfile_collector").stdout.split()
    assert listing == ["rdma_k8s_node.prom"]
    assert host.file(TEXTFILE).mode == 0o644


def test_desired_state_reached_the_node(host, expect):
    options = yaml.safe_load(host.file("/etc/rdma-k8s-node/audit-node.yml").content_string)
    assert options["rdma_netns_mode"] == expect["netns_mode"]
    assert options["rdma_audit_host_root"] == "/opt/hostroot" and options["rdma_audit_layers"] == ["health", "netns"]
