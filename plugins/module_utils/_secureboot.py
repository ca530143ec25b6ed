# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""UEFI Secure Boot as a node's kernel enforces it, read from files only (through a HostRoot, so an audit pod with
the host mounted elsewhere reads it too).

* A node booted by UEFI has ``/sys/firmware/efi``; without it there is no Secure Boot.
* efivarfs (``/sys/firmware/efi/efivars``) shows each variable as ``<Name>-<VendorGuid>``: the first 4 bytes are
  its attributes (a little-endian u32), the rest its data (the kernel's Documentation/filesystems/efivarfs.rst).
  ``SecureBoot`` and ``SetupMode`` (EFI global variable GUID 8be4df61-93ca-11d2-aa0d-e0a9e80b7c1c) hold one byte.
* mokutil ``--sb-state`` (src/mokutil.c ``sb_state_internal``) prints "SecureBoot enabled" when SecureBoot is 1 and
  SetupMode is 0, "SecureBoot disabled" when SecureBoot is 0 or SetupMode is 1, and adds "SecureBoot validation is
  disabled in shim" when shim's ``MokSBStateRT`` (GUID 605dab50-e046-4300-abb6-3dd810dd8b23) exists. The kernel's
  EFI stub treats shim's insecure mode (MokSBState) as Secure Boot off as well, so signatures are not enforced then.
* No ``SecureBoot`` variable on an EFI node: mokutil says "This system doesn't support Secure Boot".

Anything that cannot be read or is too short to hold the data byte gives ``enabled: None`` (unknown), never an
exception.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import HostReadError

EFI_DIR = "/sys/firmware/efi"
EFIVARS = EFI_DIR + "/efivars"
GLOBAL_GUID = "8be4df61-93ca-11d2-aa0d-e0a9e80b7c1c"
SHIM_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"
SECURE_BOOT = "%s/SecureBoot-%s" % (EFIVARS, GLOBAL_GUID)
SETUP_MODE = "%s/SetupMode-%s" % (EFIVARS, GLOBAL_GUID)
MOK_SB_STATE = "%s/MokSBStateRT-%s" % (EFIVARS, SHIM_GUID)


def efivar_value(data):
    """The first data byte of an efivarfs file (4 attribute bytes, then the data), or None when there is none
    (missing file, or fewer than 5 bytes)."""
    if data is None or len(data) < 5:
        return None
    return data[4]


def secure_boot_state(host, problems=None):
    """``{efi, enabled, setup_mode, shim_validation, source, reason}``.

    ``enabled`` is True when the firmware enforces Secure Boot and shim has not been put in insecure mode (unsigned
    kernel modules are then refused), False when it does not (or the node is not booted by UEFI), None when it
    could not be told; ``reason`` says which in words. Unreadable files go to ``problems``.
    """
    problems = problems if problems is not None else []
    state = {"efi": False, "enabled": False, "setup_mode": None, "shim_validation": None, "source": None,
             "reason": "not booted by UEFI (no %s): no Secure Boot" % EFI_DIR}
    try:
        efi = host.isdir(EFI_DIR)
    except HostReadError as exc:
        problems.append({"path": EFI_DIR, "error": exc.msg})
        state.update(enabled=None, reason="%s could not be read" % EFI_DIR)
        return state
    if not efi:
        return state
    state["efi"] = True
    values = {}
    for path in (SECURE_BOOT, SETUP_MODE, MOK_SB_STATE):
        try:
            data = host.read_bytes(path)
        except HostReadError as exc:
            problems.append({"path": path, "error": exc.msg})
            values[path] = ("unreadable", None)
            continue
        if data is None:
            values[path] = ("missing", None)
        elif efivar_value(data) is None:
            values[path] = ("short", None)
        else:
            values[path] = ("ok", efivar_value(data))
    kind, secure_boot = values[SECURE_BOOT]
    setup_kind, setup_mode = values[SETUP_MODE]
    mok_kind, mok_state = values[MOK_SB_STATE]
    state["source"] = SECURE_BOOT
    state["setup_mode"] = setup_mode == 1 if setup_kind == "ok" else None
    # MokSBStateRT exists only when shim's validation was turned off (mokutil --disable-validation)
    state["shim_validation"] = not (mok_kind == "ok" and mok_state == 1) if mok_kind != "unreadable" else None
    if kind == "missing":
        try:
            mounted = host.isdir(EFIVARS) and bool(host.listdir(EFIVARS))
        except HostReadError as exc:
            problems.append({"path": EFIVARS, "error": exc.msg})
            mounted = False
        if not mounted:
            state.update(enabled=None, reason="%s is empty or not mounted: the Secure Boot state cannot be read" % EFIVARS)
        else:
            state.update(enabled=False, reason="the firmware has no SecureBoot variable: this system does not support "
                                               "Secure Boot")
        return state
    if kind != "ok":
        state.update(enabled=None, reason="%s is %s: the Secure Boot state cannot be read" % (
            SECURE_BOOT, "unreadable" if kind == "unreadable" else "shorter than its 4 attribute bytes and 1 data byte"))
        return state
    if secure_boot == 0 or state["setup_mode"]:
        state.update(enabled=False, reason="SecureBoot disabled" + (" (the platform is in Setup Mode)"
                                                                    if state["setup_mode"] else ""))
    elif secure_boot == 1 and state["shim_validation"] is False:
        state.update(enabled=False, reason="SecureBoot enabled, but validation is disabled in shim (MokSBStateRT)")
    elif secure_boot == 1 and state["setup_mode"] is False:
        state.update(enabled=True, reason="SecureBoot enabled (%s = 1, SetupMode = 0)" % SECURE_BOOT)
    elif secure_boot == 1:
        # SetupMode unreadable: the firmware says enforced; treat as enabled (refusing is the safe side)
        state.update(enabled=True, reason="SecureBoot enabled (%s = 1; SetupMode not readable)" % SECURE_BOOT)
    else:
        state.update(enabled=None, reason="%s holds %d, neither 0 nor 1" % (SECURE_BOOT, secure_boot))
    return state
