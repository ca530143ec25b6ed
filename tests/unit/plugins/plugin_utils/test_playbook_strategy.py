"""The collection's playbooks that run tasks ``run_once`` (the audit's comparison and report files, validate's
pairing, provision's inventory-wide GUID check) pin the ``linear`` strategy: an ansible.cfg that configures ``free``
(or another free-running strategy such as mitogen_free) would otherwise run those tasks once per host, silently
(ansible-core does not honour run_once under a free strategy)."""

import pathlib

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[4]
ROLES = REPO / "roles"


def _roles_with_run_once():
    out = set()
    for path in ROLES.glob("*/tasks/*.yml"):
        if "run_once:" in path.read_text(encoding="utf-8"):
            out.add(path.parts[-3])
    return out


def _uses(play, roles):
    text = yaml.safe_dump(play)
    return "run_once" in text or any("rdma.k8s_node.%s" % role in text for role in roles)


@pytest.mark.parametrize("playbook", sorted(p.name for p in (REPO / "playbooks").glob("*.yml")))
def test_plays_that_run_once_pin_the_linear_strategy(playbook):
    roles = _roles_with_run_once()
    assert roles >= {"rdma_audit", "rdma_validate", "sriov"}, roles
    for play in yaml.safe_load((REPO / "playbooks" / playbook).read_text(encoding="utf-8")):
        if "import_playbook" in play or play.get("hosts") in ("localhost", "127.0.0.1"):
            continue  # one host: run_once is moot
        if _uses(play, roles):
            assert play.get("strategy") == "linear", "%s: play %r runs tasks once for all hosts" % (playbook, play["name"])


def test_the_audit_play_is_checked():
    play = yaml.safe_load((REPO / "playbooks/audit.yml").read_text(encoding="utf-8"))[0]
    assert _uses(play, _roles_with_run_once()) and play["strategy"] == "linear"
