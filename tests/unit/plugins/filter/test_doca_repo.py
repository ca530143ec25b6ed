"""doca_repo_layout: NVIDIA's DOCA-Host repository directories per OS and DOCA release, each case with the public
source that shows the directory (docs/drivers.md has the same table), and the refusals for what is not known."""

import pytest

from ansible_collections.rdma.k8s_node.plugins.filter.doca_repo import FilterModule, doca_release, doca_repo_layout, supported


def facts(distribution, version, arch="x86_64"):
    return {"distribution": distribution, "distribution_version": version,
            "distribution_major_version": version.split(".")[0], "architecture": arch}


@pytest.mark.parametrize("distribution, version, arch, doca, expected, source", [
    # Ubuntu: ubuntu<VERSION_ID>, the same scheme before and after 3.2
    ("Ubuntu", "22.04", "x86_64", "2.9.1", "ubuntu22.04/x86_64", "NVIDIA hpc-container-maker doca_ofed; 2.9.1 notes"),
    ("Ubuntu", "24.04", "x86_64", "2.9.0", "ubuntu24.04/x86_64", "public Dockerfile, doca/2.9.0/ubuntu24.04"),
    ("Ubuntu", "20.04", "x86_64", "2.10.0", "ubuntu20.04/x86_64", "NVIDIA hpc-container-maker doca_ofed"),
    ("Ubuntu", "22.04", "aarch64", "3.1.0", "ubuntu22.04/arm64-sbsa", "public notes, doca/3.1.0/ubuntu22.04/arm64-sbsa"),
    ("Ubuntu", "24.04", "x86_64", "3.2.0", "ubuntu24.04/x86_64", "public script, doca/3.2.0/ubuntu24.04"),
    ("Ubuntu", "24.04", "x86_64", "3.2.1", "ubuntu24.04/x86_64", "public notes, doca/3.2.1/ubuntu24.04"),
    # EL before 3.2: rhel<X.Y>, one tree per minor release
    ("RedHat", "9.4", "x86_64", "2.8.0", "rhel9.4/x86_64", "stackhpc-release-train, doca/2.8.0/rhel9.4"),
    ("Rocky", "9.4", "x86_64", "2.9.1", "rhel9.4/x86_64", "stackhpc-release-train, doca/2.9.1/rhel9.4"),
    ("Rocky", "9.5", "x86_64", "2.9.1", "rhel9.5/x86_64", "stackhpc-release-train, doca/2.9.1/rhel9.5"),
    ("Rocky", "9.6", "x86_64", "2.9.3", "rhel9.6/x86_64", "stackhpc-release-train, doca/2.9.3/rhel9.6"),
    ("AlmaLinux", "8.9", "x86_64", "2.9.1", "rhel8.9/x86_64", "public notes, doca/2.9.1/rhel8.9"),
    ("CentOS", "9.2", "x86_64", "2.10.0", "rhel9.2/x86_64", "NVIDIA hpc-container-maker doca_ofed (rhel9.2)"),
    ("CentOS", "8.6", "aarch64", "2.10.0", "rhel8.6/arm64-sbsa", "NVIDIA hpc-container-maker doca_ofed (rhel8.6)"),
    ("RedHat", "9.6", "x86_64", "3.1.0", "rhel9.6/x86_64", "public notes, doca/3.1.0/rhel9.6"),
    ("RedHat", "10.0", "x86_64", "3.1.0", "rhel10.0/x86_64", "public notes, doca/3.1.0/rhel10.0"),
    # EL from 3.2.0: rhel<X> (DOCA 3.2 General Support: major OS releases only)
    ("Rocky", "9.7", "x86_64", "3.2.0", "rhel9/x86_64", "stackhpc-release-train, doca/3.2.0/rhel9"),
    ("Rocky", "9.7", "aarch64", "3.2.1", "rhel9/arm64-sbsa", "stackhpc-release-train, doca/3.2.1/rhel9/arm64-sbsa"),
    ("Rocky", "10.1", "x86_64", "3.2.1", "rhel10/x86_64", "stackhpc-release-train, doca/3.2.1/rhel10"),
    ("Rocky", "9.4", "x86_64", "3.4.0", "rhel9/x86_64", "stackhpc-release-train, doca/3.4.0/rhel9"),
    ("CentOS", "9", "x86_64", "3.2.3", "rhel9/x86_64", "CentOS Stream 9: major only"),
    # Debian: the validated point release before 3.2, the major release from 3.2.0
    ("Debian", "12.9", "aarch64", "latest-2.9-LTS", "debian12.5/arm64-sbsa", "public script, latest-2.9-LTS/debian12.5"),
    ("Debian", "12.2", "x86_64", "2.9.1", "debian12.5/x86_64", "DOCA 2.5.2 release notes: Debian 12.5"),
    ("Debian", "13.1", "x86_64", "3.2.0", "debian13/x86_64", "public notes, doca/3.2.0/debian13"),
    ("Debian", "12.11", "x86_64", "3.2.0", "debian12/x86_64", "DOCA 3.2: major OS releases only"),
    ("Debian", "12.11", "x86_64", "latest", "debian12/x86_64", "latest is the 3.2+ line"),
])
def test_layout(distribution, version, arch, doca, expected, source):
    layout = doca_repo_layout(facts(distribution, version, arch), doca)
    assert "%s/%s" % (layout["os"], layout["arch"]) == expected, source
    assert layout["os_error"] == "" and layout["arch_error"] == ""


@pytest.mark.parametrize("distribution, version, doca, why", [
    ("Ubuntu", "24.10", "3.2.0", "non-LTS Ubuntu"),
    ("Ubuntu", "18.04", "3.2.0", "no tree known"),
    ("Debian", "11.9", "3.2.0", "Debian 11 not known from 3.2"),
    ("Debian", "12.5", "3.1.0", "Debian tree of 3.0/3.1 not known"),
    ("Debian", "12.5", "2.5.0", "before 2.5.2 Debian 12.5 was not supported"),
    ("Debian", "13.0", "2.9.1", "Debian 13 has no 2.x tree"),
    ("CentOS", "9", "2.9.1", "CentOS Stream has no minor release for a rhelX.Y tree"),
    ("RedHat", "7.9", "2.9.1", "EL 7 not known"),
    ("OracleLinux", "9.4", "2.9.1", "Oracle Linux has its own trees"),
    ("Fedora", "41", "3.2.0", "Fedora is not EL"),
    ("SLES", "15.6", "3.2.0", "not mapped"),
    ("", "", "3.2.0", "facts missing"),
])
def test_unknown_os_is_refused_with_what_is_known_and_the_override(distribution, version, doca, why):
    layout = doca_repo_layout(facts(distribution, version), doca)
    assert layout["os"] == "", why
    assert "Ubuntu 22.04 -> ubuntu22.04" in layout["os_error"] and "(known: " in layout["os_error"]
    assert "doca_ofed_repo_os" in layout["os_error"] and "doca_ofed_repo_url" in layout["os_error"]
    assert layout["arch"] == "x86_64" and layout["arch_error"] == ""


def test_supported_list_follows_the_release():
    assert "Debian 13 -> debian13" in supported("3.2.0")
    assert "RedHat/Rocky/AlmaLinux/CentOS 9.x -> rhel9" in supported("3.2.0")
    assert "Debian 12 -> debian12.5" in supported("2.9.1")
    assert not [line for line in supported("2.9.1") if "debian13" in line]
    assert "Debian 12 -> debian12.5" not in supported("3.1.0")


@pytest.mark.parametrize("arch", ["ppc64le", "s390x", "", None])
def test_unknown_arch_is_refused(arch):
    layout = doca_repo_layout(facts("Ubuntu", "24.04", arch), "3.2.0")
    assert layout["os"] == "ubuntu24.04" and layout["arch"] == ""
    assert "arm64-sbsa" in layout["arch_error"] and "doca_ofed_repo_arch" in layout["arch_error"]


@pytest.mark.parametrize("version, expected", [
    ("3.2.0", (3, 2, 0)), ("2.9.1", (2, 9, 1)), ("latest-2.9-LTS", (2, 9, 0)), ("latest-3.2-LTS", (3, 2, 0)),
    ("latest", (99, 0, 0)), ("3.2", None), ("", None), (None, None), ("latest-LTS", None),
])
def test_doca_release(version, expected):
    assert doca_release(version) == expected


def test_bad_release_and_no_facts_never_raise():
    layout = doca_repo_layout(None, "3.2")
    assert layout["os"] == "" and "not X.Y.Z" in layout["os_error"]
    assert layout["arch"] == "" and layout["arch_error"]


def test_filter_is_registered():
    assert FilterModule().filters()["doca_repo_layout"] is doca_repo_layout
