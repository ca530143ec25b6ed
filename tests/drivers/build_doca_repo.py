"""Build a small DOCA-like apt repository of test packages (dpkg-deb at test time; nothing binary is committed).

    python3 tests/drivers/build_doca_repo.py OUTDIR [--kernel-note TEXT]

Lays out NVIDIA's repository shape ``OUTDIR/doca/<release>/<os>/<arch>/`` (flat apt repositories: the .debs,
``Packages``, ``Packages.gz``, ``Release``, ``InRelease`` and ``Release.gpg`` signed with a throw-away key, and that
key as ``GPG-KEY-Mellanox.pub`` in every repository and in ``OUTDIR/doca/``) for two DOCA releases on Debian 12/13,
amd64.  The packages carry DOCA's names and version schemes and do, in small, what the real ones do:

* ``ofed-scripts`` installs ``/usr/bin/ofed_info``, generated like the real one (``-s`` prints
  ``OFED-internal-<ver>:``, ``-n`` the bare version, no argument the long form).
* ``mlnx-ofed-kernel-utils`` installs ``openibd`` (init script + ``openibd.service``) and
  ``/etc/infiniband/openib.conf``; openibd stops and starts the RDMA stack with ``modprobe`` (unloading
  nvidia_peermem first, which holds ib_core), so in the test containers it drives the simulated kernel.
* ``mlnx-ofed-kernel-dkms`` stands in for the DKMS build of mlnx-ofed-kernel: for every kernel with a build tree
  (``/lib/modules/<k>/build``) its postinst leaves DKMS's state as ``dkms install`` would (``/var/lib/dkms/...``,
  ``updates/dkms/*.ko``) and tells the node simulator that OFED's modules are on disk (``ofed_set``).  When
  ``/etc/rdma-k8s-node-test/dkms-fail`` exists, the "build" fails the way DKMS reports it: a compiler error in
  ``/var/lib/dkms/<m>/<v>/build/make.log``, "Error! Bad return status for module build ..." and exit status 10.
* ``doca-ofed``, ``doca-roce``, ``doca-networking``: profile meta-packages (``<release>-<build>`` versions, like
  ``doca-ofed=2.9.5-0.1.8``) depending on exact versions of the above.

Re-running with unchanged inputs reuses the output (a stamp holds the hash of this file).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: DOCA release -> (ofed_info version, deb version of the OFED packages, build suffix of the profile packages);
#: pairs as NVIDIA publishes them (DOCA 2.9.1 <-> OFED 24.10-1.1.4, DOCA 3.2.0 <-> OFED 25.10-1.2.8.0)
RELEASES = {
    "2.9.1": ("24.10-1.1.4.0.200", "24.10.OFED.24.10.1.1.4.1-1", "0.1.4"),
    "3.2.0": ("25.10-1.2.8.0", "25.10.OFED.25.10.1.2.8.1-1", "0.2.8"),
}
OS_DIRS = ("debian12", "debian13")
ARCH_DIR, DEB_ARCH = "x86_64", "amd64"
PROFILES = ("doca-ofed", "doca-roce", "doca-networking")
DKMS_MODULES = ("mlx_compat", "ib_core", "ib_uverbs", "ib_umad", "iw_cm", "ib_cm", "rdma_cm", "rdma_ucm", "ib_ipoib",
                "mlxfw", "mlx5_core", "mlx5_ib")
MAINTAINER = "rdma.k8s_node tests <tests@rdma-k8s-node.invalid>"

OFED_INFO = """#!/bin/bash
usage()
{
\tcat <<EOF
Usage: $0 [options]

Options:
    -s       Show package name and version number.
    -n       Show numerical version number only.
    -l       List installed packages details (Default option).
EOF
}
if [ "X$1" == "X-s" ]; then echo OFED-internal-{ofed}:; exit 0; fi
if [ "X$1" == "X-n" ]; then echo {ofed}; exit 0; fi
if [ "X$1" != "X-l" ] && [ "X$1" != "X" ]; then usage; exit 1; fi

cat << EOF
OFED-internal-{ofed}:

mlnx-ofed-kernel:
mlnx_ofed/mlnx-ofa_kernel-{release}.tgz

ofed-scripts:
ofed-scripts-{release}.tgz
EOF
"""

OPENIBD = r"""#!/bin/sh
### BEGIN INIT INFO
# Provides:          openibd
# Required-Start:    $local_fs
# Required-Stop:
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Description:       Activates/Deactivates InfiniBand Driver to start at boot time.
### END INIT INFO
# openibd of the rdma.k8s_node test packages: stops and starts the RDMA stack through modprobe (in the test
# containers the node simulator's), as the real openibd does for the modules /etc/infiniband/openib.conf enables.
CONF=/etc/infiniband/openib.conf
[ -r "$CONF" ] && . "$CONF"
modules() {
    echo mlx5_core mlx5_ib ib_uverbs
    [ "${UMAD_LOAD:-yes}" = yes ] && echo ib_umad
    [ "${RDMA_UCM_LOAD:-yes}" = yes ] && echo rdma_ucm
    [ "${IPOIB_LOAD:-yes}" = yes ] && echo ib_ipoib
}
stop() {
    # nvidia_peermem holds ib_core: the real openibd unloads it first (and does not load it again);
    # modprobe -r also drops dependencies nothing uses any more
    for m in nvidia_peermem ib_ipoib rdma_ucm ib_umad ib_uverbs mlx5_ib mlx5_core rdma_cm ib_cm iw_cm ib_core; do
        modprobe -r -q "$m" 2>/dev/null || true
    done
}
start() {
    rc=0
    for m in $(modules); do
        modprobe "$m" || rc=1
    done
    return $rc
}
case "$1" in
# like the real one, start replaces whatever RDMA stack is loaded (the inbox one at first) with OFED's
start) echo "Unloading HCA driver:"; stop; echo "Loading HCA driver and Access Layer:"; start ;;
stop) echo "Unloading HCA driver:"; stop ;;
restart|force-reload) stop && start ;;
status) for m in $(modules); do grep -q "^$m " /proc/modules 2>/dev/null && echo "$m loaded"; done; exit 0 ;;
*) echo "Usage: $0 {start|stop|restart|status}" >&2; exit 2 ;;
esac
"""

OPENIBD_SERVICE = """[Unit]
Description=openibd - configure Mellanox devices
Documentation=file:/etc/infiniband/openib.conf
After=systemd-modules-load.service
Before=network-pre.target
DefaultDependencies=no

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/etc/init.d/openibd start
ExecStop=/etc/init.d/openibd stop

[Install]
WantedBy=sysinit.target
"""

OPENIB_CONF = """# Start HCA driver upon boot
ONBOOT=yes
# Load UMAD module
UMAD_LOAD=yes
# Load RDMA_UCM module
RDMA_UCM_LOAD=yes
# Load IPoIB
IPOIB_LOAD=yes
"""

UTILS_POSTINST = """#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
    systemctl enable openibd.service >/dev/null 2>&1 || true
fi
exit 0
"""

# the simulator's control file: JSON in, JSON out (the hwsim shims use it the same way)
NOTIFY = r"""notify() {
    ctl="${HWSIM_ROOT:-/opt/hwsim}/.hwsim/ctl"
    [ -e "$ctl" ] || return 0
    python3 - "$ctl" "$1" <<'PY' || true
import json, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, json.dumps({"cmd": "ofed_set", "version": sys.argv[2] or None}).encode())
os.read(fd, 65536)
os.close(fd)
PY
}
"""

DKMS_POSTINST = """#!/bin/sh
# Stand-in for `dkms add/build/install -m {name} -v {version}` (the real package builds OFED's drivers with DKMS)
set -e
name={name}
version={version}
tree=/var/lib/dkms/$name/$version
arch=$(uname -m)
{notify}
[ "$1" = configure ] || exit 0
mkdir -p "$tree"
ln -sfn "/usr/src/$name-$version" "$tree/source"
built=0
for dir in /lib/modules/*/build; do
    [ -d "$dir" ] || continue
    kernel=$(basename "$(dirname "$dir")")
    mkdir -p "$tree/build"
    log="$tree/build/make.log"
    {{
        echo "DKMS make.log for $name-$version for kernel $kernel ($arch)"
        date
        echo "make -j2 KVER=$kernel K_BUILD=/lib/modules/$kernel/build"
        for m in {modules}; do echo "  CC [M]  $tree/build/$m.o"; done
    }} > "$log"
    if [ -e /etc/rdma-k8s-node-test/dkms-fail ]; then
        cat /etc/rdma-k8s-node-test/dkms-fail >> "$log"
        echo "Error! Bad return status for module build on kernel: $kernel ($arch)"
        echo "Consult $log for more information."
        exit 10
    fi
    echo "  LD [M]  modules done" >> "$log"
    mkdir -p "$tree/$kernel/$arch/module" "$tree/$kernel/$arch/log" "/lib/modules/$kernel/updates/dkms"
    for m in {modules}; do
        echo "fake kernel module $m for $kernel" > "$tree/$kernel/$arch/module/$m.ko"
        cp "$tree/$kernel/$arch/module/$m.ko" "/lib/modules/$kernel/updates/dkms/$m.ko"
    done
    mv "$log" "$tree/$kernel/$arch/log/make.log"
    rm -rf "$tree/build"
    ln -sfn "$version/$kernel/$arch" "/var/lib/dkms/$name/kernel-$kernel-$arch"
    built=1
done
[ "$built" = 1 ] && notify {ofed_label}
exit 0
"""

DKMS_PRERM = """#!/bin/sh
# Stand-in for `dkms remove -m {name} -v {version} --all`
set -e
name={name}
version={version}
{notify}
for link in /var/lib/dkms/$name/kernel-*; do
    [ -L "$link" ] || continue
    case "$(readlink "$link")" in
    "$version"/*)
        kernel=$(readlink "$link" | cut -d/ -f2)
        for m in {modules}; do rm -f "/lib/modules/$kernel/updates/dkms/$m.ko"; done
        rm -f "$link" ;;
    esac
done
rm -rf "/var/lib/dkms/$name/$version"
[ "$1" = remove ] && notify ""
exit 0
"""


def run(argv, **kwargs):
    """Run a command, failing loudly."""
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


def build_deb(workdir: Path, name: str, version: str, arch: str, depends: str, description: str,
              files: dict[str, tuple[str, int]], scripts: dict[str, str], conffiles: tuple[str, ...] = ()) -> Path:
    """One .deb with dpkg-deb: ``files`` maps absolute paths to (text, mode)."""
    root = workdir / f"{name}_{version}"
    shutil.rmtree(root, ignore_errors=True)
    (root / "DEBIAN").mkdir(parents=True)
    for path, (text, mode) in files.items():
        local = root / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text, encoding="utf-8")
        local.chmod(mode)
    control = [f"Package: {name}", f"Version: {version}", f"Architecture: {arch}", f"Maintainer: {MAINTAINER}",
               "Section: net", "Priority: optional"]
    if depends:
        control.append(f"Depends: {depends}")
    control.append(f"Description: {description}\n test package of the rdma.k8s_node collection (not NVIDIA's)")
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n", encoding="utf-8")
    for script, text in scripts.items():
        (root / "DEBIAN" / script).write_text(text, encoding="utf-8")
        (root / "DEBIAN" / script).chmod(0o755)
    if conffiles:
        (root / "DEBIAN" / "conffiles").write_text("".join(c + "\n" for c in conffiles), encoding="utf-8")
    deb = workdir / f"{name}_{version}_{arch}.deb"
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)])
    return deb


def release_debs(workdir: Path, release: str) -> list[Path]:
    """The packages of one DOCA release."""
    ofed, debver, build = RELEASES[release]
    upstream = debver.rsplit("-", 1)[0]
    scripts_ver = debver.rsplit(".", 1)[0] + "-1"   # ofed-scripts drops the last number: 24.10.OFED.24.10.1.1.4-1
    modules = " ".join(DKMS_MODULES)
    fill = {"name": "mlnx-ofed-kernel", "version": upstream, "modules": modules, "notify": NOTIFY,
            "ofed_label": "OFED-internal-" + ofed}
    debs = [
        build_deb(workdir, "ofed-scripts", scripts_ver, DEB_ARCH, "", "OFED scripts (ofed_info)",
                  {"/usr/bin/ofed_info": (OFED_INFO.replace("{ofed}", ofed).replace("{release}", upstream), 0o755)},
                  {}),
        build_deb(workdir, "mlnx-ofed-kernel-utils", debver, DEB_ARCH, f"ofed-scripts (= {scripts_ver})",
                  "Userspace tools to restart and tune mlnx-ofed kernel modules (openibd)",
                  {"/etc/init.d/openibd": (OPENIBD, 0o755), "/lib/systemd/system/openibd.service": (OPENIBD_SERVICE, 0o644),
                   "/etc/infiniband/openib.conf": (OPENIB_CONF, 0o644)},
                  {"postinst": UTILS_POSTINST}, conffiles=("/etc/infiniband/openib.conf",)),
        build_deb(workdir, "mlnx-ofed-kernel-dkms", debver, "all", f"mlnx-ofed-kernel-utils (= {debver})",
                  "DKMS support for mlnx-ofed kernel modules",
                  {f"/usr/src/mlnx-ofed-kernel-{upstream}/dkms.conf": (
                      f'PACKAGE_NAME="mlnx-ofed-kernel"\nPACKAGE_VERSION="{upstream}"\nAUTOINSTALL="yes"\n', 0o644)},
                  {"postinst": DKMS_POSTINST.format(**fill), "prerm": DKMS_PRERM.format(**fill)}),
    ]
    for profile in PROFILES:
        debs.append(build_deb(workdir, profile, f"{release}-{build}", DEB_ARCH,
                              f"mlnx-ofed-kernel-dkms (= {debver}), mlnx-ofed-kernel-utils (= {debver}), "
                              f"ofed-scripts (= {scripts_ver})",
                              f"DOCA {release} host profile {profile}", {}, {}))
    return debs


def packages_index(debs: list[Path]) -> str:
    """The Packages file of a flat repository."""
    stanzas = []
    for deb in sorted(debs):
        control = run(["dpkg-deb", "-f", str(deb)]).stdout.strip()
        data = deb.read_bytes()
        stanzas.append(f"{control}\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"MD5sum: {hashlib.md5(data).hexdigest()}\nSHA256: {hashlib.sha256(data).hexdigest()}\n")
    return "\n".join(stanzas)


def release_file(repo: Path, label: str) -> str:
    """The Release file over Packages and Packages.gz (dated an hour ago: apt refuses dates in the future)."""
    date = time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime(time.time() - 3600))
    lines = ["Origin: rdma.k8s_node tests", f"Label: {label}", f"Date: {date}", "Architectures: amd64 all",
             "Description: DOCA-like test repository (not NVIDIA's)"]
    for algo in ("MD5Sum", "SHA256"):
        lines.append(f"{algo}:")
        for name in ("Packages", "Packages.gz"):
            data = (repo / name).read_bytes()
            digest = hashlib.md5(data).hexdigest() if algo == "MD5Sum" else hashlib.sha256(data).hexdigest()
            lines.append(f" {digest} {len(data)} {name}")
    return "\n".join(lines) + "\n"


def build(out: Path) -> None:
    """Build everything under ``out`` (replaced)."""
    stamp = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    if (out / ".stamp").is_file() and (out / ".stamp").read_text(encoding="utf-8") == stamp:
        print(f"{out}: current")
        return
    shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="doca-repo-") as tmp:
        work = Path(tmp)
        gnupg = work / "gnupg"
        gnupg.mkdir(mode=0o700)
        env = dict(os.environ, GNUPGHOME=str(gnupg))
        run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
             "rdma.k8s_node test DOCA mirror <tests@rdma-k8s-node.invalid>", "ed25519", "sign", "never"], env=env)
        key = run(["gpg", "--batch", "--armor", "--export"], env=env).stdout
        (out / "doca").mkdir(parents=True)
        (out / "doca" / "GPG-KEY-Mellanox.pub").write_text(key, encoding="utf-8")
        for release in RELEASES:
            debs = release_debs(work, release)
            for os_dir in OS_DIRS:
                repo = out / "doca" / release / os_dir / ARCH_DIR
                repo.mkdir(parents=True)
                for deb in debs:
                    shutil.copy2(deb, repo / deb.name)
                index = packages_index([repo / deb.name for deb in debs])
                (repo / "Packages").write_text(index, encoding="utf-8")
                with gzip.open(repo / "Packages.gz", "wt", encoding="utf-8") as handle:
                    handle.write(index)
                (repo / "Release").write_text(release_file(repo, f"DOCA {release} {os_dir}"), encoding="utf-8")
                run(["gpg", "--batch", "--yes", "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release")],
                    env=env)
                run(["gpg", "--batch", "--yes", "-abs", "-o", str(repo / "Release.gpg"), str(repo / "Release")], env=env)
                (repo / "GPG-KEY-Mellanox.pub").write_text(key, encoding="utf-8")
    (out / ".stamp").write_text(stamp, encoding="utf-8")
    print(f"{out}: built {len(RELEASES)} releases x {len(OS_DIRS)} OS")


def main(argv: list[str]) -> int:
    """Entry point."""
    if len(argv) != 1:
        print(__doc__.split("\n\n", 2)[1], file=sys.stderr)
        return 2
    build(Path(argv[0]).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
