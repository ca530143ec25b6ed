"""The Kubernetes CRI protocol for the test client: api.proto from Debian's golang-k8s-cri-api-dev, compiled at
test time with grpcio-tools into .cache/cri/gen (nothing generated is committed).

The package is fetched with apt itself (``apt-get download``) against a private sources list and state
directory under .cache/cri/apt, so the machine's own apt configuration is neither used nor changed.  Debian's
sid archive is frozen on this CI's mirror, hence ``Check-Valid-Until=false``.
"""

import fcntl
import glob
import importlib
import os
import pathlib
import subprocess
import sys

PACKAGE = "golang-k8s-cri-api-dev"
PROTO_IN_DEB = "./usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto"
SUITE = os.environ.get("CRI_API_SUITE", "sid")
MIRROR = os.environ.get("MIRROR", "http://deb.debian.org/debian")


def _apt_options(apt_dir):
    return ["-o", "Dir::Etc::SourceList=%s/sources.list" % apt_dir, "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "Dir::State::Lists=%s/lists" % apt_dir, "-o", "Dir::Cache=%s/cache" % apt_dir,
            "-o", "Acquire::Check-Valid-Until=false", "-o", "APT::Sandbox::User=root", "-q"]


def fetch_proto(cache):
    """Path of api.proto, downloading and unpacking the Debian package once."""
    proto = cache / "api.proto"
    if proto.exists():
        return proto
    apt_dir = cache / "apt"
    for sub in ("lists/partial", "cache/archives/partial"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    (apt_dir / "sources.list").write_text("deb [check-valid-until=no] %s %s main\n" % (MIRROR, SUITE))
    opts = _apt_options(apt_dir)
    subprocess.run(["apt-get"] + opts + ["update"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get"] + opts + ["download", PACKAGE], check=True, cwd=apt_dir, stdout=subprocess.DEVNULL)
    deb = sorted(glob.glob(str(apt_dir / ("%s_*.deb" % PACKAGE))))[-1]
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], check=True, capture_output=True).stdout
    out = subprocess.run(["tar", "-xO", PROTO_IN_DEB], input=tar, check=True, capture_output=True).stdout
    tmp = proto.with_suffix(".tmp")
    tmp.write_bytes(out)
    tmp.rename(proto)
    return proto


def load(cache_dir):
    """``(api_pb2, api_pb2_grpc)``, generating them under ``cache_dir/gen`` when needed."""
    cache = pathlib.Path(cache_dir).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    gen = cache / "gen"
    # one client per molecule platform runs at the same time on a fresh cache: the first fetches and
    # generates, the others wait for it instead of racing apt's lock and importing half-written modules
    with open(cache / ".lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (gen / "api_pb2_grpc.py").exists():
            proto = fetch_proto(cache)
            gen.mkdir(parents=True, exist_ok=True)
            from grpc_tools import protoc  # pylint: disable=import-outside-toplevel
            rc = protoc.main(["grpc_tools.protoc", "-I%s" % proto.parent, "--python_out=%s" % gen,
                              "--grpc_python_out=%s" % gen, str(proto)])
            if rc != 0:
                raise RuntimeError("protoc failed on %s (rc %s)" % (proto, rc))
    if str(gen) not in sys.path:
        sys.path.insert(0, str(gen))
    return importlib.import_module("api_pb2"), importlib.import_module("api_pb2_grpc")
