"""Fail closed: where the machine cannot give the sandbox level, the real `grade`, `grade batch` and
run_autograder refuse before anything runs (exit status 3, no results); with the TA's opt-in they
grade and every view says which layers were missing. bwrap is hidden from PATH, as on a machine
without bubblewrap."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GRADE, REPO, TEST_LIMITS, reference_files, require_bwrap, write_zip



@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()  # to hide it


def _no_bwrap_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine without bubblewrap: a PATH with nothing on it, and a TMPDIR of
    the test's own (to see what a grade leaves there)."""
    empty, tmp = tmp_path / "empty-path", tmp_path / "tmpdir"
    empty.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    return {**env, "PATH": str(empty), "TMPDIR": str(tmp)}


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def reference_zip(tmp_path_factory) -> Path:
    return write_zip(tmp_path_factory.mktemp("zips") / "reference.zip", reference_files())


def test_grade_refuses_without_bwrap_and_names_it(tmp_path, reference_zip):
    env = _no_bwrap_env(tmp_path)
    run = _run([*GRADE, str(reference_zip), "--out", str(tmp_path / "out"), *TEST_LIMITS], env)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "refusing to grade" in run.stderr and "bubblewrap is not installed" in run.stderr, run.stderr
    assert "sudo apt-get install -y bubblewrap" in run.stderr and "--sandbox" in run.stderr
    assert "Nothing was graded" in run.stderr
    assert not (tmp_path / "out").exists()  # no results.json, no report: nothing that reads as a grade
    assert not os.listdir(env["TMPDIR"])


def test_grade_with_the_opt_in_grades_and_says_so_everywhere(tmp_path, reference_zip):
    env = _no_bwrap_env(tmp_path)
    out = tmp_path / "out"
    gradescope = tmp_path / "gradescope.json"
    run = _run([*GRADE, str(reference_zip), "--out", str(out), "--sandbox", "minimal", "--gradescope",
                str(gradescope), *TEST_LIMITS], env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "WARNING: student code will run in a weaker sandbox: level minimal" in run.stderr
    assert "WARNING: student code ran in a weaker sandbox (level minimal)" in run.stdout  # after the table
    results = json.loads((out / "results.json").read_text())
    assert results["score"] == 30 and results["sandbox_level"] == "minimal"
    assert "bwrap" not in results["sandbox"].split("+")
    assert any(m.startswith("bwrap: bubblewrap is not installed") for m in results["sandbox_missing"])
    html = (out / "report.html").read_text()
    assert 'id="sandbox-warning"' in html and "bubblewrap is not installed" in html
    assert "weaker sandbox" in json.loads(gradescope.read_text())["output"]


def test_the_full_sandbox_shows_no_warning(tmp_path, reference_zip):
    out = tmp_path / "out"
    run = _run([*GRADE, str(reference_zip), "--out", str(out), *TEST_LIMITS], {**os.environ})
    assert run.returncode == 0, run.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["sandbox_level"] == "full" and results["sandbox_missing"] == [], results["sandbox_missing"]
    assert "bwrap" in results["sandbox"] and "WARNING" not in run.stdout + run.stderr
    assert 'id="sandbox-warning"' not in (out / "report.html").read_text()


def test_batch_refuses_before_grading_anything(tmp_path, reference_zip):
    env = _no_bwrap_env(tmp_path)
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copy(reference_zip, folder / "ann.zip")
    run = _run([*GRADE, "batch", str(folder), "--out", str(tmp_path / "out"), *TEST_LIMITS], env)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "bubblewrap is not installed" in run.stderr
    assert not (tmp_path / "out").exists()


def test_batch_with_the_opt_in_warns_in_the_summary_and_leaves_nothing_in_tmpdir(tmp_path, reference_zip):
    env = _no_bwrap_env(tmp_path)
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copy(reference_zip, folder / "ann.zip")
    out = tmp_path / "out"
    run = _run([*GRADE, "batch", str(folder), "--out", str(out), "--sandbox", "minimal", *TEST_LIMITS], env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "weaker sandbox" in run.stderr
    assert json.loads((out / "ann" / "results.json").read_text())["score"] == 30
    summary = (out / "summary.html").read_text()
    assert 'id="sandbox-warning"' in summary and "1 submission: student code ran in a weaker sandbox" in summary
    assert not os.listdir(env["TMPDIR"])


def test_a_batch_in_the_full_sandbox_leaves_nothing_in_tmpdir(tmp_path, reference_zip):
    """The fork server's pymp-* folder and the sandbox uids' locks included (they used to stay)."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("ann", "bob"):
        shutil.copy(reference_zip, folder / f"{name}.zip")
    env = {**os.environ, "TMPDIR": str(tmp)}
    run = _run([*GRADE, "batch", str(folder), "--out", str(tmp_path / "out"), "--jobs", "2", *TEST_LIMITS], env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert all(json.loads((tmp_path / "out" / s / "results.json").read_text())["score"] == 30 for s in ("ann", "bob"))
    assert not os.listdir(tmp), os.listdir(tmp)


def test_run_autograder_refuses_with_no_results_file(tmp_path, reference_zip):
    """In a container that cannot give the bundle's level: no results.json at all (Gradescope then
    counts no score), exit status 3, never a score-0 file."""
    env = _no_bwrap_env(tmp_path)
    root = tmp_path / "autograder"
    shutil.unpack_archive(reference_zip, root / "submission")
    argv = [sys.executable, "-m", "graders.deploy.autograder", "--root", str(root), "--sandbox", "full",
            "--", *TEST_LIMITS]
    run = _run(argv, env)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "bubblewrap is not installed" in run.stderr
    assert not (root / "results" / "results.json").exists()
