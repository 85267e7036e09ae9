"""A seccomp filter, as raw classic BPF through prctl (ctypes, no libseccomp): the worker installs
it on itself before student code runs, and every process it starts inherits it.

It refuses (EPERM) what grading never needs and an escape would: internet sockets (AF_INET and
AF_INET6: the network is a namespace away already, and Landlock blocks TCP; this blocks UDP and
raw sockets too), ptrace and reading or writing other processes' memory, mounts, namespaces,
kernel keyrings, eBPF, perf events, userfaultfd and io_uring. Everything else is allowed: a
deny-list, so torch and Python keep working. Syscalls of another ABI (x32, i386 through int 0x80)
are refused outright, since their numbers would slip past the list. Only x86_64 and aarch64.
"""

import ctypes
import platform
import struct

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1
# BPF opcodes: load word at absolute offset, jump if equal / greater or equal (constant), return.
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_AF_INET, _AF_INET6 = 2, 10
_X32_BIT = 0x40000000

# name: (x86_64, aarch64)
_DENIED = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "unshare": (272, 97),
    "setns": (308, 268),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "open_by_handle_at": (304, 265),
    "kexec_load": (246, 104),
    "init_module": (175, 105),
    "finit_module": (313, 273),
}
_SOCKET = (41, 198)
_ARCH = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # AUDIT_ARCH_*


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _program(column: int, arch: int) -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) instructions. Jumps name a target ("allow", "eperm") or 0 (the next
    instruction) and are resolved to BPF's offsets relative to the next instruction."""
    code: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 0, "eperm", arch),
        (_LD_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if column == 0:
        code.append((_JGE, "eperm", 0, _X32_BIT))
    code += [(_JEQ, "eperm", 0, numbers[column]) for numbers in _DENIED.values()]
    code += [
        (_JEQ, 0, "allow", _SOCKET[column]),
        (_LD_ABS, 0, 0, 16),  # seccomp_data.args[0]: the domain (low 32 bits, little-endian)
        (_JEQ, "eperm", 0, _AF_INET),
        (_JEQ, "eperm", 0, _AF_INET6),
    ]
    labels = {"allow": len(code), "eperm": len(code) + 1}
    code += [(_RET, 0, 0, _RET_ALLOW), (_RET, 0, 0, _RET_EPERM)]
    hop = lambda at, to: labels[to] - at - 1 if isinstance(to, str) else to  # noqa: E731
    return [(op, hop(i, jt), hop(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)]


def install() -> bool:
    """Install the filter on this process (and all it starts); False where this machine kind is
    not one we have numbers for, or the kernel refuses."""
    arch = _ARCH.get(platform.machine())
    if arch is None:
        return False
    code = _program(*arch)
    raw = b"".join(struct.pack("HBBI", op, jt, jf, k) for op, jt, jf, k in code)
    buf = ctypes.create_string_buffer(raw, len(raw))
    prog = _Fprog(len(code), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
