"""The task of `grade batch --engine dask`, run on a Dask worker's machine: one submission, sent as
bytes, graded by the same `grade` command single mode runs (same intake, worker, sandbox, limits,
spec), and sent back as plain data: the exit status, the log's tail, results.json and the plot.

Nothing here unpickles or imports anything of the student's: the Dask worker handles only the bytes
the TA's machine sent and the files the grade wrote, and the TA's machine validates what comes back
(deploy/accept.py). The worker's machine needs this repository installed (`make install`)."""

import ctypes
import io
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from graders.deploy import forked_grades
from graders.deploy.accept import MAX_RESULTS_BYTES
from graders.execution.sandbox import kill_tree
from graders.intake.png import MAX_PLOT_BYTES
from graders.intake.submission import MAX_ZIP_BYTES

MAX_LOG_BYTES = 200_000
_PR_SET_PDEATHSIG = 1
# Loaded before any fork: the child between fork and exec must not load a library (another thread
# of the Dask worker may hold the loader's lock at the fork).
_LIBC = ctypes.CDLL(None, use_errno=True)


def grade_payload(name: str, data: bytes, is_folder: bool, grade_args: list[str], timeout: float) -> dict[str, Any]:
    """Grade the submission `name` (a zip's bytes; a folder's, zipped by the TA's machine) as
    `grade NAME --out OUT --quiet GRADE_ARGS` does; {"returncode": int or None past `timeout`,
    "log": bytes, "files": {file name: bytes}} of what the grade wrote."""
    with tempfile.TemporaryDirectory(prefix="dask-grade-") as tmp:
        source = _unpack(Path(tmp) / "submission", name, data, is_folder)
        out, log = Path(tmp) / "out", Path(tmp) / "grade.log"
        returncode = _run_grade([str(source), "--out", str(out), "--quiet", *grade_args], log, timeout)
        return {"returncode": returncode, "log": _tail(log), "files": _written(out)}


def _unpack(folder: Path, name: str, data: bytes, is_folder: bool) -> Path:
    """The submission under its own name (results.json names it, and a folder's sha256 is over its
    files): the zip as sent, or the folder rebuilt from the zip the TA's machine made of it."""
    if not name or name in (".", "..") or "/" in name or len(data) > MAX_ZIP_BYTES:
        raise ValueError(f"refused submission {name!r} ({len(data)} bytes)")
    folder.mkdir()
    target = folder / name
    if not is_folder:
        target.write_bytes(data)
        return target
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        if sum(i.file_size for i in z.infolist()) > MAX_ZIP_BYTES:
            raise ValueError(f"{name}: over {MAX_ZIP_BYTES} bytes unpacked")
        z.extractall(target)  # extractall drops absolute paths and '..' parts
    target.mkdir(exist_ok=True)  # a folder with no files at all
    return target


def _die_with_worker() -> None:
    """In the grade process before exec: SIGKILL when its parent dies, so that a Dask worker that
    is killed mid-grade takes its grade along (bwrap's --die-with-parent then ends the sandbox)."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _run_grade(argv: list[str], log: Path, timeout: float) -> int | None:
    """`grade ARGV`, output into `log`; its exit status, None past `timeout` (the whole tree killed:
    its workers too). Forked from a warm process as `grade batch` does (~2 s of imports less a
    grade) where that is safe and this worker may have children: a daemonic one (Dask's default
    unless DASK_DISTRIBUTED__WORKER__DAEMON=False) may not, and gets a fresh process instead."""
    if not multiprocessing.current_process().daemon and forked_grades.available():
        return forked_grades.grade_forked(argv, log, timeout)
    return _grade_in_subprocess(argv, log, timeout)


def _grade_in_subprocess(argv: list[str], log: Path, timeout: float) -> int | None:
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "graders.cli", *argv],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the worker's signals (a Ctrl-C of `dask worker`) are not the grade's
            preexec_fn=_die_with_worker,  # only a prctl: libc is loaded beforehand
        )
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()
            return None


def _tail(path: Path) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - MAX_LOG_BYTES))
        return fh.read()


def _written(out: Path) -> dict[str, bytes]:
    """results.json and PNG files the grade wrote, plain files under their caps (report.html is
    rendered again on the TA's machine from the validated results)."""
    files: dict[str, bytes] = {}
    if not out.is_dir():
        return files
    for entry in os.scandir(out):
        cap = MAX_RESULTS_BYTES if entry.name == "results.json" else MAX_PLOT_BYTES
        wanted = entry.name == "results.json" or entry.name.endswith(".png")
        if wanted and entry.is_file(follow_symlinks=False) and entry.stat().st_size <= cap:
            files[entry.name] = Path(entry.path).read_bytes()
    return files
