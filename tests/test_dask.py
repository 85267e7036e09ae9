"""`grade batch --engine dask` with real processes: an embedded LocalCluster grades like single mode;
a running cluster (`dask scheduler` + `dask worker` commands) reached with --scheduler does too,
even when the worker grading a submission is SIGKILLed mid-grade; a submission whose worker dies
more often than --retries allows ends as its own 'could not run grade' report. Slurm cannot run
here: the job script SLURMCluster would submit is rendered and checked."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from conftest import GRADE, REPO, TEST_LIMITS, descends_from, edited, parent_pids, write_zip
from graders.deploy.dask_engine import slurm_cluster, slurm_kwargs

DASK = Path(sys.executable).parent / "dask"
# Planted bugs, two hostile ones (a segfault and an exit in generate), a refused file; and a
# folder submission (a Gradescope export's layout).
ZIPPED = ("reference", "dropout", "device_unsafe", "segfault_in_generate", "syntax_error")
FOLDER = "raise_in_attention"
# Sleeps in the submission's import: long enough to be killed mid-grade.
SLOW = edited("utils.py", "import torch\n", "import time\nimport torch\ntime.sleep(3)\n")


def _same(results: dict) -> list:
    """What must not depend on how a submission was graded: scores, checks and their messages."""
    return [(i["id"], i["score"], i["status"], [(c["name"], c["status"], c["message"]) for c in i["checks"]])
            for i in results["items"]] + [results["score"], results["problems"]]


def _batch(folder: Path, out: Path, *options: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*GRADE, "batch", str(folder), "--out", str(out), "--engine", "dask", *options, *TEST_LIMITS],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _stored(out: Path, student: str) -> dict:
    return json.loads((out / student / "results.json").read_text())


@pytest.fixture(scope="module")
def local_batch(scenario_zips, tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask-class")
    for name in ZIPPED:
        shutil.copy(scenario_zips[name], folder / f"{name}.zip")
    with zipfile.ZipFile(scenario_zips[FOLDER]) as z:
        z.extractall(folder / FOLDER)
    out = tmp_path_factory.mktemp("dask-out") / "out"
    p = _batch(folder, out, "--jobs", "2")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return {"folder": folder, "out": out, "log": p.stdout + p.stderr}


def test_a_local_cluster_grades_like_single_mode(local_batch, graded):
    out = local_batch["out"]
    assert "dask: LocalCluster, dashboard http://" in local_batch["log"]
    assert sorted(d.name for d in out.iterdir() if d.is_dir()) == sorted([*ZIPPED, FOLDER])
    for student in (*ZIPPED, FOLDER):
        stored = _stored(out, student)
        assert _same(stored) == _same(graded[student]), student
        assert (out / student / "report.html").read_text().startswith("<!DOCTYPE html>")
    for student in ZIPPED:  # the same bytes graded: the same name and sha256 in the report
        assert _stored(out, student)["submission"] == graded[student]["submission"], student
    assert _stored(out, FOLDER)["submission"]["name"] == FOLDER
    assert (out / "reference" / _stored(out, "reference")["training"]["plot"]).read_bytes().startswith(b"\x89PNG")
    assert len((out / "grades.csv").read_text().splitlines()) == 1 + len(ZIPPED) + 1
    assert "Graded by Dask (LocalCluster), 2 workers" in (out / "summary.html").read_text()


def test_a_rerun_skips_the_graded_without_starting_a_cluster(local_batch):
    out = local_batch["out"]
    p = _batch(local_batch["folder"], out, "--jobs", "2", timeout=120)
    assert p.returncode == 0 and f"({len(ZIPPED) + 1} already graded)" in p.stdout, p.stdout + p.stderr[-2000:]
    assert "dask:" not in p.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _cluster(logs: Path, workers: int, env: dict[str, str]):
    """A scheduler and `workers` worker processes (under their nannies, which restart a killed one),
    started as a TA would start them on a cluster, each a separate process."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    started = []
    for name, cmd in (("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1]]),
                      ("worker", ["worker", address, "--nworkers", str(workers), "--nthreads", "1"])):
        with open(logs / f"{name}.log", "wb") as log:
            # Workers that may have children: each grade forked from a warm process, as the README says.
            started.append(subprocess.Popen([str(DASK), *cmd, "--dashboard-address", "127.0.0.1:0"], cwd=REPO,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            env={**env, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}))
    client = Client(address, timeout=60)
    try:
        client.wait_for_workers(workers, timeout=120)
        yield {"address": address, "client": client, "logs": logs}
    finally:
        client.close()
        for proc in reversed(started):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def running_cluster(tmp_path_factory):
    with _cluster(tmp_path_factory.mktemp("dask-logs"), 2, dict(os.environ)) as cluster:
        yield cluster


def test_a_worker_without_the_sandbox_stops_the_batch_before_any_task(scenario_zips, tmp_path):
    """A Dask worker whose machine has no bubblewrap: the batch asks every worker first, refuses
    (exit status 3), names the worker and what it lacks, and writes no grade at all."""
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copy(scenario_zips["reference"], folder / "ann.zip")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    (tmp_path / "logs").mkdir()
    with _cluster(tmp_path / "logs", 1, {**os.environ, "PATH": str(empty)}) as cluster:
        p = _batch(folder, tmp_path / "out", "--scheduler", cluster["address"])
    assert p.returncode == 3, p.stdout + p.stderr
    assert "the Dask worker tcp://127.0.0.1:" in p.stderr and "bubblewrap is not installed" in p.stderr, p.stderr
    assert not (tmp_path / "out" / "ann").exists() and not (tmp_path / "out" / "grades.csv").exists()


def _grade_processes(name: str) -> set[int]:
    """Live processes of a task's grade of `name` (forked or not, so not found by their arguments):
    their output goes to the grade.log beside the task's submission/NAME (deploy/dask_task.py)."""
    found = set()
    for entry in os.scandir("/proc"):
        try:
            log = Path(os.readlink(Path(entry.path, "fd", "1"))) if entry.name.isdigit() else None
        except OSError:
            continue
        if log is not None and log.name == "grade.log" and (log.parent / "submission" / name).exists():
            found.add(int(entry.name))
    return found


def _kill_the_worker_grading(name: str, workers: set[int], killed: list) -> None:
    """Once `name`'s grade has run a second under one of `workers`: SIGKILL that worker."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        parents = parent_pids()
        mine = {w: g for g in _grade_processes(name) for w in workers if descends_from(g, {w}, parents)}
        if mine:
            time.sleep(1)  # inside the submission's import (it sleeps 3 s there)
            worker, grade = next(iter(mine.items()))
            os.kill(worker, signal.SIGKILL)
            killed.append((worker, grade))
            return
        time.sleep(0.05)


def _batch_killing(running_cluster, folder: Path, out: Path, *options: str) -> tuple[subprocess.CompletedProcess, list]:
    workers = set(running_cluster["client"].run(os.getpid).values())
    killed: list = []
    killer = threading.Thread(target=_kill_the_worker_grading, args=("slow.zip", workers, killed), daemon=True)
    killer.start()
    p = _batch(folder, out, "--scheduler", running_cluster["address"], *options)
    killer.join()
    return p, killed


def test_a_running_cluster_grades_like_single_mode_though_a_worker_is_killed(running_cluster, scenario_zips, graded,
                                                                              tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    write_zip(folder / "slow.zip", SLOW)
    shutil.copy(scenario_zips["syntax_error"], folder / "syntax_error.zip")
    p, killed = _batch_killing(running_cluster, folder, tmp_path / "out")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert killed, "the slow submission's grade was never seen on a worker"
    assert f"dask: scheduler {running_cluster['address']}" in p.stdout
    out = tmp_path / "out"
    assert _same(_stored(out, "syntax_error")) == _same(graded["syntax_error"])
    assert _same(_stored(out, "slow")) == _same(graded["reference"])  # re-run on another worker, fully graded
    time.sleep(1)
    assert not _grade_processes("slow.zip")  # the killed worker's grade died with it (its folder is left)
    assert "0 failed" in p.stdout


def test_a_submission_whose_worker_dies_more_than_retries_allow_gets_its_own_report(running_cluster, scenario_zips,
                                                                                   graded, tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    write_zip(folder / "slow.zip", SLOW)
    shutil.copy(scenario_zips["syntax_error"], folder / "syntax_error.zip")
    p, killed = _batch_killing(running_cluster, folder, tmp_path / "out", "--retries", "0")
    assert p.returncode == 0 and killed, p.stdout[-2000:] + p.stderr[-3000:]
    slow = _stored(tmp_path / "out", "slow")
    assert slow["score"] == 0 and "its Dask worker died every time (1 tries)" in slow["grader_error"], slow
    assert "could not run grade" in (tmp_path / "out" / "slow" / "report.html").read_text()
    assert _same(_stored(tmp_path / "out", "syntax_error")) == _same(graded["syntax_error"])  # not a bystander
    assert "failed: slow: could not run grade: its Dask worker died every time" in p.stderr


def _payload_in_daemon(zip_path: str, target: str) -> None:
    """In a daemonic process, as a Dask worker is by default: a task's grade, its results.json kept."""
    from graders.deploy.dask_task import grade_payload

    payload = grade_payload(Path(zip_path).name, Path(zip_path).read_bytes(), False, TEST_LIMITS, 120)
    Path(target).write_bytes(payload["files"]["results.json"])


def test_a_daemonic_worker_grades_in_a_fresh_grade_process(scenario_zips, graded, tmp_path):
    import multiprocessing

    # A daemonic process may not have children of multiprocessing's: no fork server, a fresh `grade`.
    target = tmp_path / "results.json"
    daemon = multiprocessing.get_context("spawn").Process(
        target=_payload_in_daemon, args=(str(scenario_zips["syntax_error"]), str(target)), daemon=True)
    daemon.start()
    daemon.join(180)
    assert daemon.exitcode == 0 and target.exists()
    assert _same(json.loads(target.read_text())) == _same(graded["syntax_error"])


SLURM_OPTS = ["queue=gpu-short", "account=cs224n", "cores=8", "memory=32GB", "walltime=02:00:00",
              "python=/home/ta/grader/.venv/bin/python", "job_script_prologue=cd /home/ta/grader",
              "job_script_prologue=export GRADER_SANDBOX=auto", "job_extra_directives=--constraint=cpu",
              "local_directory=/tmp/$USER-dask", "interface=lo"]


def test_the_slurm_job_script_holds_what_the_options_say():
    cluster = slurm_cluster(SLURM_OPTS)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    lines = script.splitlines()
    for directive in ("#SBATCH -p gpu-short", "#SBATCH -A cs224n", "#SBATCH -n 1", "#SBATCH --cpus-per-task=8",
                      "#SBATCH -t 02:00:00", "#SBATCH --constraint=cpu"):
        assert directive in lines, script
    assert any(line.startswith("#SBATCH --mem=") for line in lines), script
    assert (lines.index("export DASK_DISTRIBUTED__WORKER__DAEMON=False") < lines.index("cd /home/ta/grader")
            < lines.index("export GRADER_SANDBOX=auto"))
    command = lines[-1]
    assert command.startswith("/home/ta/grader/.venv/bin/python -m distributed.cli.dask_worker tcp://"), command
    # One worker per core, one thread each: a grade at a time per core.
    assert "--nworkers 8" in command and "--nthreads 1" in command and "--local-directory /tmp/$USER-dask" in command


def test_bad_slurm_options_are_refused_before_anything_starts(tmp_path):
    assert slurm_kwargs(["cores=4", "memory=8GB"])["processes"] == 4
    for opts, why in ((["cores=4"], "memory"), (["cores=four", "memory=8GB"], "not a number"),
                      (["cores=4", "memory=8GB", "colour=blue"], "KEY one of")):
        with pytest.raises(ValueError, match=why):
            slurm_kwargs(opts)
    (tmp_path / "class").mkdir()
    p = subprocess.run([*GRADE, "batch", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--engine", "dask",
                        "--cluster", "slurm", "--cluster-opt", "cores=4"], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "--cluster-opt memory" in p.stderr, p.stderr
    p = subprocess.run([*GRADE, "batch", str(tmp_path / "class"), "--out", str(tmp_path / "out"),
                        "--scheduler", "tcp://127.0.0.1:1"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "go with --engine dask" in p.stderr, p.stderr
