"""`grade batch`: every submission of a folder graded in its own `grade` process (forked from a
warm one where that is safe, deploy/forked_grades.py), its own container (docker_backend.py), or a
Dask task on a cluster's worker (dask_engine.py), `--jobs` at a time; then OUT/grades.csv,
OUT/sources.json (where each submission came from), with --similarity the class's similar code
(graders/similarity/), and the class summary."""

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from graders.deploy import forked_grades
from graders.deploy.dask_engine import DaskEngine, DaskOptions
from graders.deploy.gradebook import write_gradebook
from graders.deploy.refusal import BatchRefused, is_refusal, refused
from graders.deploy.sources import write_sources
from graders.execution.policy import REFUSED_STATUS
from graders.execution.sandbox import kill_tree
from graders.handgrading.outputs import hand_views, write_marked_reports
from graders.handgrading.store import load_marks
from graders.reports.html import write_report
from graders.reports.results_file import write_results
from graders.reports.summary import write_summary
from graders.scoring.fallback import fallback_results
from graders.scoring.results import Results
from graders.spec import Spec

# One submission: (source, out, grade_args=..., timeout=...) -> "graded", "grader error", or why
# there is no report. Never raises.
GradeOne = Callable[..., str]
LOG_TAIL_BYTES = 200_000


@dataclass(frozen=True)
class Batch:
    """What `grade batch` was asked, checked."""

    input: Path
    out: Path
    spec: Spec
    assignment: str
    jobs: int
    force: bool
    limits: list[str]  # --limit NAME=VALUE, passed on to each grade
    backend: str  # "local", "docker" or "dask"
    cpus: float  # per container (docker)
    grade_one: GradeOne
    similarity: bool = False  # also compare the class's code (OUT/similarity.html), before the summary
    only: tuple[str, ...] = ()  # grade these items again for every submission, merged (deploy/regrade.py)
    dask: DaskOptions | None = None  # where the Dask tasks go (backend "dask")


def find_submissions(folder: Path) -> dict[str, Path]:
    """One submission per zip or folder in `folder` (a Gradescope export's submission_<id>/ folders
    included), by student name: the zip's stem or the folder's name; dotfiles and other files skipped."""
    found: dict[str, Path] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir() or (entry.is_file() and entry.suffix.lower() == ".zip"):
            name = entry.stem if entry.is_file() else entry.name
            found[entry.name if name in found else name] = entry
    return found


def grade_one(source: Path, out: Path, grade_args: list[str], timeout: float) -> str:
    """Grade one submission in its own `grade` process, as single mode does; never raises. The
    process is forked from a warm one where the platform has a fork server (forked_grades)."""
    argv = [str(source), "--out", str(out), "--quiet", *grade_args]
    log = out / "grade.log"
    try:
        out.mkdir(parents=True, exist_ok=True)
        returncode = run_grade(argv, log, timeout)
        _keep_tail(log, LOG_TAIL_BYTES)
        if returncode is None:
            return f"grade took longer than {timeout:g} s"
        refusal = refused(returncode, log.read_bytes())
        if refusal:
            return refusal
        if (out / "results.json").exists():
            return "graded" if returncode == 0 else "grader error"
        return f"grade exited {returncode} without a report"
    except Exception as e:  # e.g. a fork server that could not start: that student's row says so
        return f"could not run grade: {type(e).__name__}: {e}"


def run_grade(argv: list[str], log: Path, timeout: float, fork: bool = True) -> int | None:
    """`grade ARGV` with its output into `log`: forked from the warm process where the platform has
    a fork server (and `fork`), else a fresh one; its exit status, None past `timeout`."""
    if fork and forked_grades.available():
        return forked_grades.grade_forked(argv, log, timeout)
    return _grade_in_subprocess(argv, log, timeout)


def _grade_in_subprocess(argv: list[str], log: Path, timeout: float) -> int | None:
    """`python -m graders.cli ARGV` with its output into `log`; its exit status, None past `timeout`."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "graders.cli", *argv], stdout=fh, stderr=subprocess.STDOUT)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)  # its workers too: without bwrap they would not die with it
            proc.wait()
            return None


def _keep_tail(path: Path, size: int) -> None:
    """A log cut to its last `size` bytes (a grade that printed without end)."""
    if path.exists() and path.stat().st_size > size:
        with open(path, "rb") as fh:
            fh.seek(-size, os.SEEK_END)
            tail = fh.read()
        path.write_bytes(tail)


def already_graded(path: Path) -> bool:
    """Graded already: a readable results.json without a grader error (those are retried)."""
    try:
        return Results.model_validate_json(path.read_bytes()).grader_error is None
    except (OSError, ValueError):
        return False


def run_batch(batch: Batch) -> int:
    students = find_submissions(batch.input)
    todo = {s: src for s, src in students.items() if batch.force or not already_graded(batch.out / s / "results.json")}
    if batch.only:
        if todo and not batch.force:  # --only merges into a whole grade: there must be one
            print(
                f"grade batch --only: {', '.join(sorted(todo))} not graded yet: grade the batch first", file=sys.stderr
            )
            return 2
        todo = dict(students)
    try:
        failed, engine = _grade_all(batch, students, todo)
    except BatchRefused as e:  # no grades, no gradebook: a rerun after the fix grades what is left
        print(f"grade batch: {e}\nThe batch stopped; no submission was graded in that sandbox.", file=sys.stderr)
        return REFUSED_STATUS
    graded = _read_results(batch.out, students, failed)
    # The by-hand marks (`grade hand`) live in OUT's store, never in results.json: a regrade keeps them.
    marks = load_marks(batch.out)
    write_gradebook(batch.out / "grades.csv", batch.spec, students, graded, marks)
    write_marked_reports(batch.out, graded, marks, marks.keys())
    write_sources(batch.out, batch.assignment, students)
    if batch.similarity:
        _compare_class(batch, students)
    # Grader errors are ours, not the student's: listed for a look, kept out of the class's numbers.
    unfinished = {s: failed.get(s) or r.grader_error or "" for s, r in graded.items() if r.grader_error}
    unfinished.update({s: why for s, why in failed.items() if s not in graded})
    views = hand_views(batch.spec, list(students), graded, marks)
    write_summary(
        {s: r for s, r in graded.items() if s not in unfinished},
        unfinished,
        batch.out / "summary.html",
        batch.spec.title,
        engine=engine,
        hand=views.progress if views else None,
        finals=views.finals if views else None,
    )
    print(
        f"{len(students)} submissions ({len(students) - len(todo)} already graded), {len(failed)} failed; "
        f"grades: {batch.out / 'grades.csv'}, summary: {batch.out / 'summary.html'}"
    )
    for student, why in sorted(failed.items()):
        print(f"failed: {student}: {why}", file=sys.stderr)
    return 0


def _compare_class(batch: Batch, students: dict[str, Path]) -> None:
    """OUT/similarity.*, which the summary then links; a failure of it costs the page, never the grades."""
    from graders.similarity.run import run_similarity  # numpy and the index: only when asked

    try:
        result = run_similarity(students, batch.spec, batch.out)
    except Exception as e:  # the grades are written already; say why the page is missing
        print(f"similarity: not compared: {type(e).__name__}: {e}", file=sys.stderr)
        return
    print(f"similarity: {result.pairs_over} pairs scored 0.3 or more: {batch.out / 'similarity.html'}")


def _grade_args(batch: Batch) -> list[str]:
    """The options of each submission's grade."""
    # Submissions in parallel already keep the cores busy: a second worker each would only add its
    # start-up (an import of torch) to every grade. A container sees every core of the host, not
    # its --cpus, so it is told.
    # A Dask cluster of its own (a running one, Slurm nodes) has a worker per core: busy too.
    one_worker = (
        batch.jobs > 1
        or (batch.backend == "docker" and batch.cpus < 3)
        or (batch.dask is not None and (batch.dask.scheduler or batch.dask.cluster))
    )
    extra = (["--limit=workers=1"] if one_worker else []) + [f"--limit={x}" for x in batch.limits]
    if batch.backend in ("local", "dask"):
        extra = ["--assignment", batch.assignment, *extra]
    return extra


def _grade_all(batch: Batch, students: dict[str, Path], todo: dict[str, Path]) -> tuple[dict[str, str], str]:
    """Grade `todo`, `jobs` at a time, with a progress bar; why each that did not grade cleanly
    failed, and which engine graded (for the summary; "" for this machine's processes or containers).
    A submission left without a report gets one: score 0 and why."""
    from tqdm import tqdm

    extra = _grade_args(batch)
    timeout = batch.spec.limits.total_timeout_s + batch.spec.limits.import_timeout_s + 120
    failed: dict[str, str] = {}
    engine = DaskEngine.start(batch.jobs, batch.dask) if batch.dask is not None and todo else None
    try:
        if engine is not None and batch.spec.runs_student_code():
            engine.check_sandbox(batch.spec.limits.sandbox)
        with tqdm(total=len(students), initial=len(students) - len(todo), desc="grading", unit="sub") as bar:
            if engine is not None:
                outcomes = engine.grade(todo, batch.out, extra, timeout, bar)
            else:
                outcomes = _in_threads(batch, todo, extra, timeout)
            for student, outcome in outcomes:
                if is_refusal(outcome):
                    raise BatchRefused(f"{student}: {outcome}")
                if outcome not in ("graded", "grader error"):  # no report at all: still one, with score 0 and why
                    results = fallback_results(students[student], batch.spec, outcome)
                    write_results(results, batch.out / student)
                    write_report(results, batch.out / student)
                if outcome != "graded":
                    failed[student] = outcome
                bar.update()
    finally:
        if engine is not None:
            engine.close()
    return failed, engine.describe() if engine is not None else ""


def _in_threads(batch: Batch, todo: dict[str, Path], extra: list[str], timeout: float) -> Iterator[tuple[str, str]]:
    """(student, outcome) of batch.grade_one on each of `todo`, `jobs` at a time, as each finishes."""
    with ThreadPoolExecutor(max_workers=batch.jobs) as pool:
        futures = {
            pool.submit(batch.grade_one, src, batch.out / s, grade_args=extra, timeout=timeout): s
            for s, src in todo.items()
        }
        for future in as_completed(futures):
            yield futures[future], future.result()


def _read_results(out: Path, students: dict[str, Path], failed: dict[str, str]) -> dict[str, Results]:
    """Every student's stored results.json; one that cannot be read is added to `failed`."""
    graded: dict[str, Results] = {}
    for student in students:
        try:
            graded[student] = Results.model_validate_json((out / student / "results.json").read_bytes())
        except (OSError, ValueError) as e:
            failed[student] = f"unreadable results.json: {e}"
    return graded
