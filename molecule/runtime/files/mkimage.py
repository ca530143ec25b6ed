"""Build a tiny Docker-archive image from the node's static busybox, for CRI tests (no registry here).

    python3 mkimage.py OUT.tar TAG

One layer: /bin/busybox plus sh, sleep, cat, id links and the usual empty directories.  The default command
sleeps, so the same image serves as the pod sandbox ("pause") image.
"""

import hashlib
import io
import json
import sys
import tarfile


def layer_bytes():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("bin", "dev", "etc", "proc", "sys", "tmp", "var", "var/log"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        tar.add("/bin/busybox", "bin/busybox")
        for name in ("sh", "sleep", "cat", "id"):
            info = tarfile.TarInfo("bin/" + name)
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/:/bin/sh\nrdma:x:1000:1000:rdma:/tmp:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(passwd))
    return out.getvalue()


def main():
    dest, tag = sys.argv[1:3]
    layer = layer_bytes()
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Cmd": ["/bin/sh", "-c", "exec sleep 86400"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": ["layer.tar"]}]).encode()
    with tarfile.open(dest, "w") as tar:
        for name, data in (("layer.tar", layer), (config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
