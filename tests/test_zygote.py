"""The warm worker zygote (graders/execution/zygote.py) is only ever a speed-up: killed in the middle
of a `grade` process's run, the grades after it spawn their workers and score the same, and nothing
of it is left behind when the process ends."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import GRADE, REPO, TEST_LIMITS, reference_files, require_bwrap, write_zip

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the zygote serves only where bwrap runs as root")


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _zygotes_of(parent: int) -> dict[int, list[str]]:
    """The zygote processes `parent` started, by pid: their command lines."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            cmd = _cmdline(int(entry.name))
            if ppid == parent and any("gradeworker.zygote" in part for part in cmd):
                found[int(entry.name)] = cmd
    return found


def test_a_killed_zygote_costs_no_point_and_leaves_nothing(tmp_path):
    zips = [write_zip(tmp_path / f"r{i}.zip", reference_files()) for i in range(3)]
    out = tmp_path / "out"
    proc = subprocess.Popen([*GRADE, *map(str, zips), "--out", str(out), "--quiet", *TEST_LIMITS], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not (out / "r0" / "results.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.05)
    zygotes = _zygotes_of(proc.pid)
    for pid in zygotes:
        os.kill(pid, signal.SIGKILL)
    log = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, log[-3000:]
    results = [json.loads((out / f"r{i}" / "results.json").read_text()) for i in range(3)]
    assert len(zygotes) == 1, zygotes  # one per grade process
    assert results[0]["timings"]["worker_forks"] == results[0]["timings"]["worker_starts"] == 1
    assert [r["score"] for r in results] == [30, 30, 30], [r["problems"] for r in results]
    # r1's worker may have been forked before the kill; r2's can only have been spawned.
    assert results[2]["timings"]["worker_forks"] == 0 and results[2]["timings"]["worker_starts"] == 1
    stage = next(part for part in next(iter(zygotes.values())) if "grade-worker-" in part)
    assert not Path(stage).exists()  # its copy of the worker code is removed at exit
    assert not any(stage in " ".join(_cmdline(int(e.name))) for e in os.scandir("/proc") if e.name.isdigit())
