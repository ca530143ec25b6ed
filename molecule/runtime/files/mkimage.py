"""Build a tiny Docker-archive image from the node's static busybox, for CRI tests (no registry here).

    python3 mkimage.py OUT.tar TAG [--elf PATH]... [--file PATH]...

One layer: /bin/busybox plus sh, sleep, cat, id links and the usual empty directories.  The default command
sleeps, so the same image serves as the pod sandbox ("pause") image.  ``--elf PATH`` adds a program or a library of
the node at the same path with every shared library ``ldd`` says it loads (so a pod runs the node's own
``ib_write_bw`` with its verbs provider); ``--file PATH`` adds a plain file (``/etc/ld.so.cache``, a provider's
``.driver`` file).  Symlinks are stored as the files they point to.
"""

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile

BASE_DIRS = ("bin", "dev", "etc", "proc", "sys", "tmp", "var", "var/log")


def elf_closure(paths):
    """``paths`` and every shared library they load, by ``ldd`` (which follows the whole dependency tree)."""
    found = []
    for path in paths:
        found.append(path)
        out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
        # "libibverbs.so.1 => /lib/x86_64-linux-gnu/libibverbs.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"
        found.extend(re.findall(r"(/\S+) \(0x[0-9a-f]+\)", out))
    return sorted(set(found))


def parents(path):
    parts = path.strip("/").split("/")[:-1]
    return ["/".join(parts[:i + 1]) for i in range(len(parts))]


def layer_bytes(extra=()):
    out = io.BytesIO()
    directories = sorted(set(BASE_DIRS).union(*[parents(path) for path in extra]))
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in directories:
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        for path in extra:
            tar.add(os.path.realpath(path), path.lstrip("/"), recursive=False)
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
    elves, files, args = [], [], sys.argv[3:]
    while args:
        option, path = args[:2]
        if option not in ("--elf", "--file") or not os.path.isabs(path):
            sys.exit("usage: mkimage.py OUT.tar TAG [--elf PATH]... [--file PATH]... (absolute paths)")
        (elves if option == "--elf" else files).append(path)
        args = args[2:]
    layer = layer_bytes(sorted(set(elf_closure(elves) + files)))
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Cmd": ["/bin/sh", "-c", "exec sleep 86400"], "Env": ["PATH=/bin:/usr/bin"]},
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
