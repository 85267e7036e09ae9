"""Landlock, through raw syscalls (ctypes): the worker locks itself in before student code runs.

After `restrict(read, write)`, this process and everything it starts can read only beneath
`read`, write only beneath `write`, cannot bind or connect TCP sockets (ABI 4+), and cannot signal
or reach abstract unix sockets outside its own domain (ABI 6+). It is a second wall behind the
mount namespace, and the main one where namespaces cannot be made (a default Docker container).
Imported by the trusted side too, for `abi_version` only.
"""

import ctypes
import os

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_VERSION_FLAG = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)  # rights that apply to a file itself
_NET_BIND_CONNECT = 0b11
_SCOPE_ABSTRACT_UNIX_AND_SIGNAL = 0b11


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI, 0 where there is none (or it is disabled)."""
    try:
        libc = _libc()
        return max(0, libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG)))
    except (OSError, AttributeError):
        return 0


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(k for k in _FS_BY_ABI if k <= abi)]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock {what}: {os.strerror(err)}")
    return result


def restrict(read: list[str], write: list[str]) -> int:
    """Lock this process in; returns the ABI used. Paths that do not exist are skipped."""
    abi = abi_version()
    if abi < 1:
        raise OSError("landlock is not available")
    libc = _libc()
    handled = _fs_rights(abi)
    attr = _RulesetAttr(
        handled, _NET_BIND_CONNECT if abi >= 4 else 0, _SCOPE_ABSTRACT_UNIX_AND_SIGNAL if abi >= 6 else 0
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _check(
        libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)), "create_ruleset"
    )
    try:
        for paths, rights in ((read, EXECUTE | READ_FILE | READ_DIR), (write, handled)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    allowed = rights & handled
                    if not os.path.isdir(path):
                        allowed &= _FILE_ONLY
                    rule = _PathBeneath(allowed, fd)
                    _check(
                        libc.syscall(
                            _ADD_RULE,
                            ctypes.c_int(ruleset),
                            ctypes.c_int(_RULE_PATH_BENEATH),
                            ctypes.byref(rule),
                            ctypes.c_uint32(0),
                        ),
                        f"add_rule {path}",
                    )
                finally:
                    os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "restrict_self")
    finally:
        os.close(ruleset)
    return abi
