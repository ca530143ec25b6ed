# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``<os>/<arch>`` directories of NVIDIA's DOCA-Host repositories
(``https://linux.mellanox.com/public/repo/doca/<version>/<os>/<arch>/``) for a node's Ansible facts and a DOCA
release (documented in doca_repo_layout.yml; the table and its sources are in docs/drivers.md).

How NVIDIA names them (what the public repositories and NVIDIA's own code use):

* Ubuntu: ``ubuntu<VERSION_ID>`` of the LTS releases (``ubuntu20.04``, ``ubuntu22.04``, ``ubuntu24.04``) - the
  same before and after DOCA 3.2 (NVIDIA's hpc-container-maker ``doca_ofed`` building block; public install notes
  for 2.9.x, 3.1.0, 3.2.x).
* EL (RHEL and its rebuilds Rocky, AlmaLinux, CentOS): up to DOCA 3.1 one tree per minor release, ``rhel<X.Y>``
  (``rhel9.4``, ``rhel9.6``, ``rhel8.9``, ``rhel10.0``); from DOCA 3.2.0 one per major release (``rhel9``,
  ``rhel10``), because the drivers are built by DKMS on the node since 3.2 ("NVIDIA no longer provides DOCA-Host
  for minor OS releases (e.g. RHEL9.X). We only provide major OS releases builds", DOCA 3.2 General Support).
* Debian: from DOCA 3.2.0 ``debian<major>`` (``debian12``, ``debian13``); before, one tree for the point release
  NVIDIA validated, not the node's (``debian12.5`` in DOCA 2.5.2 to 2.9.x: Debian point releases keep the kernel ABI).
* Architectures: ``x86_64``, and ``arm64-sbsa`` for aarch64 servers (``dpu-arm64`` is the BlueField's own OS).

Anything else (another distribution, a non-LTS Ubuntu, a Debian release before 3.2 with no known tree, CentOS
Stream before 3.2 - it has no minor release) is refused with the list of what is known and the variables that
override the choice; the role's mirror check then proves that the directory exists.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

#: DOCA release from which host repositories are built per major OS release (DKMS builds the drivers on the node)
MAJOR_ONLY_FROM = (3, 2, 0)
#: distributions whose packages come from NVIDIA's rhel trees (Ansible's ``distribution`` fact)
EL_REBUILDS = ("RedHat", "Rocky", "AlmaLinux", "CentOS")
UBUNTU_LTS = ("20.04", "22.04", "24.04")
#: Debian before DOCA 3.2: (first DOCA release, last release before) -> NVIDIA's tree for a Debian major release
DEBIAN_POINT_TREES = {"12": (((2, 5, 2), (3, 0, 0)), "debian12.5")}
DEBIAN_MAJOR = ("12", "13")
EL_MAJOR = ("8", "9", "10")
ARCHES = {"x86_64": "x86_64", "aarch64": "arm64-sbsa", "arm64": "arm64-sbsa"}
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_LTS = re.compile(r"^latest-(\d+)\.(\d+)-LTS$")
_OVERRIDE = ("set doca_ofed_repo_os (and doca_ofed_repo_arch) to the directory names of your repository, or "
             "doca_ofed_repo_url to the whole repository URL")


def doca_release(version):
    """``(major, minor, patch)`` of a DOCA release or alias: ``latest`` is the newest line (3.2 and later),
    ``latest-X.Y-LTS`` is X.Y; None for anything else."""
    text = str(version or "").strip()
    match = _RELEASE.match(text)
    if match:
        return tuple(int(part) for part in match.groups())
    if text == "latest":
        return (99, 0, 0)
    match = _LTS.match(text)
    if match:
        return (int(match.group(1)), int(match.group(2)), 0)
    return None


def supported(version):
    """What the mapping knows for a DOCA release, as ``<distribution> <version> -> <os directory>`` lines."""
    release = doca_release(version) or MAJOR_ONLY_FROM
    lines = ["Ubuntu %s -> ubuntu%s" % (item, item) for item in UBUNTU_LTS]
    if release >= MAJOR_ONLY_FROM:
        lines += ["Debian %s -> debian%s" % (item, item) for item in DEBIAN_MAJOR]
        lines += ["%s %s.x -> rhel%s" % ("/".join(EL_REBUILDS), item, item) for item in EL_MAJOR]
    else:
        lines += ["Debian %s -> %s" % (major, tree)
                  for major, ((first, last), tree) in sorted(DEBIAN_POINT_TREES.items()) if first <= release < last]
        lines += ["%s X.Y -> rhelX.Y (EL 8, 9, 10)" % "/".join(EL_REBUILDS)]
    return lines


def _os_dir(facts, release):
    distribution = str(facts.get("distribution") or "")
    version = str(facts.get("distribution_version") or "")
    major = str(facts.get("distribution_major_version") or version.split(".", 1)[0])
    if distribution == "Ubuntu":
        return "ubuntu" + version if version in UBUNTU_LTS else None
    if distribution == "Debian":
        if release >= MAJOR_ONLY_FROM:
            return "debian" + major if major in DEBIAN_MAJOR else None
        (first, last), tree = DEBIAN_POINT_TREES.get(major, (((0, 0, 0), (0, 0, 0)), None))
        return tree if first <= release < last else None
    if distribution in EL_REBUILDS:
        if major not in EL_MAJOR:
            return None
        if release >= MAJOR_ONLY_FROM:
            return "rhel" + major
        minor = re.match(r"^%s\.(\d+)$" % re.escape(major), version)
        return "rhel%s.%s" % (major, minor.group(1)) if minor else None
    return None


def doca_repo_layout(facts, version):
    """``{os, arch, os_error, arch_error}``: NVIDIA's directory names for a node (its Ansible facts:
    ``distribution``, ``distribution_version``, ``distribution_major_version``, ``architecture``) and a DOCA release
    (``X.Y.Z``, ``latest``, ``latest-X.Y-LTS``). A part that is not known is ``""`` and its error says why, what is
    known and how to override it."""
    facts = facts or {}
    release = doca_release(version)
    os_error = arch_error = ""
    os_dir = _os_dir(facts, release) if release is not None else None
    if release is None:
        os_error = "DOCA release %r is not X.Y.Z, latest or latest-X.Y-LTS - %s" % (version, _OVERRIDE)
    elif not os_dir:
        os_error = ("NVIDIA publishes no DOCA %s host repository known to this role for %s %s (known: %s) - %s"
                    % (version, facts.get("distribution") or "an unknown distribution",
                       facts.get("distribution_version") or "", "; ".join(supported(version)), _OVERRIDE))
    arch = str(facts.get("architecture") or "")
    arch_dir = ARCHES.get(arch, "")
    if not arch_dir:
        arch_error = ("no DOCA host repository architecture for %r (known: x86_64 -> x86_64, aarch64 -> arm64-sbsa)"
                      " - %s" % (arch, _OVERRIDE))
    return {"os": os_dir or "", "arch": arch_dir, "os_error": os_error, "arch_error": arch_error}


class FilterModule:  # pylint: disable=too-few-public-methods
    """rdma.k8s_node DOCA repository layout."""

    def filters(self):
        return {"doca_repo_layout": doca_repo_layout}
