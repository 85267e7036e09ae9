"""Processes a request of student code left running. The worker makes itself their subreaper, so a
double-forked daemon comes back to it as a child; after every request it kills them all before
answering, so nothing of one request runs into the next and the worker (with what the check has
built in it) carries on. Only our own /proc entry is readable under Landlock: children are found
through /proc/self/task/*/children."""

import ctypes
import os
import signal
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Become the subreaper of every process started below us."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children() -> list[int]:
    """Our child processes, zombies included."""
    pids: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return pids


def _finished(pid: int) -> bool:
    """Reap `pid` if it has exited (a zombie the student never waited for): True if gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def end_all(within_s: float = 2.0) -> int:
    """Kill every child still running, and those that come back to us as their parents die, in
    rounds, for at most `within_s`; the number killed (finished ones are reaped, not counted)."""
    killed: set[int] = set()
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = [pid for pid in children() if not _finished(pid)]
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.005)
    return len(killed)
