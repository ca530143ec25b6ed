"""Command line: python -m hwsim {mount,umount,render,ctl,list}."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import mount
from .renderer import render
from .spec import SpecError, archetypes, load
from .state import Node


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m hwsim", description="Simulated GPU/RDMA node for tests")
    sub = parser.add_subparsers(dest="command", required=True)
    p_mount = sub.add_parser("mount", help="serve SPEC at MOUNTPOINT over FUSE")
    p_mount.add_argument("spec", help="archetype name or spec file")
    p_mount.add_argument("mountpoint")
    p_mount.add_argument("--etc", help="directory holding modprobe.d/ and modules-load.d/ read at power-on")
    p_mount.add_argument("--foreground", action="store_true", help="serve in this process instead of a daemon")
    p_mount.add_argument("--single-thread", action="store_true",
                         help="serve one request at a time: faster, refuses hang and delay faults (one caller at a time)")
    p_umount = sub.add_parser("umount", help="unmount and wait for the daemon to exit")
    p_umount.add_argument("mountpoint")
    p_render = sub.add_parser("render", help="write the power-on tree as plain files")
    p_render.add_argument("spec")
    p_render.add_argument("directory")
    p_ctl = sub.add_parser("ctl", help="send one JSON control command")
    p_ctl.add_argument("mountpoint")
    p_ctl.add_argument("json")
    sub.add_parser("list", help="list archetype names")
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (SpecError, RuntimeError, OSError, ValueError) as exc:
        print(f"hwsim: {exc}", file=sys.stderr)
        return 1


def _mount(args: argparse.Namespace) -> int:
    spec = load(args.spec)
    if not args.foreground:
        print(mount.start(spec, args.mountpoint, args.etc, threads=not args.single_thread))
        return 0
    from .fusefs import serve  # pylint: disable=import-outside-toplevel  # mfusepy loads libfuse at import
    if Path(args.mountpoint).is_mount():
        raise RuntimeError(f"{args.mountpoint} is already a mount point")
    serve(Node(spec, etc_dir=args.etc), args.mountpoint, threads=not args.single_thread)
    return 0


def _umount(args: argparse.Namespace) -> int:
    mount.stop(args.mountpoint)
    return 0


def _render(args: argparse.Namespace) -> int:
    print(render(args.spec, args.directory))
    return 0


def _ctl(args: argparse.Namespace) -> int:
    reply = mount.ctl(args.mountpoint, args.json)
    print(json.dumps(reply, indent=2, sort_keys=True))
    return 0 if reply.get("ok") else 1


def _list(dummy_args: argparse.Namespace) -> int:
    for name in archetypes():
        print(name)
    return 0


COMMANDS = {"mount": _mount, "umount": _umount, "render": _render, "ctl": _ctl, "list": _list}

if __name__ == "__main__":
    sys.exit(main())
