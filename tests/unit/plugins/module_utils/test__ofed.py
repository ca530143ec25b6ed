"""MLNX/DOCA-OFED parsers: ofed_info (real captures), the generated ofed_info script, versions, stale modules,
the DKMS tree and build-log excerpts, and ofed_facts over a host root."""

import importlib.util
import os
import pathlib
import subprocess

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _ofed
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, ParseError
from ansible_collections.rdma.k8s_node.plugins.module_utils._host import HostRoot

# the shape of the script the OFED packages install as /usr/bin/ofed_info (its -s/-n branches echo the version)
SCRIPT = """#!/bin/bash
usage()
{
\tcat <<EOF
Usage: $0 [options]
EOF
}
if [ "X$1" == "X-s" ]; then echo %s:; exit 0; fi
if [ "X$1" == "X-n" ]; then echo %s; exit 0; fi
"""


@pytest.mark.realdata
def test_real_ofed_info_captures(realdata):
    folder = realdata / "outputs" / "ofed_info"
    seen = {}
    for path in sorted(folder.glob("*.txt")):
        info = _ofed.parse_ofed_info(path.read_text(encoding="utf-8"))
        seen[path.name] = info
        flavor, version = path.name.split("_ofed_")[0], path.name.split("_ofed_")[1].split(".ofed_info")[0]
        assert info["version"] == version, path.name
        if path.name.endswith("-s.txt"):
            assert info["flavor"] == {"doca": "doca", "mlnx": "mlnx_ofed"}[flavor]
        else:
            assert info["flavor"] is None and info["label"] is None
    assert seen["doca_ofed_24.10-1.1.4.0.200.ofed_info-s.txt"]["release"] == "24.10"
    assert seen["doca_ofed_24.10-1.1.4.0.200.ofed_info-s.txt"]["build"] == "1.1.4.0.200"
    assert len(seen) >= 6


@pytest.mark.parametrize("text, expected", [
    ("MLNX_OFED_LINUX-24.10-2.1.8.0:\n", ("mlnx_ofed", "24.10-2.1.8.0", "MLNX_OFED_LINUX-24.10-2.1.8.0")),
    ("OFED-internal-25.10-1.7.1:", ("doca", "25.10-1.7.1", "OFED-internal-25.10-1.7.1")),
    ("OFED-internal-24.01-2.0.0", ("doca", "24.01-2.0.0", "OFED-internal-24.01-2.0.0")),       # no colon
    ("MLNX_OFED_LINUX-4.5-1.0.1.0 (OFED-4.5-1.0.1):\n\nar_mgr:\n",                               # long form
     ("mlnx_ofed", "4.5-1.0.1.0", "MLNX_OFED_LINUX-4.5-1.0.1.0")),
    ("5.4-3.1.0.0\n", (None, "5.4-3.1.0.0", None)),                                                # -n
])
def test_parse_ofed_info(text, expected):
    info = _ofed.parse_ofed_info(text)
    assert (info["flavor"], info["version"], info["label"]) == expected


@pytest.mark.parametrize("text", ["", "\n", None])
def test_parse_ofed_info_empty_is_none(text):
    assert _ofed.parse_ofed_info(text) is None


@pytest.mark.parametrize("text", ["ofed_info: command not found", "MLNX_OFED_LINUX-24.10:", "OFED-24.10-1.0"])
def test_parse_ofed_info_garbage(text):
    with pytest.raises(ParseError, match="unexpected ofed_info output"):
        _ofed.parse_ofed_info(text)


def test_version_from_generated_script():
    info = _ofed.version_from_script(SCRIPT % ("OFED-internal-24.01-0.3.3", "24.01-0.3.3"))
    assert info["label"] == "OFED-internal-24.01-0.3.3" and info["flavor"] == "doca"
    assert _ofed.version_from_script("#!/bin/sh\necho hello\n") is None
    assert _ofed.version_from_script(None) is None


def test_version_key_orders_numerically():
    versions = ["25.10-1.2.8.0", "24.10-1.1.4.0.200", "24.10-1.1.4.0", "5.8-1.1.2.1", "24.10-2.1.8.0"]
    assert sorted(versions, key=_ofed.version_key) == [
        "5.8-1.1.2.1", "24.10-1.1.4.0", "24.10-1.1.4.0.200", "24.10-2.1.8.0", "25.10-1.2.8.0"]
    with pytest.raises(InputError, match="not an OFED version"):
        _ofed.version_key("24.10")


def test_module_version_and_same_build():
    assert _ofed.module_version("24.10-1.1.4.0.200") == "24.10-1.1.4"
    assert _ofed.same_build("24.10-1.1.4", "24.10-1.1.4.0.200")
    assert _ofed.same_build("25.10-1.7.1", "25.10-1.7.1")
    assert not _ofed.same_build("24.10-1.1.4", "25.10-1.2.8.0")
    assert not _ofed.same_build(None, "25.10-1.2.8.0")


def test_stale_modules():
    ofed = _ofed.parse_ofed_info("OFED-internal-25.10-1.2.8.0:")
    loaded = {"ib_core": "24.10-1.1.4", "mlx5_core": "25.10-1.2.8", "ib_uverbs": None, "nvidia": "550.127.05"}
    assert _ofed.stale_modules(ofed, loaded) == [{"name": "ib_core", "version": "24.10-1.1.4"},
                                                 {"name": "ib_uverbs", "version": None}]
    assert _ofed.stale_modules(None, loaded) == []


KERNEL = "6.1.0-28-amd64"


@pytest.mark.parametrize("versions, installed, expected", [
    ({"24.10.OFED.24.10.1.1.4.1": {"kernels": {KERNEL: {"x86_64": ["mlx5_core.ko", "mlx5_ib.ko.xz"]}}}},
     {"kernel-%s-x86_64" % KERNEL: "24.10.OFED.24.10.1.1.4.1/%s/x86_64" % KERNEL},
     [("installed", "x86_64", ["mlx5_core", "mlx5_ib"])]),
    ({"24.10.OFED.24.10.1.1.4.1": {"kernels": {KERNEL: {"x86_64": ["mlx5_core.ko"]}}}}, {},
     [("built", "x86_64", ["mlx5_core"])]),
    ({"25.10.OFED.25.10.1.2.8.1": {"kernels": {}, "build_log": True}}, {}, [("failed", None, [])]),
    ({"25.10.OFED.25.10.1.2.8.1": {"kernels": {"6.12.0-1-amd64": {"x86_64": ["mlx5_core.ko"]}}}}, {},
     [("added", None, [])]),
])
def test_dkms_state(versions, installed, expected):
    listing = {"modules": {"mlnx-ofed-kernel": {"versions": versions, "installed": installed}}}
    state = _ofed.dkms_state(listing, KERNEL)
    assert [(item["state"], item["arch"], item["kernel_modules"]) for item in state] == expected
    assert {item["module"] for item in state} == {"mlnx-ofed-kernel"}


def test_log_excerpt_picks_errors_with_context():
    log = "\n".join(["DKMS make.log for mlnx-ofed-kernel", "make -C /lib/modules/6.1/build M=... modules",
                     "  CC [M]  drivers/net/ethernet/mellanox/mlx5/core/main.o",
                     "drivers/infiniband/ulp/ipoib/ipoib_main.c:2214:9: error: implicit declaration of function 'x'",
                     "make[2]: *** [scripts/Makefile.build:250: ipoib_main.o] Error 1", "", "done"])
    excerpt = _ofed.log_excerpt(log)
    assert excerpt[0].strip().startswith("CC [M]")
    assert any("implicit declaration" in line for line in excerpt)
    assert excerpt[-1].startswith("make[2]: ***")
    assert _ofed.log_excerpt("a\nb\nc", limit=2) == ["b", "c"]
    assert _ofed.log_excerpt(None) == []


def write(root, path, text="", mode=0o644):
    local = root / path.lstrip("/")
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(text, encoding="utf-8")
    os.chmod(local, mode)
    return local


def test_ofed_facts_installed_stale_and_failed_build(tmp_path):
    write(tmp_path, "/usr/bin/ofed_info", SCRIPT % ("OFED-internal-25.10-1.2.8.0", "25.10-1.2.8.0"), 0o755)
    write(tmp_path, "/proc/sys/kernel/osrelease", KERNEL + "\n")
    write(tmp_path, "/sys/module/ib_core/version", "24.10-1.1.4\n")
    write(tmp_path, "/sys/module/mlx5_core/initstate", "live\n")
    (tmp_path / "usr/lib/modules" / KERNEL / "build").mkdir(parents=True)
    old = tmp_path / "var/lib/dkms/mlnx-ofed-kernel/24.10.OFED.24.10.1.1.4.1" / KERNEL / "x86_64/module"
    old.mkdir(parents=True)
    (old / "mlx5_core.ko").write_text("", encoding="utf-8")
    os.symlink("24.10.OFED.24.10.1.1.4.1/%s/x86_64" % KERNEL,
               str(tmp_path / ("var/lib/dkms/mlnx-ofed-kernel/kernel-%s-x86_64" % KERNEL)))
    write(tmp_path, "/var/lib/dkms/mlnx-ofed-kernel/25.10.OFED.25.10.1.2.8.1/build/make.log",
          "CC main.o\nmain.c:1:1: error: unknown type name 'foo'\n")
    os.symlink("/usr/src/mlnx-ofed-kernel-25.10.OFED.25.10.1.2.8.1",
               str(tmp_path / "var/lib/dkms/mlnx-ofed-kernel/25.10.OFED.25.10.1.2.8.1/source"))
    facts = _ofed.ofed_facts(HostRoot(str(tmp_path)))
    assert (facts["installed"], facts["flavor"], facts["version"]) == (True, "doca", "25.10-1.2.8.0")
    assert facts["source"] == "/usr/bin/ofed_info" and facts["kernel_headers"] is True
    assert facts["running_version"] == "24.10-1.1.4"
    assert facts["stale_modules"] == ["ib_core", "mlx5_core"] and facts["restart_required"] is True
    assert facts["modules"]["ib_core"] == {"loaded": True, "version": "24.10-1.1.4", "from_ofed": False}
    assert facts["modules"]["ib_ipoib"]["loaded"] is False
    states = {item["version"]: item["state"] for item in facts["dkms"]}
    assert states == {"24.10.OFED.24.10.1.1.4.1": "installed", "25.10.OFED.25.10.1.2.8.1": "failed"}
    assert facts["dkms_failed"] == [{
        "module": "mlnx-ofed-kernel", "version": "25.10.OFED.25.10.1.2.8.1",
        "make_log": "/var/lib/dkms/mlnx-ofed-kernel/25.10.OFED.25.10.1.2.8.1/build/make.log",
        "excerpt": ["CC main.o", "main.c:1:1: error: unknown type name 'foo'"]}]


def test_ofed_facts_inbox_node(tmp_path):
    write(tmp_path, "/proc/sys/kernel/osrelease", KERNEL + "\n")
    (tmp_path / "sys/module/ib_core").mkdir(parents=True)
    facts = _ofed.ofed_facts(HostRoot(str(tmp_path)), modules=["ib_core"])
    assert facts["installed"] is False and facts["version"] is None and facts["restart_required"] is False
    assert facts["kernel_headers"] is False and facts["dkms"] == [] and facts["running_version"] is None
    assert facts["modules"] == {"ib_core": {"loaded": True, "version": None, "from_ofed": False}}


def test_ofed_facts_reports_a_script_without_version(tmp_path):
    write(tmp_path, "/usr/bin/ofed_info", "#!/bin/sh\nexit 1\n", 0o755)
    problems = []
    facts = _ofed.ofed_facts(HostRoot(str(tmp_path)), problems=problems)
    assert facts["installed"] is False
    assert problems == [{"path": "/usr/bin/ofed_info", "error": "no `-s` version line in the ofed_info script"}]


STATUS = """Package: dkms
Status: install ok installed
Version: 3.0.10-8

Package: doca-ofed
Status: install ok installed
Priority: optional
Version: 2.9.1-0.1.4
Description: DOCA profile
 with a continuation line: Version: 9.9

Package: mlnx-ofed-kernel-dkms
Status: install ok half-configured
Version: 25.10.OFED.25.10.1.2.8.1-1

Package: doca-roce
Status: deinstall ok config-files
Version: 2.9.1-0.1.4

Package: ofed-scripts
Status: purge ok not-installed
"""


def test_dpkg_packages():
    assert _ofed.dpkg_packages(STATUS) == {
        "doca-ofed": {"version": "2.9.1-0.1.4", "state": "installed"},
        "mlnx-ofed-kernel-dkms": {"version": "25.10.OFED.25.10.1.2.8.1-1", "state": "half-configured"},
        "doca-roce": {"version": "2.9.1-0.1.4", "state": "config-files"}}
    assert _ofed.dpkg_packages("") == {} and _ofed.dpkg_packages(None) == {}


def test_ofed_facts_packages(tmp_path):
    assert _ofed.ofed_facts(HostRoot(str(tmp_path)))["packages"] is None, "no dpkg: unknown, not empty"
    write(tmp_path, "/var/lib/dpkg/status", STATUS)
    assert _ofed.ofed_facts(HostRoot(str(tmp_path)))["packages"]["doca-ofed"]["version"] == "2.9.1-0.1.4"


def test_the_test_repositorys_ofed_info_prints_and_parses_like_the_real_one(tmp_path):
    """The molecule scenario's packages (tests/drivers/build_doca_repo.py) ship an ofed_info in the real format."""
    spec = importlib.util.spec_from_file_location(
        "build_doca_repo", pathlib.Path(__file__).resolve().parents[3] / "drivers" / "build_doca_repo.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    for ofed, dummy_debver, dummy_build in builder.RELEASES.values():
        script = tmp_path / "ofed_info"
        script.write_text(builder.OFED_INFO.replace("{ofed}", ofed).replace("{release}", "x"), encoding="utf-8")
        short = subprocess.run(["bash", str(script), "-s"], capture_output=True, text=True, check=True).stdout
        assert short == "OFED-internal-%s:\n" % ofed
        assert subprocess.run(["bash", str(script), "-n"], capture_output=True, text=True, check=True).stdout == ofed + "\n"
        assert _ofed.parse_ofed_info(short)["version"] == ofed
        assert _ofed.version_from_script(script.read_text(encoding="utf-8"))["label"] == "OFED-internal-" + ofed


def test_version_key_of_a_number_int_refuses():
    """Found by the fuzz suite: a 5,000-digit build number raised ValueError (int max str digits), not InputError."""
    with pytest.raises(InputError, match="a number is too long"):
        _ofed.version_key("24.10-" + "1" * 5000)


def test_ofed_info_script_whose_version_does_not_parse_is_a_problem(tmp_path):
    """Found by the fuzz suite: version_from_script's ParseError (an `-s` line such as MLNX_OFED_LINUX-24.10-1.²:)
    escaped ofed_facts, which never fails."""
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/ofed_info").write_text('if [ "X$1" == "X-s" ]; then echo MLNX_OFED_LINUX-24.10-1.\u00b2:; fi\n')
    problems = []
    facts = _ofed.ofed_facts(HostRoot(str(tmp_path)), problems=problems)
    assert facts["installed"] is False and facts["source"] is None
    assert [p["path"] for p in problems if "unexpected ofed_info output" in p["error"]] == ["/usr/bin/ofed_info"]
