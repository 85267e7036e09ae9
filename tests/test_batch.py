"""`grade batch`'s grade processes (forked from a warm one): what the batch does when one of them
runs past its timeout or refuses its arguments. Whether their grades equal the `grade` command's
is test_html_report.py's batch test (15 submissions, hostile ones among them)."""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import GRADE, REFERENCE, REPO, descends_from, edited, parent_pids, write_zip
from graders.deploy import forked_grades
from graders.deploy.batch import grade_one
from graders.execution.sandbox import capabilities

FORKED = pytest.mark.skipif(not forked_grades.available(), reason="no fork server here, or workers could reach it")


@pytest.fixture
def sandbox_mode(request, monkeypatch):
    """GRADER_SANDBOX for this test and the grades it starts, probed afresh."""
    monkeypatch.setenv("GRADER_SANDBOX", request.param)
    capabilities.cache_clear()
    yield request.param
    capabilities.cache_clear()


@pytest.mark.parametrize("sandbox_mode", ["plain"], indirect=True)
def test_no_fork_server_where_a_worker_could_reach_it(sandbox_mode):
    assert not forked_grades.available()  # plain: a worker of the grader's uid that sees its /tmp


ZYGOTE = b"gradeworker.zygote import serve"
STAGED = b"grade-worker-"  # in the command line of whatever runs a worker's staged code


def _staged(marker: bytes = STAGED) -> dict[int, bytes]:
    """Live processes whose command line names a worker's staged code (client.Worker's stage; those
    staged under a folder: `marker`), with their command lines: workers, zygotes and the zygotes'
    children (workers and their waiters)."""
    found = {}
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and marker in (cmdline := Path(entry.path, "cmdline").read_bytes()):
                found[int(entry.name)] = cmdline
        except OSError:
            pass
    return found


def _split_zygotes(marker: bytes = STAGED) -> tuple[set[int], set[int]]:
    """(workers, zygotes) alive now: a zygote runs no student code (and a fork server's outlives
    its grades); what it forks carries its command line, below it."""
    found, parents = _staged(marker), parent_pids()
    # Only what is still alive at the second scan: a worker that ended between the two has no parent
    # left to tell it from a zygote by (under load, one was taken for a second zygote).
    found = {p: c for p, c in found.items() if p in parents}
    zygotes = {p for p, c in found.items() if ZYGOTE in c and ZYGOTE not in found.get(parents[p], b"")}
    return set(found) - zygotes, zygotes


def _worker_pids() -> set[int]:
    return _split_zygotes()[0]


def _graded_watching_workers(grade, marker: bytes = STAGED) -> tuple[object, set[int], set[int]]:
    """grade()'s outcome, and every worker process and every zygote it started (seen below this
    process while it ran): those of other grades on the machine (another test run, a benchmark)
    are not among them."""
    seen: tuple[set[int], set[int]] = (set(), set())
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            parents = parent_pids()
            for found, now in zip(seen, _split_zygotes(marker)):
                found.update(p for p in now if descends_from(p, {os.getpid()}, parents))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return grade(), *seen
    finally:
        done.set()
        watcher.join()


# auto: a forked grade where the fork server is safe; plain: a fresh grade process and a worker
# without bwrap, in a session of its own, which nothing but the batch's kill of the tree stops.
@pytest.mark.parametrize("sandbox_mode", ["auto", "plain"], indirect=True)
def test_a_grade_past_the_batch_timeout_is_killed_with_its_worker(tmp_path, sandbox_mode):
    # The worker sleeps in the submission's import (the grade would wait 60 s for it) when the
    # batch's timeout ends the grade: only killing the whole tree ends the worker too.
    files = edited("utils.py", "import torch\n", "import time\nimport torch\ntime.sleep(600)\n")
    outcome, workers, _ = _graded_watching_workers(
        lambda: grade_one(write_zip(tmp_path / "sleeper.zip", files), tmp_path / "out",
                          grade_args=["--sandbox", "minimal" if sandbox_mode == "plain" else "full"], timeout=5))
    assert outcome == "grade took longer than 5 s"
    assert not (tmp_path / "out" / "results.json").exists()
    assert workers, "no worker of the grade was seen running: nothing was killed"
    deadline = time.monotonic() + 10
    while workers & _worker_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not workers & _worker_pids()


@FORKED
def test_a_refused_grade_says_why_in_its_log(tmp_path):
    log = tmp_path / "grade.log"
    assert forked_grades.grade_forked([str(REFERENCE), "--assignment", "a9", "--out", str(tmp_path)], log, 60) == 2
    assert "unknown assignment 'a9'" in log.read_text()
    outcome = grade_one(tmp_path / "missing.zip", tmp_path / "o", grade_args=["--limit", "nope=1"], timeout=60)
    assert outcome == "grade exited 2 without a report"
    assert "nope" in (tmp_path / "o" / "grade.log").read_text()


def _a2s1_reference_zip(path: Path) -> Path:
    """A2S1's reference notebook as a submission: the quickest whole grade (12/12)."""
    return write_zip(path, {"A2S1.py": (REPO / "assignment" / "a2s1" / "reference" / "A2S1.py").read_text()})


@FORKED
def test_a_batchs_grades_share_one_zygote_which_leaves_with_the_batch(tmp_path):
    """The fork server starts the zygote (deploy/shared_zygote.py): every grade forks its workers
    from that one, and it is gone, its staged code too, once the batch is."""
    # A short TMPDIR of its own (the fork server's socket path must fit; a test's tmp_path may not).
    folder, tmp = tmp_path / "class", Path(tempfile.mkdtemp(prefix="zs-"))
    folder.mkdir()
    for name in ("ada", "bo", "cy"):
        _a2s1_reference_zip(folder / f"{name}.zip")
    command = [*GRADE, "batch", str(folder), "--assignment", "a2s1", "--out", str(tmp_path / "out")]
    p, workers, zygotes = _graded_watching_workers(lambda: subprocess.run(
        command, cwd=REPO, env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=300), marker=str(tmp).encode())
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    for name in ("ada", "bo", "cy"):
        timings = json.loads((tmp_path / "out" / name / "results.json").read_text())["timings"]
        assert timings["worker_forks"] >= 1, name  # forked from a zygote, not spawned
    assert len(zygotes) == 1 and workers, (zygotes, workers)
    assert not (zygotes | workers) & set(_staged())
    assert not list(tmp.glob("grade-worker-*"))
    shutil.rmtree(tmp)


@FORKED
def test_a_tmpdir_too_long_for_the_fork_servers_socket_gets_fresh_grade_processes(tmp_path, monkeypatch):
    """A TMPDIR where the fork server's socket path would not fit (AF_UNIX paths are short): every
    grade would fail to start; they run in fresh processes instead."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() caches its answer
    assert not forked_grades.available()
    source = _a2s1_reference_zip(tmp_path / "ada.zip")
    assert grade_one(source, tmp_path / "out", grade_args=["--assignment", "a2s1"], timeout=120) == "graded"
    assert json.loads((tmp_path / "out" / "results.json").read_text())["score"] == 12
