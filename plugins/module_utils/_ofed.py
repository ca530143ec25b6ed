# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MLNX_OFED / DOCA-OFED on a node: what is installed, what runs, what DKMS built.  Parsers are pure.

* ``ofed_info -s`` prints ``MLNX_OFED_LINUX-<major.minor>-<a.b.c.d>:`` (MLNX_OFED) or
  ``OFED-internal-<YY.MM>-<a.b.c[.d[.e]]>:`` (DOCA-OFED); ``-n`` the bare ``<release>-<build>``.  The command is a
  script the packages generate with the version inside (``if [ "X$1" == "X-s" ]; then echo OFED-internal-...:``),
  so the installed version can also be read from the script's text, with no command run (an audit pod).
* OFED's kernel modules carry ``MODULE_VERSION`` (``/sys/module/<m>/version``, e.g. ``24.10-1.1.4``); mainline
  RDMA modules have none.  A module loaded before OFED was installed (or upgraded) is stale until openibd
  restarts the stack or the node reboots.
* DKMS keeps its state in ``/var/lib/dkms/<module>/<version>/``: ``<kernel>/<arch>/module/*.ko*`` once built,
  ``<module>/kernel-<kernel>-<arch>`` -> ``<version>/<kernel>/<arch>`` once installed, and a failed build leaves
  ``<version>/build/make.log`` ("Consult /var/lib/dkms/.../build/make.log for more information").
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import re

from ansible_collections.rdma.k8s_node.plugins.module_utils import _secureboot
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError, InputError, ParseError

#: the `ofed_info -s` line; the long form's first line adds " (OFED-x.y-z)" before the colon
_LABEL = re.compile(r"^(MLNX_OFED_LINUX|OFED-internal)-(\d+\.\d+)-(\d+(?:\.\d+)*)(?:\s+\([^)]*\))?:?$")
_NUMBER = re.compile(r"^(\d+\.\d+)-(\d+(?:\.\d+)*)$")
#: the `-s` branch of the generated ofed_info script
_SCRIPT = re.compile(r"""["']?X-s["']?\s*\]\s*;\s*then\s+echo\s+["']?((?:MLNX_OFED_LINUX|OFED-internal)-[\d.]+-[\d.]+):?""")
FLAVORS = {"MLNX_OFED_LINUX": "mlnx_ofed", "OFED-internal": "doca"}

#: kernel modules mlnx-ofa_kernel builds (the ones an operator may ask the doca_ofed role to verify)
OFED_MODULES = ("mlx_compat", "ib_core", "ib_uverbs", "ib_umad", "iw_cm", "ib_cm", "rdma_cm", "rdma_ucm",
                "ib_ipoib", "mlxfw", "mlx5_core", "mlx5_ib")
DKMS_TREE = "/var/lib/dkms"
OFED_INFO_PATHS = ("/usr/bin/ofed_info", "/usr/sbin/ofed_info")
_KO = re.compile(r"^(.+)\.ko(?:\.(?:xz|zst|gz))?$")
_LOG_HINTS = re.compile(r"error|\*\*\*|undefined|no such file|cannot|not found|failed", re.IGNORECASE)


def _info(prefix, release, build):
    return {"flavor": FLAVORS.get(prefix), "label": "%s-%s-%s" % (prefix, release, build) if prefix else None,
            "release": release, "build": build, "version": "%s-%s" % (release, build)}


def parse_ofed_info(text):
    """``ofed_info -s`` (or the long form's first line, or ``-n``) as a dict; None for empty output.

    ``{flavor: doca|mlnx_ofed|None, label, release, build, version}``; ``-n`` output has no flavor or label.
    """
    line = (text or "").strip().splitlines()
    if not line:
        return None
    first = line[0].strip()
    match = _LABEL.match(first)
    if match:
        return _info(match.group(1), match.group(2), match.group(3))
    match = _NUMBER.match(first)
    if match:
        return _info(None, match.group(1), match.group(2))
    raise ParseError("unexpected ofed_info output %r (expected MLNX_OFED_LINUX-<ver>: or OFED-internal-<ver>:)" % first)


def version_from_script(text):
    """The version an installed ``ofed_info`` script prints for ``-s``, or None when the text has no such branch."""
    match = _SCRIPT.search(text or "")
    return parse_ofed_info(match.group(1)) if match else None


def version_key(version):
    """Sort key of ``<release>-<build>`` (``24.10-1.1.4.0.200``): the numbers in order."""
    if not isinstance(version, str) or not _NUMBER.match(version):
        raise InputError("%r is not an OFED version like 24.10-1.1.4.0" % (version,))
    try:
        return tuple(int(part) for part in re.split(r"[.-]", version))
    except ValueError:  # a number of more than 4,300 digits (sys.get_int_max_str_digits())
        raise InputError("%r... is not an OFED version like 24.10-1.1.4.0 (a number is too long)" % (version[:40],)) from None


def module_version(version):
    """OFED modules' MODULE_VERSION for an OFED ``<release>-<build>``: the release and three build numbers."""
    release, dummy_sep, build = version.partition("-")
    return release + "-" + ".".join(build.split(".")[:3])


def same_build(module_ver, ofed_version):
    """True when a loaded module's version belongs to the installed OFED (module versions are truncated)."""
    if not module_ver or not ofed_version:
        return False
    return module_ver == module_version(ofed_version) or ofed_version.startswith(module_ver)


def stale_modules(ofed, loaded):
    """Loaded modules of OFED's set that are not the installed OFED's build: ``[{name, version}]``.

    ``ofed`` is :func:`parse_ofed_info`'s result (None: nothing installed, so nothing is stale); ``loaded`` maps
    module name to its ``/sys/module/<m>/version`` (None for a module without one, i.e. an inbox module).
    """
    if not ofed:
        return []
    return [{"name": name, "version": loaded[name]} for name in sorted(loaded)
            if name in OFED_MODULES and not same_build(loaded[name], ofed["version"])]


def dkms_state(listing, kernel):
    """DKMS state of every module/version for ``kernel``, from a listing of the DKMS tree (pure).

    ``listing`` = ``{"modules": {name: {"versions": {ver: {"kernels": {kernel: {arch: [ko files]}},
    "build_log": bool}}, "installed": {"kernel-<k>-<arch>": "<ver>/<k>/<arch>"}}}}``.
    Returns ``[{module, version, kernel, arch, state: installed|built|failed|added, kernel_modules}]``, where
    ``failed`` means a build for this kernel left its log and no modules (dkms keeps build/ only after a failure).
    """
    out = []
    for name in sorted(listing.get("modules", {})):
        entry = listing["modules"][name]
        installed = {}
        for link, target in (entry.get("installed") or {}).items():
            parts = (target or "").strip("/").split("/")
            if link.startswith("kernel-%s-" % kernel) and len(parts) == 3 and parts[1] == kernel:
                installed[parts[0]] = parts[2]
        for version in sorted(entry.get("versions", {})):
            data = entry["versions"][version]
            arches = (data.get("kernels") or {}).get(kernel) or {}
            built = {arch: files for arch, files in arches.items() if files}
            if version in installed:
                state, arch = "installed", installed[version]
            elif built:
                state, arch = "built", sorted(built)[0]
            elif data.get("build_log"):
                state, arch = "failed", None
            else:
                state, arch = "added", None
            names = sorted({_KO.match(f).group(1) for f in built.get(arch, []) if _KO.match(f)}) if arch else []
            out.append({"module": name, "version": version, "kernel": kernel, "arch": arch, "state": state,
                        "kernel_modules": names})
    return out


def log_excerpt(text, limit=20):
    """The lines of a build log that explain a failure: those that look like errors (with the line before
    each), else the last lines; at most ``limit`` lines, in log order."""
    lines = [line.rstrip() for line in (text or "").splitlines() if line.strip()]
    picked = []
    for idx, line in enumerate(lines):
        if _LOG_HINTS.search(line):
            for pos in (idx - 1, idx):
                if pos >= 0 and pos not in picked:
                    picked.append(pos)
    chosen = [lines[pos] for pos in sorted(picked)] if picked else lines
    return chosen[-limit:] if not picked else chosen[:limit]


#: packages whose versions and dpkg states the facts report (profiles and the driver packages)
DOCA_PACKAGES = ("doca-ofed", "doca-roce", "doca-networking", "doca-all", "doca-host-basic", "mlnx-ofed-kernel-dkms",
                 "mlnx-ofed-kernel-utils", "ofed-scripts")
DPKG_STATUS = "/var/lib/dpkg/status"


def dpkg_packages(text, names=DOCA_PACKAGES):
    """``{name: {version, state}}`` of the ``names`` present in dpkg's status file (pure).

    ``state`` is the third word of ``Status:`` (``installed``, ``half-configured``, ``unpacked``, ``config-files``
    ...); packages dpkg only remembers as removed (``not-installed``) are left out.
    """
    wanted = set(names)
    out = {}
    for stanza in (text or "").split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, dummy_sep, value = line.partition(":")
                fields[key.strip()] = value.strip()
        name = fields.get("Package")
        status = fields.get("Status", "").split()
        if name in wanted and len(status) == 3 and status[2] != "not-installed":
            out[name] = {"version": fields.get("Version"), "state": status[2]}
    return out


def headers_present(host, kernel):
    """Whether the kernel build tree DKMS needs exists for ``kernel`` (``/lib/modules/<k>/build``, also through
    the merged-/usr path, which a host root without a top-level ``lib`` still shows)."""
    if not kernel:
        return False
    return any(host.isdir("%s/modules/%s/build" % (lib, kernel)) for lib in ("/lib", "/usr/lib"))


def _dkms_listing(host):
    listing = {"modules": {}}
    for name in host.listdir(DKMS_TREE):
        base = "%s/%s" % (DKMS_TREE, name)
        if not host.isdir(base):
            continue
        entry = {"versions": {}, "installed": {}}
        for child in host.listdir(base):
            path = "%s/%s" % (base, child)
            if child.startswith("kernel-"):
                entry["installed"][child] = host.readlink(path)
            elif host.isdir(path) and not host.islink(path):
                kernels = {}
                for kernel in host.listdir(path):
                    if kernel in ("build", "source") or not host.isdir("%s/%s" % (path, kernel)):
                        continue
                    kernels[kernel] = {arch: host.listdir("%s/%s/%s/module" % (path, kernel, arch))
                                       for arch in host.listdir("%s/%s" % (path, kernel))}
                entry["versions"][child] = {"kernels": kernels, "build_log": host.exists(path + "/build/make.log")}
        listing["modules"][name] = entry
    return listing


def ofed_facts(host, modules=None, problems=None):
    """What a node has of MLNX/DOCA-OFED, read from files only (never fails; unreadable parts go to ``problems``).

    ``{installed, flavor, version, label, source, kernel_release, kernel_headers, modules: {name: {loaded,
    version, from_ofed}}, stale_modules, restart_required, dkms: [...], dkms_failed: [...], packages}``;
    ``packages`` holds the DOCA packages dpkg knows (``{name: {version, state}}``), None without dpkg.
    ``secure_boot`` is :func:`_secureboot.secure_boot_state` (DKMS-built modules must be signed when it is on).
    ``modules`` limits the per-module report (default: OFED's module set).
    """
    problems = problems if problems is not None else []
    ofed = None
    source = None
    for path in OFED_INFO_PATHS:
        try:
            text = host.read_text(path)
        except HostReadError as exc:
            problems.append({"path": path, "error": exc.msg})
            continue
        if text is not None:
            source = path
            try:
                ofed = version_from_script(text)
            except ParseError as exc:  # an `-s` branch whose version does not parse (a damaged script)
                problems.append({"path": path, "error": exc.msg})
            else:
                if ofed is None:
                    problems.append({"path": path, "error": "no `-s` version line in the ofed_info script"})
            break
    kernel = host.try_attr("/proc/sys/kernel/osrelease", None, problems)
    loaded = {}
    for name in modules or OFED_MODULES:
        if host.isdir("/sys/module/%s" % name):
            loaded[name] = host.try_attr("/sys/module/%s/version" % name, None, problems)
    running = next((loaded[name] for name in ("ib_core", "mlx5_core") if loaded.get(name)), None)
    stale = stale_modules(ofed, loaded)
    try:
        dkms = dkms_state(_dkms_listing(host), kernel) if kernel else []
    except HostReadError as exc:
        problems.append({"path": DKMS_TREE, "error": exc.msg})
        dkms = []
    try:
        status = host.read_text(DPKG_STATUS)
    except HostReadError as exc:
        problems.append({"path": DPKG_STATUS, "error": exc.msg})
        status = None
    packages = dpkg_packages(status) if status is not None else None
    failed = []
    for item in dkms:
        if item["state"] == "failed":
            log = "%s/%s/%s/build/make.log" % (DKMS_TREE, item["module"], item["version"])
            failed.append({"module": item["module"], "version": item["version"], "make_log": log,
                           "excerpt": log_excerpt(host.try_attr(log, "", problems))})
    return {
        "installed": ofed is not None,
        "flavor": ofed["flavor"] if ofed else None,
        "version": ofed["version"] if ofed else None,
        "label": ofed["label"] if ofed else None,
        "source": source if ofed else None,
        "running_version": running,
        "kernel_release": kernel,
        "kernel_headers": headers_present(host, kernel),
        "modules": {name: {"loaded": name in loaded, "version": loaded.get(name),
                           "from_ofed": bool(ofed) and same_build(loaded.get(name), ofed["version"])}
                    for name in (modules or OFED_MODULES)},
        "stale_modules": [item["name"] for item in stale],
        "restart_required": bool(stale),
        "dkms": dkms,
        "dkms_failed": failed,
        "packages": packages,
        "secure_boot": _secureboot.secure_boot_state(host, problems),
    }
