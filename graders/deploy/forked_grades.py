"""`grade batch`'s grade processes, forked from one that has already imported what every grade
imports: pytest, Hypothesis, torch and the grader itself.

Each submission still gets a trusted process of its own, a fresh copy of that warm one, so
nothing one grade leaves in memory reaches the next; it only skips ~2 s of imports (CPU that
`--jobs 2` otherwise spends on every submission). Student code is never forked from here: each
grade spawns its own sandboxed worker, exactly as a `grade` command does.
"""

import ctypes
import multiprocessing
import multiprocessing.util
import os
import shutil
import signal
import tempfile
import traceback
from pathlib import Path

from graders.execution.quick_exit import exit_now
from graders.execution.sandbox import capabilities, kill_tree

# What a grade imports on its way (commands.grade, then runner.grade's own list); the fork server
# imports them once, and starts the worker zygote its grades share (the last one).
PRELOAD = (
    "graders.commands.grade",
    "graders.runner",
    "graders.checks.session",
    "graders.deploy.shared_zygote",
)


def available() -> bool:
    """Where student code cannot reach the fork server. It listens on a Unix socket in a 0700
    folder under the grader's TMPDIR, and whoever connects has code run in a trusted process; a
    worker in bwrap has a /tmp of its own, one under another uid cannot enter the folder. A worker
    of the grader's own uid that sees its /tmp (no bwrap, no uid drop) gets fresh processes instead."""
    caps = capabilities()
    return (
        "forkserver" in multiprocessing.get_all_start_methods()
        and (caps.bwrap is not None or caps.uid)
        and _socket_path_fits()
    )


# The fork server's socket: TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX (multiprocessing's names).
_LISTENER = os.path.join("pymp-12345678", "listener-12345678")
_SUN_PATH_MAX = 107  # bytes of a Unix socket's path, its NUL aside


def _socket_path_fits() -> bool:
    """Whether the fork server's socket path fits under TMPDIR: a longer one makes every start of
    it fail ("AF_UNIX path too long"); the grades then run in fresh processes."""
    return len(os.fsencode(os.path.join(tempfile.gettempdir(), _LISTENER))) <= _SUN_PATH_MAX


_made: dict[str, int] = {}  # the fork server's folder (TMPDIR/pymp-*), by the pid that made it


def _context() -> multiprocessing.context.ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([*PRELOAD, __name__])  # __name__: _child's module
    folder = multiprocessing.util.get_temp_dir()  # made now, by this process, if not yet
    _made.setdefault(folder, os.getpid())
    return ctx


def cleanup() -> None:
    """Remove the fork server's folder, in the process that made it: multiprocessing removes it
    at interpreter exit, which a grade process skips (quick_exit.py); a forked grade keeps it."""
    for folder, pid in list(_made.items()):
        if pid == os.getpid():
            shutil.rmtree(folder, ignore_errors=True)
            del _made[folder]


_PR_SET_PDEATHSIG = 1


def _child(argv: list[str], log: str) -> None:
    """In the forked process: `grade ARGV` with stdout and stderr into `log`, then out at once
    without finalising the interpreter (as the `grade` command does)."""
    # The fork server exits when the process that started it dies (a batch, a Dask worker killed
    # mid-grade): the grade goes with it, and bwrap's --die-with-parent ends its sandbox.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    from graders.commands.grade import main

    status = 1
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's refusal, as the command would exit
        status = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        exit_now(status)


def grade_forked(argv: list[str], log: Path, timeout: float) -> int | None:
    """Run `grade ARGV` in a forked copy of the warm process; its exit status (negative: killed by
    that signal), or None when it ran past `timeout` s and was killed."""
    process = _context().Process(target=_child, args=(argv, str(log)), daemon=False)
    process.start()
    process.join(timeout)
    if process.is_alive() and process.pid is not None:  # started: it has a pid
        kill_tree(process.pid)  # its workers too: without bwrap they would not die with it
        process.join()
        return None
    return process.exitcode
