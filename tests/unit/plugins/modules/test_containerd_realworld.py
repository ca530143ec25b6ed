"""containerd_rdma on the files real nodes carry (tests/fixtures/realworld, read at test time).

Each case builds a node tree in tmp from fixture files (EKS AL2/AL2023, kubespray, k3s, nvidia-ctk, containerd's
own `config default` of 1.6 to 2.3) and runs the module on it: check mode (nothing written), apply, a second run
(nothing to do), every original value of every config file unchanged outside the collection's keys (tomllib
before/after), the owner's base spec byte for byte untouched and the derived copy equal to it but for
RLIMIT_MEMLOCK.

Every case runs twice: with the stand-in containerd of tests/unit/safety (``fake``), and with a real containerd
of the same release line (``real``) run in a chroot of the node tree, when `scripts/build-containerd` has built
it (else that case is skipped, saying so).  With the real one the module's own checks (`config dump` must show
the new settings, and no runtime may change but for base_runtime_spec) run against containerd itself, and the
test compares containerd's `config dump` of the original files with that of the result: equal except the
collection's keys.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import tomllib

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.containerd import rules as ctd
from unit.plugins.module_utils.test__containerd import DEBIAN_STOCK
from unit.safety.benches import ContainerdBench
from unit.safety.nodes import FakeSystemd, ModuleFail, tool

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "realworld"
CACHE = pathlib.Path(os.environ.get("CONTAINERD_CACHE", "/var/cache/rdma-k8s-node/containerd"))
BUILD_SCRIPT = pathlib.Path(__file__).resolve().parents[4] / "scripts" / "build-containerd"
#: release line -> the version scripts/build-containerd builds, and what `containerd --version` of the stand-in says
LINES = {
    (1, 6): ("v1.6.38", "containerd github.com/containerd/containerd v1.6.38"),
    (1, 7): ("v1.7.34", "containerd github.com/containerd/containerd v1.7.34"),
    (2, 1): ("v2.1.4", "containerd github.com/containerd/containerd/v2 2.1.4+unknown"),
    (2, 2): ("v2.2.7", "containerd github.com/containerd/containerd/v2 2.2.7+unknown"),
    (2, 3): ("v2.3.4", "containerd github.com/containerd/containerd/v2 2.3.4+unknown"),
}
INF = ctd.RLIM_INFINITY
GENERATED = "/etc/containerd/rdma-k8s-node-base-spec.json"
K3S = "/var/lib/rancher/k3s/agent/etc/containerd"
K3S_BIN = "/var/lib/rancher/k3s/data/current/bin"
NODEADM_SPEC = "/etc/containerd/base-runtime-spec.json"


class Case:  # pylint: disable=too-few-public-methods,too-many-instance-attributes
    """One node: ``files`` {node path: fixture path, or the text itself (None: an empty directory)}; what the
    module must do."""

    def __init__(self, name, line, files, specs=None, refuse=None, options=None, config="/etc/containerd/config.toml",
                 service="containerd", bin_dir="/usr/bin", edited=None):
        self.name = name
        self.line = line
        self.files = files
        self.specs = specs or {}          # runtime -> "generate" | "derive" | "keep"
        self.refuse = refuse              # a phrase of the refusal, when the module must refuse
        self.options = options or {}
        self.config = config
        self.service = service
        self.bin_dir = bin_dir
        self.edited = edited              # the config files that must change (default: the main one)


def default_config(version):
    return {"/etc/containerd/config.toml": "containerd/%s/config-default.toml" % version}


NVIDIA_CTK = "nvidia-ctk/%s/etc/containerd/"
CASES = [
    Case("default-1.6", (1, 6), default_config("1.6.20-debian12"), {"runc": "generate"}),
    Case("default-1.7", (1, 7), default_config("1.7.34"), {"runc": "generate"}),
    Case("default-2.1", (2, 1), default_config("2.1.4"), {"runc": "generate"}),
    Case("default-2.2", (2, 2), default_config("2.2.7"), {"runc": "generate"}),
    Case("default-2.3", (2, 3), default_config("2.3.4"), {"runc": "generate"}),
    # 2.2+ imports conf.d by default: nvidia-ctk's drop-in defines the nvidia runtime there, key by key
    Case("default-2.3+nvidia-ctk", (2, 3), dict(default_config("2.3.4"), **{
        "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK % "v3-minimal" + "conf.d/99-nvidia.toml"}),
        {"runc": "generate", "nvidia": "generate", "nvidia-cdi": "generate", "nvidia-legacy": "generate"}),
    Case("eks-al2-containerd1", (1, 7), {"/etc/containerd/config.toml": "eks-al2/containerd1/etc/containerd/config.toml",
                                         "/etc/containerd/config.d": None}, {"runc": "generate"}),
    Case("eks-al2-containerd1-on-1.6", (1, 6), {
        "/etc/containerd/config.toml": "eks-al2/containerd1/etc/containerd/config.toml",
        "/etc/containerd/config.d": None}, {"runc": "generate"}),
    # Debian's own config.toml names no runtime: on 1.x the module must re-state runc before its base spec
    Case("debian-stock-1.6", (1, 6), {"/etc/containerd/config.toml": DEBIAN_STOCK}, {"runc": "generate"}),
    Case("debian-stock-1.7", (1, 7), {"/etc/containerd/config.toml": DEBIAN_STOCK}, {"runc": "generate"}),
    Case("eks-al2-containerd2", (2, 1), {
        "/etc/containerd/config.toml": "eks-al2/containerd2/etc/eks/containerd/containerd-config.toml"},
        {"runc": "generate"}),
    # nodeadm points the default runtime at its own spec: the collection derives a copy.  On 2.x runc, containerd's
    # built-in runtime that nodeadm's GPU config does not name, gets the generated spec; on 1.x a file that names
    # any runtime replaces the whole runtimes map, so there is no runc then
    Case("eks-al2023-containerd1", (1, 7), {
        "/etc/containerd/config.toml": "eks-al2023/containerd1-default/etc/containerd/config.toml",
        NODEADM_SPEC: "eks-al2023/etc/containerd/base-runtime-spec.json"}, {"runc": "derive"}),
    Case("eks-al2023-containerd1-nvidia", (1, 7), {
        "/etc/containerd/config.toml": "eks-al2023/containerd1-nvidia/etc/containerd/config.toml",
        NODEADM_SPEC: "eks-al2023/etc/containerd/base-runtime-spec.json"}, {"nvidia": "derive"}),
    Case("eks-al2023-containerd2-nvidia", (2, 1), {
        "/etc/containerd/config.toml": "eks-al2023/containerd2-nvidia/etc/containerd/config.toml",
        NODEADM_SPEC: "eks-al2023/etc/containerd/base-runtime-spec.json"}, {"nvidia": "derive", "runc": "generate"}),
    Case("eks-al2023-containerd2-nvidia-fulldump", (2, 1), {
        "/etc/containerd/config.toml": "eks-al2023/containerd2-nvidia-fulldump/etc/containerd/config.toml",
        NODEADM_SPEC: "eks-al2023/etc/containerd/base-runtime-spec.json"}, {"nvidia": "derive", "runc": "generate"}),
    Case("eks-al2023-user-spec", (2, 1), {
        "/etc/containerd/config.toml": "eks-al2023/containerd2-nvidia/etc/containerd/config.toml",
        NODEADM_SPEC: "eks-al2023/base-runtime-spec-override/etc/containerd/base-runtime-spec.json"},
        {"nvidia": "derive", "runc": "generate"}),
    # kubespray: version 4 (containerd 2.3), runc on its one-line cri-base.json
    Case("kubespray", (2, 3), {"/etc/containerd/config.toml": "kubespray/etc/containerd/config.toml",
                               "/etc/containerd/cri-base.json": "kubespray/etc/containerd/cri-base.json"},
         {"runc": "derive"}),
    # nvidia-ctk on containerd 2.x: its drop-in only adds runtimes, the main file takes the keys
    Case("nvidia-ctk-v3", (2, 1), {"/etc/containerd/config.toml": NVIDIA_CTK % "v3-minimal" + "config.toml",
                                   "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK % "v3-minimal" + "conf.d/99-nvidia.toml"},
         {"runc": "generate", "nvidia": "generate", "nvidia-cdi": "generate", "nvidia-legacy": "generate"}),
    # nvidia-ctk on containerd 1.x: its drop-in replaces the whole CRI section of config.toml (and v2-fresh's names
    # no runc: containerd 1.x then has none)
    Case("nvidia-ctk-v2-complex", (1, 7), {
        "/etc/containerd/config.toml": NVIDIA_CTK % "v2-complex" + "config.toml",
        "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK % "v2-complex" + "conf.d/99-nvidia.toml"},
        refuse="/etc/containerd/conf.d/99-nvidia.toml overrides runtimes.nvidia.base_runtime_spec (containerd 1.x "
               "replaces the whole"),
    Case("nvidia-ctk-v2-complex-edit-imports", (1, 7), {
        "/etc/containerd/config.toml": NVIDIA_CTK % "v2-complex" + "config.toml",
        "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK % "v2-complex" + "conf.d/99-nvidia.toml"},
        {"runc": "generate", "nvidia": "generate", "nvidia-cdi": "generate", "nvidia-legacy": "generate"},
        options={"edit_imports": True}, edited=["/etc/containerd/conf.d/99-nvidia.toml"]),
    Case("nvidia-ctk-v2-complex-edit-imports-1.6", (1, 6), {
        "/etc/containerd/config.toml": NVIDIA_CTK % "v2-complex" + "config.toml",
        "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK % "v2-complex" + "conf.d/99-nvidia.toml"},
        {"runc": "generate", "nvidia": "generate", "nvidia-cdi": "generate", "nvidia-legacy": "generate"},
        options={"edit_imports": True}, edited=["/etc/containerd/conf.d/99-nvidia.toml"]),
    Case("nvidia-ctk-v2-fresh", (1, 7), {
        "/etc/containerd/config.toml": NVIDIA_CTK % "v2-fresh" + "config.toml",
        "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK % "v2-fresh" + "conf.d/99-nvidia.toml"},
        refuse="let this module write it there with edit_imports=true"),
    Case("nvidia-ctk-v2-fresh-edit-imports", (1, 7), {
        "/etc/containerd/config.toml": NVIDIA_CTK % "v2-fresh" + "config.toml",
        "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK % "v2-fresh" + "conf.d/99-nvidia.toml"},
        {"nvidia": "generate", "nvidia-cdi": "generate", "nvidia-legacy": "generate"},
        options={"edit_imports": True}, edited=["/etc/containerd/conf.d/99-nvidia.toml"]),
    # k3s regenerates config.toml at every start and imports config-v3.toml.d: the collection writes a drop-in there
    Case("k3s", (2, 1), {K3S + "/config.toml": "k3s/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
         {"runc": "generate"}, config=K3S + "/config.toml", service="k3s", bin_dir=K3S_BIN,
         edited=[K3S + "/config-v3.toml.d/" + ctd.GENERATED_DROPIN]),
    Case("k3s-nvidia", (2, 1), {K3S + "/config.toml": "k3s/nvidia/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
         {"runc": "generate", "nvidia": "generate", "nvidia-cdi": "generate"}, config=K3S + "/config.toml",
         service="k3s", bin_dir=K3S_BIN, edited=[K3S + "/config-v3.toml.d/" + ctd.GENERATED_DROPIN]),
    Case("k3s-containerd1", (1, 7), {
        K3S + "/config.toml": "k3s/containerd1/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
        refuse="cannot add keys to the runc table", config=K3S + "/config.toml", service="k3s", bin_dir=K3S_BIN),
]


# -- the real containerd, run in a chroot of the node tree ------------------------------------------------------
def required_versions():
    """The versions scripts/setup builds (scripts/build-containerd's REQUIRED_VERSIONS)."""
    match = re.search(r"^REQUIRED_VERSIONS=\(([^)]*)\)", BUILD_SCRIPT.read_text(), re.MULTILINE)
    return set(match.group(1).split()) if match else set()


def missing(why, version):
    """Skip, or under scripts/test (RDMA_REQUIRE_CONTAINERD=1) fail when scripts/setup should have built ``version``."""
    if os.environ.get("RDMA_REQUIRE_CONTAINERD") == "1" and version in required_versions():
        pytest.fail("%s, and scripts/setup builds it for scripts/test (RDMA_REQUIRE_CONTAINERD=1)" % why)
    pytest.skip(why)


def line_directories(line):
    """The cache directories that may hold containerd and ctr of this release line, in the order they are used:
    Debian's packages of the line (``deb-<Debian version>``, what scripts/build-containerd --required fetches), then
    the line's build from source (``v<version>``)."""
    return sorted(CACHE.glob("deb-%d.%d.*" % line)) + [CACHE / LINES[line][0]]


def real_binaries(line):
    """The cached directory with containerd and ctr of this release line, or skip saying how to get it (fail under
    scripts/test for the lines scripts/setup provides)."""
    version = LINES[line][0]
    found = [d for d in line_directories(line) if (d / "containerd").is_file() and (d / "ctr").is_file()]
    if not found:
        missing("no containerd %d.%d in %s (build it: scripts/build-containerd %s, or fetch Debian's: "
                "scripts/build-containerd --required)" % (line + (CACHE, version)), version)
    if os.geteuid() != 0 or not shutil.which("chroot"):
        missing("running the real containerd in the node tree needs root and chroot(8)", version)
    return found[0]


def shared_libraries(binary):
    """The files a dynamically linked binary loads (its ELF interpreter and libraries, as ldd lists them), resolved;
    [] for a static one."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    paths = []
    for line in proc.stdout.splitlines():
        words = line.split()
        path = words[2] if len(words) > 2 and words[1] == "=>" else words[0] if words else ""
        if path.startswith("/"):
            paths.append(path)
    return paths


def test_setup_builds_one_containerd_of_each_line():
    """scripts/setup's versions are versions these tests know, one 1.6, one 1.7 and one 2.x; each line it takes
    from Debian first falls back to the source version of the same line."""
    required = required_versions()
    assert required <= set(version for version, dummy_text in LINES.values())
    assert sorted(version.split(".")[0] + "." + version.split(".")[1] if version.startswith("v1") else "v2"
                  for version in required) == ["v1.6", "v1.7", "v2"]
    block = re.search(r"^REQUIRED_LINES=\(\n(.*?)^\)", BUILD_SCRIPT.read_text(), re.MULTILINE | re.DOTALL).group(1)
    entries = [line.strip().strip('"').split() for line in block.splitlines() if line.strip()]
    assert sorted(entry[1] for entry in entries) == sorted(required)
    for entry in entries:
        assert entry[1].startswith("v%s." % entry[0]) and entry[2:], entry
        assert tuple(int(part) for part in entry[0].split(".")) in LINES


def test_a_missing_required_binary_fails_under_scripts_test_and_skips_alone(monkeypatch, tmp_path):
    monkeypatch.setitem(globals(), "CACHE", tmp_path)
    line = next(line for line, (version, dummy) in LINES.items() if version in required_versions())
    monkeypatch.delenv("RDMA_REQUIRE_CONTAINERD", raising=False)
    with pytest.raises(pytest.skip.Exception, match="build it: scripts/build-containerd"):
        real_binaries(line)
    monkeypatch.setenv("RDMA_REQUIRE_CONTAINERD", "1")
    with pytest.raises(pytest.fail.Exception, match="scripts/setup builds it"):
        real_binaries(line)
    optional = [line for line, (version, dummy) in LINES.items() if version not in required_versions()]
    if optional:  # a line setup does not build is still skipped
        with pytest.raises(pytest.skip.Exception):
            real_binaries(optional[0])


def _link(source, dest):
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() or dest.is_symlink():
        dest.unlink()
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def install_binaries(root, directory, bin_dir):
    """Hard links (a copy across filesystems) of the real binaries at ``bin_dir`` of the node tree, and of the C
    library a dynamically linked one loads (Debian's packages), at its own path, as on a node."""
    target = root / bin_dir.lstrip("/")
    for name in ("containerd", "ctr"):
        _link(directory / name, target / name)
        for library in shared_libraries(directory / name):
            _link(pathlib.Path(library).resolve(), root / library.lstrip("/"))


class RealContainerd:  # pylint: disable=too-few-public-methods
    """Runs ``containerd``/``ctr`` as the module asks, chrooted into the node tree (so that the config's absolute
    imports resolve there, as on the node)."""

    def __init__(self, root, bin_dir):
        self.root = str(root)
        self.bin_dir = bin_dir

    def __call__(self, argv):
        proc = subprocess.run(["chroot", self.root, "%s/%s" % (self.bin_dir, argv[0])] + list(argv[1:]),
                              capture_output=True, text=True, timeout=60, check=False,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"})
        return proc.returncode, proc.stdout, proc.stderr


def real_dump(root, bin_dir, config):
    runner = RealContainerd(root, bin_dir)
    rc, out, err = runner(["containerd", "--config", config, "config", "dump"])
    assert rc == 0, err
    return tomllib.loads(out)


# -- the node ------------------------------------------------------------------------------------------------
def build_node(tmp_path, monkeypatch, case, engine):
    bench = ContainerdBench(tmp_path, monkeypatch, version=case.line if case.line < (2, 2) else (2, 1))
    root = bench.root
    (root / "etc/containerd/config.toml").unlink()   # the bench's own config: the fixture's take its place
    for node_path, fixture in case.files.items():
        dest = root / node_path.lstrip("/")
        if fixture is None:
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(fixture.encode() if "\n" in fixture else (CORPUS / fixture).read_bytes())
    bench.containerd.version_text = LINES[case.line][1]
    if case.bin_dir != "/usr/bin":  # k3s: containerd is in its data directory only
        for name in ("containerd", "ctr"):
            (root / "usr/bin" / name).unlink()
            tool(root, "%s/%s" % (case.bin_dir, name))
    if case.service != "containerd":
        (root / ("lib/systemd/system/%s.service" % case.service)).write_text("[Service]\nExecStart=/usr/local/bin/k3s\n")
        bench.systemd = FakeSystemd(root, {case.service: ["/usr/local/bin/k3s", "agent"]})
        bench.tools.handlers.update(systemctl=bench.systemd.systemctl, journalctl=bench.systemd.journalctl)
    if engine == "real":
        install_binaries(root, real_binaries(case.line), case.bin_dir)
        handler = RealContainerd(root, case.bin_dir)
        bench.tools.handlers.update(containerd=handler, ctr=handler)
    return bench


def args(bench, case, **extra):
    out = bench.args(config=case.config, service=case.service)
    out.update(case.options)
    out.update(extra)
    return out


def tree(root):
    """Every regular file of the node's /etc and /var/lib/rancher: {node path: bytes}."""
    out = {}
    for top in ("etc", "var/lib/rancher"):
        base = root / top
        for path in sorted(base.rglob("*")) if base.exists() else []:
            if path.is_file() and not path.is_symlink() and "/bin/" not in str(path):
                out["/" + str(path.relative_to(root))] = path.read_bytes()
    return out


def leaves(data, prefix=()):
    """{path: value} of every non-table value of parsed TOML (lists are values)."""
    out = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(leaves(value, prefix + (key,)))
        else:
            out[prefix + (key,)] = value
    return out


def collection_key(path, targets):
    """True for a key the collection owns: base_runtime_spec of a runtime it manages, enable_cdi, cdi_spec_dirs."""
    if path[-1] in ("enable_cdi", "cdi_spec_dirs"):
        return True
    return path[-1] == "base_runtime_spec" and len(path) >= 2 and path[-2] in targets


def restated(path, targets):
    """A key re-stated in a runtime table the module created on containerd 1.x (see seed_runtime)."""
    return "runtimes" in path and path[path.index("runtimes") + 1:path.index("runtimes") + 2][0:1] and \
        path[path.index("runtimes") + 1] in targets


@pytest.fixture(params=["fake", "real"])
def engine(request):
    return request.param


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_realworld_node(tmp_path, monkeypatch, case, engine):  # pylint: disable=too-many-locals,too-many-statements
    bench = build_node(tmp_path, monkeypatch, case, engine)
    root = bench.root
    before = tree(root)
    dump_before = real_dump(root, case.bin_dir, case.config) if engine == "real" else None

    if case.refuse:
        failure = bench.run(args(bench, case), check=True, expect=ModuleFail)
        assert case.refuse in failure["msg"], failure["msg"]
        assert "Traceback" not in failure["msg"]
        failure = bench.run(args(bench, case), expect=ModuleFail)
        assert case.refuse in failure["msg"]
        assert tree(root) == before, "a refusal wrote something"
        return

    checked = bench.run(args(bench, case), check=True)
    assert checked["changed"] is True
    assert tree(root) == before, "check mode wrote something"
    result = bench.run(args(bench, case))
    assert result["changed"] is True
    assert result["observed"]["imported_overrides"] == [] or case.options.get("edit_imports")
    assert dict((name, entry["action"]) for name, entry in result["observed"]["base_specs"].items()) == case.specs
    again = bench.run(args(bench, case))
    assert again["changed"] is False, again["actions"]
    specs = dict((name, entry["spec"]) for name, entry in result["observed"]["base_specs"].items())
    assert again["observed"]["runtimes"] == dict(
        (name, dict(rt, base_runtime_spec=specs.get(name, rt["base_runtime_spec"])))
        for name, rt in result["observed"]["runtimes"].items())
    after = tree(root)
    targets = set(case.specs)

    # config files: every original value is still there, outside the collection's keys
    edited = case.edited or [case.config]
    for path, content in before.items():
        if not path.endswith(".toml"):
            continue
        old = leaves(tomllib.loads(content.decode()))
        new = leaves(tomllib.loads(after[path].decode()))
        for key, value in old.items():
            if not collection_key(key, targets):
                assert new.get(key) == value, "%s: %s changed from %r to %r" % (path, key, value, new.get(key))
        for key in set(new) - set(old):
            assert collection_key(key, targets) or (case.line < (2, 0) and restated(key, targets)), \
                "%s: %s was added" % (path, key)
        assert (after[path] != content) is (path in edited), path
    for path in set(after) - set(before):
        assert path in edited or path.endswith(".json") or path.endswith("/50-rdma-k8s-node-memlock.conf"), \
            "unexpected new file %s" % path

    # base specs: the owner's file untouched, the derived copy the owner's bytes but for RLIMIT_MEMLOCK
    for name, entry in result["observed"]["base_specs"].items():
        spec = json.loads(after[entry["spec"]])
        assert ctd.spec_rlimit(after[entry["spec"]].decode(), "RLIMIT_MEMLOCK") == {"soft": INF, "hard": INF}, name
        if entry["action"] == "derive":
            source = entry["derived_from"]
            assert entry["owner"] == "other" and after[source] == before[source]
            assert entry["spec"] == os.path.dirname(source) + "/rdma-k8s-node." + os.path.basename(source)
            original = json.loads(before[source])
            kept = [r for r in spec["process"]["rlimits"] if r["type"] != "RLIMIT_MEMLOCK"]
            assert kept == [r for r in original["process"]["rlimits"] if r["type"] != "RLIMIT_MEMLOCK"]
            assert dict(spec, process=dict(spec["process"], rlimits=None)) == \
                dict(original, process=dict(original["process"], rlimits=None))
            old_text, new_text = before[source].decode(), after[entry["spec"]].decode()
            cut = old_text.index('"rlimits"')
            assert new_text.startswith(old_text[:cut]) and new_text.endswith(old_text[old_text.index("]", cut):])
        else:
            assert entry["spec"] == GENERATED and spec.get("ociVersion")
            assert spec.get("mounts") or engine == "fake"   # the stand-in's `ctr oci spec` is a small one

    if engine == "real":
        dump_after = real_dump(root, case.bin_dir, case.config)
        old, new = leaves(dump_before), leaves(dump_after)
        for key in ("imports",):
            old.pop((key,), None)
            new.pop((key,), None)
        differ = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        assert all(collection_key(k, targets) for k in differ), differ
        assert sorted(dump_before.get("imports") or []) == sorted(dump_after.get("imports") or []) or \
            case.line >= (2, 0)


def test_k3s_containerd1_after_the_operator_wrote_the_template(tmp_path, monkeypatch, engine):
    """The refusal tells the operator which settings to render (k3s, containerd 1.x); once the rendered config has
    them, the module only maintains the spec file and the unit drop-in, and never edits k3s's config.toml."""
    case = [c for c in CASES if c.name == "k3s-containerd1"][0]
    bench = build_node(tmp_path, monkeypatch, case, engine)
    failure = bench.run(args(bench, case), expect=ModuleFail)
    needed = failure["msg"].split("The settings it needs: ")[1].rstrip(".")
    assert needed == 'runtimes.runc.base_runtime_spec = "%s"; enable_cdi = true' % GENERATED
    config = bench.root / (K3S + "/config.toml").lstrip("/")
    text = config.read_text().replace('  runtime_type = "io.containerd.runc.v2"\n',
                                      '  runtime_type = "io.containerd.runc.v2"\n  base_runtime_spec = "%s"\n' % GENERATED, 1)
    rendered = text.replace('  sandbox_image = ', '  enable_cdi = true\n  sandbox_image = ', 1)
    config.write_text(rendered)
    result = bench.run(args(bench, case))
    assert [a["target"] for a in result["actions"] if "file" in a["action"]] == [
        "/etc/systemd/system/k3s.service.d/50-rdma-k8s-node-memlock.conf", GENERATED]
    assert config.read_text() == rendered and bench.run(args(bench, case))["changed"] is False
