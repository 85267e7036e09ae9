"""Worker entry point: `python -I -c` boots here with the private fds and limits in argv."""

import json
import os
import resource
import sys
from pathlib import Path


def _set_limits(limits: dict) -> None:
    memory = limits["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    threads = str(limits["threads"])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = threads


def run() -> None:
    req_fd, rep_fd = int(sys.argv[1]), int(sys.argv[2])
    limits = json.loads(sys.argv[3])
    scratch = Path.cwd().resolve()
    _set_limits(limits)

    from . import lazy, protocol
    from .ops import Ops, describe_exception

    lazy.install()
    import torch

    torch.set_num_threads(limits["threads"])
    # Our own modules and torch are loaded: only now may the submission's folder shadow names.
    sys.path.insert(0, str(scratch))
    ops = Ops(scratch)
    protocol.write_frame(rep_fd, {"ok": True, "torch": torch.__version__, "python": sys.version.split()[0]})
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
        try:
            protocol.write_frame(rep_fd, reply)
        except (TypeError, ValueError) as exc:
            protocol.write_frame(rep_fd, {"ok": False, "error": {"type": "ReplyError", "message": str(exc)[:500]}})
