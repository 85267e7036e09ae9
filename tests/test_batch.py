"""`grade batch`'s grade processes (forked from a warm one): what the batch does when one of them
runs past its timeout or refuses its arguments. Whether their grades equal the `grade` command's
is test_html_report.py's batch test (15 submissions, hostile ones among them)."""

import os
import threading
import time
from pathlib import Path

import pytest

from conftest import REFERENCE, descends_from, edited, parent_pids, write_zip
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


def _worker_pids() -> set[int]:
    """Live processes whose command line names a worker's staged code (client.Worker's stage)."""
    pids = set()
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and b"grade-worker-" in Path(entry.path, "cmdline").read_bytes():
                pids.add(int(entry.name))
        except OSError:
            pass
    return pids


def _graded_watching_workers(grade) -> tuple[str, set[int]]:
    """grade()'s outcome, and every worker process it started (seen below this process while it
    ran): workers of other grades on the machine (another test run, a benchmark) are not among them."""
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            parents = parent_pids()
            seen.update(p for p in _worker_pids() if descends_from(p, {os.getpid()}, parents))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return grade(), seen
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
    outcome, workers = _graded_watching_workers(
        lambda: grade_one(write_zip(tmp_path / "sleeper.zip", files), tmp_path / "out", grade_args=[], timeout=5))
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
