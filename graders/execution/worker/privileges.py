"""Giving up root before any student code runs, however the worker was started (spawned, forked
from the zygote, or through the sandbox's preexec): the bounding set emptied, so that no setuid
binary or exec as root gives a capability back; the sandbox uid, or where there is none, uid 0
with no capability at all; and no_new_privs."""

import ctypes
import os
import struct

_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 24, 38
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_CAP_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def drop_bounding_set() -> None:
    """Every capability out of the bounding set. Needs CAP_SETPCAP; without it (not root, or in a
    container that kept only a few) each drop fails quietly and the set stays as it was given."""
    for cap in range(64):
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)


def drop_capabilities() -> None:
    """Effective, permitted and inheritable sets emptied (capset(2)): root that is root by uid only."""
    header = ctypes.create_string_buffer(struct.pack("Ii", _CAP_VERSION_3, 0))
    data = ctypes.create_string_buffer(struct.pack("6I", *([0] * 6)))
    number = _SYS_CAPSET.get(os.uname().machine)
    if number is None:
        raise OSError(f"capset: no syscall number for {os.uname().machine}")
    _check(_libc.syscall(number, header, data), "capset")


def no_new_privs() -> None:
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def give_up_root(uid: int | None) -> None:
    """As root: the bounding set emptied, then the sandbox `uid` (every capability goes with uid 0),
    or with `uid` None every capability dropped in place; then no_new_privs, root or not."""
    if os.geteuid() == 0:
        drop_bounding_set()
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            if os.getuid() != uid or os.geteuid() != uid:
                raise SystemExit("could not drop to the sandbox uid")
        else:
            drop_capabilities()
    no_new_privs()
