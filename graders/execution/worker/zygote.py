"""A warm worker: torch imported once per `grade` process, each worker a fork of it, in its own sandbox.

The zygote runs as root outside any sandbox and never runs student code: it imports what every
worker imports (torch, our worker modules, the lazy stand-ins; matplotlib, handed to a worker only
where a fresh import would give the same, worker/warm.py) and then only forks, one child per
worker start, on the trusted side's request over a private socketpair. The child (C) enters the
PID namespace of a bwrap "holder" that the trusted side started for this worker exactly as it
starts a worker (same mounts, namespaces, scratch), and forks the worker (W) into it; C stays
outside, waits for W and reports W's status, as bwrap's exit code does for a spawned worker.

W joins the holder's other namespaces and its root, the grade's cgroups, sets its rlimits, drops
every capability (bounding set, no_new_privs, the sandbox uid) and then goes on as a spawned worker
does: Landlock, seccomp, the hello, requests. What it inherits is the zygote's memory (torch, our
code, no secret: the zygote is started with the worker's environment) and the fds it was sent.
"""

import ctypes
import json
import os
import resource
import signal
import socket
import sys
import tempfile

_NS = {"ipc": 0x08000000, "uts": 0x04000000, "net": 0x40000000, "cgroup": 0x02000000, "mnt": 0x00020000}
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
_REQ_FD, _REP_FD = 3, 4  # where W finds its request and reply pipes
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def serve(sock_fd: int) -> None:
    """The zygote's loop: one fork per request, until the trusted side closes the socket. Nothing
    is sent back: the worker's hello on its reply pipe is the answer."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    from . import main, warm

    main.prepare()
    warm.preload(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mplconfig"))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # each C is reaped by the kernel
    sock = socket.socket(fileno=sock_fd)
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
        if not msg:
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                _child(json.loads(msg), fds)
            except BaseException:
                import traceback

                text = traceback.format_exc().encode()
                for fd in (2, fds[3]):
                    try:
                        os.write(fd, text)
                    except OSError:
                        pass
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)


def _child(req: dict, fds: list[int]) -> None:
    """C: into the holder's PID namespace, fork W, report W's status on the last fd."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    holder = int(req["holder"])
    ns = {name: os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in _NS}
    root = os.open(f"/proc/{holder}/root", os.O_RDONLY | os.O_CLOEXEC)
    cgroups = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in req["cgroups"]]
    pid_ns = os.open(f"/proc/{holder}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _check(_libc.setns(pid_ns, _CLONE_NEWPID), "setns pid")
    status = fds[-1]
    w = os.fork()
    if w == 0:
        os.close(status)
        _worker(req, fds[:-1], ns, root, cgroups)
    for fd in (*fds[:-1], *ns.values(), root, *cgroups, pid_ns):
        os.close(fd)
    _, code = os.waitpid(w, 0)
    # As bwrap's exit code says it: the status, or 128 + the signal that ended W.
    os.write(status, str(os.waitstatus_to_exitcode(code) if os.WIFEXITED(code) else 128 + os.WTERMSIG(code)).encode())
    os._exit(0)


def _worker(req: dict, fds: list[int], ns: dict[str, int], root: int, cgroups: list[int]) -> None:
    """W: the holder's namespaces, root and cgroups, no privilege left, then the worker's loop."""
    if not isinstance(req["limits"].get("uid"), int):  # never student code as root
        raise SystemExit("a forked worker needs a sandbox uid")
    for fd in cgroups:
        os.write(fd, b"0")  # "0": the writer itself
        os.close(fd)
    for name, fd in ns.items():
        _check(_libc.setns(fd, _NS[name]), f"setns {name}")
    os.fchdir(root)
    os.chroot(".")
    os.chdir(req["cwd"])
    os.setsid()
    _own_fds(fds)
    _limits(req["rlimits"])
    from .privileges import drop_bounding_set, no_new_privs

    drop_bounding_set()  # no setuid binary gives any capability back; the uid drop is serve_forked's
    no_new_privs()
    os.environ.clear()
    os.environ.update(req["env"])
    tempfile.tempdir = None  # from TMPDIR, now this worker's
    _fresh_randomness()
    sys.argv = ["-c", str(_REQ_FD), str(_REP_FD), json.dumps(req["limits"])]  # as a spawned worker's
    from . import main

    main.serve_forked(_REQ_FD, _REP_FD, req["limits"])
    os._exit(0)


def _fresh_randomness() -> None:
    """random and numpy.random seeded from the OS, as a fresh interpreter seeds them: every fork
    would otherwise start from the zygote's state, the same in all its workers."""
    import random

    random.seed()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()


def _own_fds(fds: list[int]) -> None:
    """stdin /dev/null, stdout and stderr to the trusted side's pumps, the two pipes at 3 and 4;
    every other fd closed."""
    req_r, rep_w, out_w, err_w = fds
    null = os.open("/dev/null", os.O_RDONLY)
    high = [os.dup(fd) for fd in (null, out_w, err_w, req_r, rep_w)]  # above 0..4 before dup2 onto them
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(_REP_FD + 1, os.sysconf("SC_OPEN_MAX"))  # sys.stdout and stderr still write to 1 and 2


def _limits(rlimits: dict) -> None:
    """As the spawned worker's preexec sets them (NPROC before the uid drop: it counts per uid)."""
    for name, (soft, hard) in rlimits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
