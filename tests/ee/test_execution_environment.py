"""The execution environment (execution-environment.yml, scripts/build-ee): built here, then the fleet audit run in
it by ansible-navigator as AWX / AAP would run it, against simulated nodes.

* ``scripts/build-ee`` builds the image (or finds it current: a second run with nothing changed is a no-op);
* the image holds the collection at galaxy.yml's version, kubernetes.core, the Python packages they declare
  (``kubernetes`` for the drain, PyYAML for the filters), ansible-core and ansible-runner at their pins, the
  system tools the collection's bindep file names (ssh; ip and rdma), and kubectl for the node labels;
* ``ansible-navigator run rdma.k8s_node.audit --mode stdout --ce podman --pull-policy never --eei <image>``: the
  playbook and the roles come from the image (nothing of this work tree is mounted into the container but the
  simulated nodes and an output directory), against two simulated nodes. Each node is a static rendering of a
  tests/hwsim archetype (``dgx-h100``, ``roce-cx6dx``: sysfs and procfs as files), mounted read-only into the
  container and reached with a local connection and ``rdma_audit_host_root``; the audit only reads, so the rendered
  tree is enough, and the FUSE simulator (live state, a control socket for the ``ip``/``rdma`` shims) is not needed
  in the container. The stdout's per-host recap and summary, and report.json, report.md, report.html and junit.xml
  written by the run are checked, and each host's check results must equal those of the same audit run with this
  work tree's venv and collection (the same code, outside the container).

Run it with ``python -m pytest tests/ee`` (root, podman: see docs/scale.md); it is not part of the unit stage.
Outside ``scripts/test`` a machine without podman or root skips it; with ``RDMA_REQUIRE_EE=1`` it fails instead.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
import yaml

import hwsim

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "bench"))

import bench_fleet  # noqa: E402  pylint: disable=wrong-import-position,import-error

VENV_BIN = REPO / ".venv" / "bin"
BUILD_EE = REPO / "scripts" / "build-ee"
PODMAN_ENV = REPO / "scripts" / "lib" / "podman-env.sh"
#: the simulated nodes: inventory name -> (hwsim archetype, host vars)
NODES = {
    # every layer: on a simulated node containerd is missing (FAIL) and the kubelet's config is unknown
    "dgx-h100-sim": ("dgx-h100", {}),
    # the layers a simulated node has: the worst it can be is drift (the boot arguments, the sysctls)
    "roce-cx6dx-sim": ("roce-cx6dx", {"rdma_audit_layers": ["drivers", "kernel", "netns", "sysctl", "sriov"]}),
}
#: where the container sees the simulated nodes and the report directory
SIM_MOUNT = "/sim"
OUT_MOUNT = "/out"
#: ansible-runner wraps each event of the stdout in these when it is not a terminal: ESC[K <base64> ESC[<n>D ESC[K
RUNNER_EVENT = re.compile(r"\x1b\[K[A-Za-z0-9+/=]*\x1b\[\d+D(\x1b\[K)?")
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def _require_or_skip(reason):
    if os.environ.get("RDMA_REQUIRE_EE") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def podman_env():
    """This process's environment plus what scripts/lib/podman-env.sh exports (CONTAINERS_CONF...)."""
    out = subprocess.run(["bash", "-c", '. "%s" && env -0' % PODMAN_ENV], capture_output=True, check=True)
    env = dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
    env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", "/usr/bin:/bin"))
    return env


@pytest.fixture(scope="module")
def env():
    if os.geteuid() != 0:
        _require_or_skip("the execution environment is built and run with root's podman")
    if shutil.which("podman") is None:
        _require_or_skip("podman is not installed")
    for tool in ("ansible-builder", "ansible-navigator", "ansible-playbook"):
        if not (VENV_BIN / tool).exists():
            _require_or_skip("%s is not in the venv (scripts/setup, requirements/dev.txt)" % tool)
    return podman_env()


@pytest.fixture(scope="module")
def image(env):
    """scripts/build-ee's image: built when its inputs changed, else found current."""
    start = time.monotonic()
    done = subprocess.run([str(BUILD_EE)], env=env, capture_output=True, text=True, check=False, timeout=3600)
    assert done.returncode == 0, done.stderr[-4000:]
    ref = done.stdout.strip().splitlines()[-1]
    sys.stderr.write("scripts/build-ee: %s in %.1f s\n" % (ref, time.monotonic() - start))
    return ref


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """One rendered tree per archetype (read-only in the container)."""
    base = tmp_path_factory.mktemp("ee-nodes")
    return dict((name, hwsim.render(archetype, base / name)) for name, (archetype, _vars) in NODES.items())


def podman_run(env, image, script):
    done = subprocess.run(["podman", "run", "--rm", "--pull=never", image, "/bin/sh", "-c", script], env=env,
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, "%s: %s%s" % (script, done.stdout, done.stderr)
    return done.stdout


def test_the_image_holds_the_collection_its_dependencies_and_tools(env, image):
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))
    listed = json.loads(podman_run(env, image, "ansible-galaxy collection list --format json 2>/dev/null"))
    installed = {}
    for collections in listed.values():
        installed.update((name, info["version"]) for name, info in collections.items())
    assert installed.get("rdma.k8s_node") == galaxy["version"], installed
    assert "kubernetes.core" in installed, installed
    for dependency in galaxy["dependencies"]:
        assert dependency in installed, (dependency, installed)
    # the pins of execution-environment.yml, and the Python packages the collections declare
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text(encoding="utf-8"))
    frozen = podman_run(env, image, "python3 -m pip freeze --all").lower().split()
    for pin in (ee["dependencies"]["ansible_core"]["package_pip"], ee["dependencies"]["ansible_runner"]["package_pip"]):
        assert pin.lower() in frozen, (pin, frozen)
    assert any(line.startswith("kubernetes==") for line in frozen), frozen
    assert any(line.startswith("pyyaml==") for line in frozen), frozen
    podman_run(env, image, "python3 -c 'import kubernetes.client, yaml, ansible_runner'")
    # the bindep file's tools (meta/ee-bindep.txt), ansible-playbook on PATH for the node audit's DaemonSet, and
    # kubectl for the node labels
    tools = podman_run(env, image, "for t in ansible-playbook ssh ip rdma kubectl; do command -v $t; done").split()
    assert [pathlib.Path(t).name for t in tools] == ["ansible-playbook", "ssh", "ip", "rdma", "kubectl"], tools
    assert "Client Version: v1." in podman_run(env, image, "kubectl version --client 2>&1")


def test_a_second_build_with_nothing_changed_is_a_no_op(env, image):
    start = time.monotonic()
    done = subprocess.run([str(BUILD_EE)], env=env, capture_output=True, text=True, check=False, timeout=600)
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-4000:]
    if "is current" not in done.stderr:
        # the work tree changed since the fixture's build (another writer): then it rebuilt, which is right too
        assert "building" in done.stderr, done.stderr
        pytest.skip("the collection's files changed during the test run: the image was rebuilt, as it must")
    assert done.stdout.strip().splitlines()[-1] == image
    assert took < 30, "a current image took %.1f s to confirm" % took


def write_inventory(path, roots):
    """The simulated nodes: local connection (the container is the node here), the image's system Python as the
    node's interpreter, each host's tree as its host root (paths as the container sees them)."""
    hosts = {}
    for name, (_archetype, host_vars) in NODES.items():
        hosts[name] = dict(host_vars, ansible_connection="local", ansible_python_interpreter="/usr/bin/python3",
                           rdma_audit_host_root=roots[name])
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}), encoding="utf-8")
    return path


def mqueue_for_navigator():
    """ansible-navigator refuses podman without /dev/mqueue/ (ansible-runner runs it with --ipc=host); a machine
    without systemd may not have it. Mount one in this process's private mount namespace (tests/conftest.py entered
    it; the mount ends with the process; the empty directory it needs stays in /dev)."""
    if os.path.isdir("/dev/mqueue"):
        return
    os.makedirs("/dev/mqueue", exist_ok=True)
    subprocess.run(["mount", "-t", "mqueue", "mqueue", "/dev/mqueue"], check=True, capture_output=True)


def host_results(report):
    """{host: (status, {check id and subject: status})} of a report.json."""
    data = json.loads(report.read_text(encoding="utf-8"))
    out = {}
    for host, result in data["hosts"].items():
        out[host] = (result["status"], dict(("%s %s" % (c["id"], c.get("subject")), c["status"])
                                            for c in result["checks"]))
    return out


def test_the_audit_runs_in_the_ee_with_ansible_navigator(env, image, nodes, tmp_path):
    mqueue_for_navigator()
    out = tmp_path / "out"
    out.mkdir()
    inventory = write_inventory(tmp_path / "inventory.yml",
                                dict((name, "%s/%s" % (SIM_MOUNT, name)) for name in NODES))
    argv = [str(VENV_BIN / "ansible-navigator"), "run", "rdma.k8s_node.audit", "-i", str(inventory),
            "--mode", "stdout", "--ce", "podman", "--pull-policy", "never", "--eei", image,
            "--pae", "false", "--lf", str(tmp_path / "navigator.log"),
            "--eev", "%s:%s:ro" % (nodes["dgx-h100-sim"].parent, SIM_MOUNT), "--eev", "%s:%s" % (out, OUT_MOUNT),
            "-e", "rdma_audit_dir=%s" % OUT_MOUNT, "-e", "ansible_become=false",
            "-e", "rdma_audit_summary_lines=200"]
    run_env = dict(env, ANSIBLE_NOCOLOR="1")
    run_env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    start = time.monotonic()
    done = subprocess.run(argv, env=run_env, capture_output=True, text=True, check=False, timeout=900,
                          cwd=str(tmp_path))
    sys.stderr.write("ansible-navigator run: %.1f s\n" % (time.monotonic() - start))
    stdout = RUNNER_EVENT.sub("", done.stdout)
    (tmp_path / "navigator.stdout").write_text(stdout, encoding="utf-8")
    assert done.returncode == 0, stdout[-4000:] + done.stderr[-4000:]
    # the per-host recap and the audit's summary, as AWX's job output shows them
    recap = dict((m.group(1), [int(g) for g in m.groups()[1:]]) for m in RECAP.finditer(stdout))
    assert set(recap) == set(NODES), stdout[-3000:]
    assert all(r[2] == 0 and r[3] == 0 for r in recap.values()), recap  # unreachable, failed
    # the simulated roce node has no boot loader configuration (no /etc/default/grub, no BLS entries): the kernel
    # room's kernel.config fails there as kernel_cmdline refuses it (bootloader=auto finds neither)
    assert "audit: 2 hosts, status fail (hosts: fail 2)" in stdout, stdout[-3000:]
    assert "dgx-h100-sim FAIL containerd.installed" in stdout
    assert "roce-cx6dx-sim FAIL kernel.config[auto]" in stdout, stdout[-3000:]
    assert re.search(r"roce-cx6dx-sim DRIFT kernel\.cmdline\[", stdout), stdout[-3000:]
    # the report files the run wrote through the mounted directory
    for name in ("report.json", "report.md", "report.html", "junit.xml"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    results = host_results(out / "report.json")
    assert {host: status for host, (status, _checks) in results.items()} == {
        "dgx-h100-sim": "fail", "roce-cx6dx-sim": "fail"}
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "Hosts: 2, status **fail**" in markdown, markdown[:500]
    # junit.xml: a test suite per host, a test case per check, a failure per drift or fail, an error per unknown
    suites = dict((s.get("name"), s) for s in ET.parse(out / "junit.xml").getroot().iter("testsuite"))
    assert set(suites) == set(NODES)
    for host, (_status, checks) in results.items():
        assert int(suites[host].get("tests")) == len(suites[host].findall("testcase")) == len(checks), host
        assert int(suites[host].get("failures")) == sum(1 for v in checks.values() if v in ("drift", "fail")), host
        assert int(suites[host].get("errors")) == sum(1 for v in checks.values() if v == "unknown"), host
    # ... and the same results as the work tree's own collection outside the container
    reference = reference_audit(tmp_path / "reference", nodes)
    assert results == reference


def reference_audit(workdir, nodes):
    """The same audit with the venv's ansible-playbook and this work tree's collection, on the same trees."""
    workdir.mkdir()
    inventory = write_inventory(workdir / "inventory.yml", dict((name, str(root)) for name, root in nodes.items()))
    data = yaml.safe_load(inventory.read_text(encoding="utf-8"))
    for host in data["all"]["children"]["gpu_nodes"]["hosts"].values():
        host["ansible_python_interpreter"] = bench_fleet.node_python()
    inventory.write_text(yaml.safe_dump(data), encoding="utf-8")
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "audit.yml"),
            "-e", "rdma_audit_dir=%s" % (workdir / "out"), "-e", "ansible_become=false"]
    done = subprocess.run(argv, env=bench_fleet.ansible_env(workdir, None), capture_output=True, text=True,
                          check=False, timeout=600, cwd=str(workdir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return host_results(workdir / "out" / "report.json")
