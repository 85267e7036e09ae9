"""`grade` of one submission against the course-style snapshot suite on the same files, side by side.

    .venv/bin/python bench/vs_snapshot_suite.py [--runs 5] [--submission FOLDER] [--limit NAME=VALUE ...]

The snapshot suite is the student template's six public snapshot tests (tests/test_model.py, its
conftest and data/, generated from reference/), copied next to the submission's files and run by
a fresh `python -m pytest` process, as a student would run them. `grade` is a fresh process on a
zip of the same files, sandbox on. Runs alternate (suite, grade, suite, ...) so that both see the
same machine load. Prints medians, the ratio grade/suite, how many student calls each made, and
the grade's own split (results.json's timings).
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, zip_folder
TEMPLATE_TESTS = REPO / "student_template" / "tests"
SUITE_CALLS = 6  # one call of student code per test


def snapshot_suite(files: Path, into: Path) -> Path:
    """The submission's files plus the six snapshot tests, as a student's working copy."""
    into.mkdir(parents=True)
    for f in files.glob("*.py"):
        shutil.copy(f, into / f.name)
    tests = into / "tests"
    tests.mkdir()
    for name in ("conftest.py", "test_model.py"):
        shutil.copy(TEMPLATE_TESTS / name, tests / name)
    shutil.copytree(TEMPLATE_TESTS / "data", tests / "data")
    (into / "pytest.ini").write_text("[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n")
    return into


def timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return time.monotonic() - start, p


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--submission", type=Path, default=REPO / "reference" / "a3",
                        help="a folder with model_solution.py, train.py, utils.py (default: the reference)")
    parser.add_argument("--limit", action="append", default=[], help="passed to grade, e.g. workers=1")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-vs-"))
    suite = snapshot_suite(args.submission, tmp / "suite")
    zip_path = zip_folder(args.submission, tmp / "submission.zip")
    limits = [f"--limit={x}" for x in args.limit]
    suite_s, grade_s, splits, calls = [], [], {}, []
    for i in range(args.runs):
        seconds, p = timed([sys.executable, "-m", "pytest", "-q", "tests/test_model.py"], suite)
        if p.returncode != 0 or "6 passed" not in p.stdout:
            sys.exit(f"the snapshot suite did not pass:\n{p.stdout[-3000:]}{p.stderr[-2000:]}")
        suite_s.append(seconds)
        out = tmp / f"out{i}"
        seconds, p = timed([sys.executable, "-m", "graders.cli", str(zip_path), "--out", str(out), "--quiet",
                            *limits], REPO)
        if p.returncode != 0:
            sys.exit(f"grade failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        grade_s.append(seconds)
        results = json.loads((out / "results.json").read_text())
        for key, value in results["timings"].items():
            splits.setdefault(key, []).append(value)
        splits.setdefault("start-up and report (outside total_s)", []).append(seconds - results["timings"]["total_s"])
        calls.append(results["timings"].get("student_calls", 0))
    med = statistics.median
    print(f"{args.submission.name}: median of {args.runs} alternating runs, seconds (min-max)")
    print(f"  snapshot suite (6 tests)  {med(suite_s):7.2f}   ({min(suite_s):.2f}-{max(suite_s):.2f})")
    print(f"  grade (score {results['score']:g}/{results['max_score']:g})     {med(grade_s):7.2f}   "
          f"({min(grade_s):.2f}-{max(grade_s):.2f})   sandbox {results['sandbox']}")
    print(f"  ratio grade/suite         {med(grade_s) / med(suite_s):7.2f}   (target <= 1.0)")
    print(f"  student calls             suite {SUITE_CALLS}, grade {med(calls):g}   "
          f"(x{med(calls) / SUITE_CALLS:.0f}; target >= 20)")
    print("grade's split (results.json timings, medians):")
    for key, values in splits.items():
        print(f"  {key:<40} {med(values):7.3f}")
    print(f"  {'of which report.html (warm, in process)':<40} {report_seconds(out / 'results.json'):7.3f}")


def report_seconds(results_json: Path, runs: int = 3) -> float:
    """The HTML report's share of the time after total_s: written again from results.json, its
    templates already loaded, as the grade has them."""
    from graders.reports.html import write_report
    from graders.scoring.results import Results

    results = Results.model_validate_json(results_json.read_bytes())
    seconds = []
    for i in range(runs + 1):
        start = time.monotonic()
        write_report(results, results_json.parent, results_json.parent / f"again{i}.html")
        seconds.append(time.monotonic() - start)
    return statistics.median(seconds[1:])  # the first one loads the templates


if __name__ == "__main__":
    main()
