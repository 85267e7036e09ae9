"""Worker entry point: `python -I -c` boots here with the private fds and limits in argv."""

import gc
import json
import os
import resource
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ops import Ops


def _set_limits(limits: dict) -> None:
    memory = limits["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    threads = str(limits["threads"])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = threads


def _half_full(folder: Path) -> bool:
    st = os.statvfs(folder)
    return st.f_bavail * 2 < st.f_blocks


def run() -> None:
    """A spawned worker: its pipes and limits in argv."""
    serve_forked(int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]))


def serve_forked(req_fd: int, rep_fd: int, limits: dict) -> None:
    """Be the worker on these pipes, spawned (`run`) or forked from the zygote (worker/zygote.py),
    which has already called `prepare`."""
    if limits.get("uid") is not None:  # first thing: nothing of the submission has run yet
        from .privileges import give_up_root

        give_up_root(limits["uid"])
    scratch = Path.cwd().resolve()
    _set_limits(limits)
    prepare()
    from . import asrun, protocol, warm
    from .ops import Ops

    hello = _start(limits)
    # torch's objects live as long as we do: the collections student code triggers (every few
    # hundred tensors or modules it makes) then skip them (0.17 CPU-s less per grade).
    gc.freeze()
    # Our own modules and torch are loaded: only now may the submission's folder shadow names.
    sys.path.insert(0, str(scratch))
    asrun.install(scratch)  # stand-ins and the rest of the student's run (asrun.py): before arm() reads sys.meta_path
    warm.arm()  # a forked worker's matplotlib, where a fresh import would give the same
    ops = Ops(scratch)
    protocol.write_frame(rep_fd, hello)
    _serve(ops, scratch, limits, req_fd, rep_fd)


_prepared = False


def prepare() -> None:
    """What every worker loads before any student code: our modules, torch, the lazy stand-ins."""
    global _prepared
    if _prepared:
        return
    from . import lazy, leftovers, ops, protocol  # noqa: F401  (ops imports torch, before lazy.install)

    lazy.install()
    lazy.install_dynamo_standin()
    _prepared = True


def _start(limits: dict) -> dict:
    """The layers the worker applies to itself (Landlock, seccomp); the hello the trusted side reads."""
    import torch

    from . import leftovers

    torch.set_num_threads(limits["threads"])
    hello = {
        "ok": True,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "subreaper": leftovers.adopt_orphans(),
    }
    if limits.get("landlock"):
        from .landlock import restrict

        try:
            hello["landlock"] = f"abi {restrict(**limits['landlock'])}"
        except OSError as exc:
            hello["landlock_error"] = str(exc)[:300]
    if limits.get("seccomp"):
        from .seccomp import install

        hello["seccomp"] = install()
    return hello


def _serve(ops: "Ops", scratch: Path, limits: dict, req_fd: int, rep_fd: int) -> None:
    """Answer requests until the trusted side closes the pipe."""
    # Bound here, before any student code runs: nothing it does to sys.modules reaches these names.
    from . import leftovers, protocol
    from .ops import describe_exception

    main_pid = os.getpid()
    while True:
        try:
            request = protocol.read_frame(req_fd)
        except protocol.PeerClosed:
            return
        op = request.pop("op")
        try:
            result = getattr(ops, f"op_{op}")(**request)
            reply = {"ok": True, **result}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: they cost one call only
            reply = {"ok": False, "error": describe_exception(exc, scratch)}
        if os.getpid() != main_pid:  # a fork of the student's came back into our loop: it must not answer
            os._exit(0)
        _after_call(reply, scratch, limits, leftovers)
        try:
            protocol.write_frame(rep_fd, reply)
        except (TypeError, ValueError) as exc:
            protocol.write_frame(rep_fd, {"ok": False, "error": {"type": "ReplyError", "message": str(exc)[:500]}})


def _after_call(reply: dict, scratch: Path, limits: dict, leftovers: ModuleType) -> None:
    """What the call left running is killed now, before the next call could meet it; the trusted
    side restarts us only when some of it would not die or half of a private scratch is full (a
    fresh worker gets an empty one)."""
    left = leftovers.end_all()
    if left:
        reply["left_processes"] = left
    if leftovers.children():
        reply["restart"] = "it left processes running that would not die"
    elif limits.get("scratch_tmpfs") and _half_full(scratch):
        reply["restart"] = "it filled half of the scratch space"
    reply["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # for the benchmark
