"""scripts/lib/molecule_digest.py, the failed tasks printed at the end of a CI log, on the output of a real
ansible-playbook run (this venv's ansible-core, its default callback, as molecule runs it)."""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

LIB = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "lib"
SPEC = importlib.util.spec_from_file_location("molecule_digest", LIB / "molecule_digest.py")
digest = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(digest)

PLAY = """
- name: A side effect that fails
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Expected to fail, ignored
      ansible.builtin.command: "false"
      ignore_errors: true
    - name: A long script that fails at its end
      ansible.builtin.shell:
        cmd: |
          {filler}
          echo "the reason at the end" >&2
          exit 3
        executable: /bin/bash
      changed_when: false
"""


@pytest.fixture(scope="module")
def real_log(tmp_path_factory):
    """(directory, log text) of a real failing playbook, its output framed by molecule's step lines."""
    playbook = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable) + os.pathsep
                            + os.environ.get("PATH", ""))
    if playbook is None:
        pytest.skip("ansible-playbook is not installed")
    out = tmp_path_factory.mktemp("molecule")
    (out / "play.yml").write_text(PLAY.format(filler="\n          ".join(["true  # filler"] * 150)),
                                  encoding="utf-8")
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="1", ANSIBLE_NOCOLOR="0", ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_LOCALHOST_WARNING="0")
    run = subprocess.run([playbook, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                          str(out / "play.yml")], env=env,
                         capture_output=True, text=True, check=False, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    text = ("INFO     [node_vm > side_effect] Executing\n" + run.stdout
            + "INFO     [node_vm > destroy] Executing\nPLAY [Destroy] ***\n")
    (out / "molecule.log").write_text(text, encoding="utf-8")
    return out, text


def test_the_failed_task_with_its_reason(real_log):
    out, text = real_log
    assert "\x1b[" in text          # colours, as molecule's output has them
    assert digest.main(str(out)) == 0
    report = (out / "failures.txt").read_text(encoding="utf-8")
    assert report.splitlines()[:2] == ["node_vm > side_effect", "TASK [A long script that fails at its end]"]
    assert "the reason at the end" in report and '"rc": 3' in report
    # the script (cmd) is left out; the ignored failure too
    assert "filler" not in report and "Expected to fail" not in report
    assert len(report) < 2000


def test_a_failure_that_is_not_json_is_kept_cut():
    lines = ["TASK [t] ***", "fatal: [h]: UNREACHABLE! => not json " + "x" * 3000]
    found = digest.failures(lines)
    assert len(found) == 1 and found[0].startswith("TASK [t]\nfatal: [h]: UNREACHABLE! => not json")
    assert found[0].endswith("(cut; the whole result is in molecule.log)")


def test_the_last_three_failures_of_a_log(tmp_path):
    lines = []
    for n in range(5):
        lines += ["TASK [task %d] ***" % n, 'failed: [h] (item=%d) => {"msg": "no %d", "cmd": "long"}' % (n, n)]
    found = digest.failures(lines)
    assert [f.splitlines()[0] for f in found] == ["TASK [task 2]", "TASK [task 3]", "TASK [task 4]"]
    assert found[-1].endswith('=> {"msg": "no 4"}')
    (tmp_path / "molecule.log").write_text("PLAY RECAP ***\nlocalhost : ok=1 failed=0\n", encoding="utf-8")
    digest.main(str(tmp_path))
    assert (tmp_path / "failures.txt").read_text(encoding="utf-8") == ""
