"""What the Gradescope bundle's `run_autograder` runs: one grade of ROOT/submission/, Gradescope's
ROOT/results/results.json always written inside the spec's time budget.

Two walls, one inside the other: the grade itself gets a checks' deadline of
`time_budget_s - wrap_up_s` (the runner's `total_timeout_s`: unstarted checks are skipped, a
request still running is cut, each says the budget ran out, finished items keep their points); and
this process kills the grade at the budget, or notices that it died, and then writes a score-0 file
that says why. Gradescope's own timeout would leave the student nothing at all.
"""

import time

STARTED = time.monotonic()  # before the imports below: the platform's clock is already running

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema

from graders.execution.policy import REFUSED_STATUS
from graders.execution.sandbox import become_reaper, kill_until_gone, orphans
from graders.reports.gradescope import schema, write_gradescope
from graders.scoring.fallback import fallback_results
from graders.spec import Spec, SpecError, load_spec, spec_path

FALLBACK_S = 3.0  # of the budget, kept for the score-0 file when the grade has to be killed


def _write_atomic(text: str, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _fail(root: Path, spec: Spec, reason: str) -> None:
    """Gradescope's file with score 0 and `reason`, for whatever kept the grade from writing one."""
    results = fallback_results(root / "submission", spec, reason)
    tmp = write_gradescope(results, root / "results" / "results.json.tmp", spec.stdout_visibility)
    tmp.replace(root / "results" / "results.json")


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    kill_until_gone(orphans)


def run(root: Path, assignment: str, budget: float | None, wrap_up: float | None, grade_args: list[str]) -> int:
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").unlink(missing_ok=True)
    try:
        spec = load_spec(spec_path(assignment))
    except SpecError as e:
        print(f"run_autograder: {e}", file=sys.stderr)
        return 2
    budget = spec.gradescope.time_budget_s if budget is None else budget
    wrap_up = spec.gradescope.wrap_up_s if wrap_up is None else wrap_up
    # Counted from grade()'s own start, a little later than ours: what the wait for it leaves of wrap_up.
    checks_s = min(spec.limits.total_timeout_s, budget - wrap_up - (time.monotonic() - STARTED))
    if checks_s <= 0:
        _fail(root, spec, f"the time budget of {budget:g} s leaves no time to grade after {wrap_up:g} s of wrap-up")
        return 0
    work = root / "grader-out"  # our own results.json and report.html, for the staff
    shutil.rmtree(work, ignore_errors=True)
    staged = work / "gradescope.json"
    cmd = [sys.executable, "-m", "graders.cli", str(root / "submission"), "--out", str(work)]
    cmd += ["--assignment", assignment, "--gradescope", str(staged), "--limit", f"total_timeout_s={checks_s:.3f}"]
    code = _grade(cmd + grade_args, budget)
    if code == REFUSED_STATUS:  # the grade said why on stderr: no results.json, so Gradescope counts no score
        print("run_autograder: grading refused for this container's sandbox; no results written", file=sys.stderr)
        return REFUSED_STATUS
    if code is None:
        _fail(
            root,
            spec,
            f"grading did not finish within the autograder's time budget of {budget:g} s; nothing was scored",
        )
        return 0
    _publish(root, spec, staged, code)
    return 0


def _grade(cmd: list[str], budget: float) -> int | None:
    """Run the grade; its exit status, or None when it was killed at the budget."""
    become_reaper()  # a killed grade's workers (each in a session of its own) come to us, to be killed
    proc = subprocess.Popen(cmd, start_new_session=True)  # its own group: one kill takes the grade and its helpers
    left = budget - FALLBACK_S - (time.monotonic() - STARTED)
    try:
        code = proc.wait(timeout=max(left, 0.1))
    except subprocess.TimeoutExpired:
        _kill(proc)
        return None
    kill_until_gone(orphans)  # nothing of the grade may outlive it
    return code


def _publish(root: Path, spec: Spec, staged: Path, code: int) -> None:
    """The grade's Gradescope file, checked against the schema, as ROOT/results/results.json; a
    score-0 file that says why when it is missing or unusable."""
    try:
        data = json.loads(staged.read_text())
        jsonschema.validate(data, schema())
    except (OSError, ValueError, jsonschema.ValidationError) as e:
        why = f"the grader stopped (exit status {code}) without writing results"
        if staged.exists():
            why = f"the grader wrote unusable results (exit status {code}): {str(e)[:300]}"
        _fail(root, spec, why)
        return
    _write_atomic(json.dumps(data, indent=2, ensure_ascii=False) + "\n", root / "results" / "results.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_autograder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")))
    parser.add_argument("--assignment", default="a3")
    parser.add_argument("--time-budget", type=float, help="seconds (default: the spec's [gradescope] time_budget_s)")
    parser.add_argument("--wrap-up", type=float, help="seconds (default: the spec's [gradescope] wrap_up_s)")
    parser.add_argument("--sandbox", choices=("full", "container", "minimal"), help="passed on to grade")
    parser.add_argument("grade_args", nargs=argparse.REMAINDER, help="after --: more `grade` options, e.g. --limit")
    args = parser.parse_args(argv)
    extra = args.grade_args[1:] if args.grade_args[:1] == ["--"] else args.grade_args
    extra = ([f"--sandbox={args.sandbox}"] if args.sandbox else []) + extra
    return run(args.root, args.assignment, args.time_budget, args.wrap_up, extra)


if __name__ == "__main__":
    sys.exit(main())
