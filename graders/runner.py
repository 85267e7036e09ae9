"""One grade, stage by stage: intake, the workers, the trusted side's imports, the hidden checks
under pytest, scores, a Results object.

Light to import on purpose: the worker is spawned first and imports torch while this process
loads pytest, Hypothesis, torch and the reference (two cores: the two overlap)."""

import functools
import gc
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders import __version__
from graders.checks.reference import load_reference
from graders.execution import habits, policy
from graders.execution.breaker import Breaker, call_structure
from graders.execution.client import Worker, WorkerError
from graders.execution.outcomes import captured_output, describe_import_error, left_running, postponed_note
from graders.intake.png import MAX_PLOT_BYTES, read_png
from graders.intake.submission import Intake, take_in
from graders.scoring.results import CheckResult, ItemResult, Results, Submission, Training
from graders.scoring.score import score_item
from graders.scoring.upstream import apply_policy
from graders.spec import Spec
from graders.timing import Timings, since

if TYPE_CHECKING:  # pytest, Hypothesis and torch: imported only once the worker is starting
    from graders.checks.session import GradeContext


@dataclass
class _Grade:
    """One grade in flight: what its stages read and add to, and what the clean-up releases."""

    source: Path
    spec: Spec
    out_dir: Path | None
    started: float  # time.monotonic() at the grade's start: total_s and the deadline count from it
    scratch: Path
    timings: Timings = field(default_factory=Timings)
    workers: list[Worker] = field(default_factory=list)
    breaker: Breaker | None = None
    ctx: "GradeContext | None" = None
    import_notes: list[str] = field(default_factory=list)  # what the submission's imports needed (habits.py)

    @property
    def deadline(self) -> float:
        return self.started + self.spec.limits.total_timeout_s


def grade(source: Path, spec: Spec, out_dir: Path | None = None) -> Results:
    """Grade one submission (a zip or a folder). Never raises for anything the submission does.
    Files kept for the report (the training plot) go to `out_dir`."""
    started = time.monotonic()
    g = _Grade(source, spec, out_dir, started, Path(tempfile.mkdtemp(prefix="grade-")))
    try:
        intake = take_in(source, spec.required_files, g.scratch / "submission", spec.alternatives, spec.notebooks)
        if intake.rejected:
            return _rejected(g, intake, intake.rejected)
        g.timings["intake_s"] = since(started)
        if spec.engine == "written":
            return _grade_written(g, intake)
        return _grade_with_checks(g, intake)
    finally:
        _release(g)


def _grade_written(g: _Grade, intake: Intake) -> Results:
    """The written engine: an answers file against the key, on the trusted side; the key's code
    parts (if any) in a worker, spawned first so that it starts while the answers are graded."""
    from graders.written.grading import check_answers, check_code, launch_code_worker

    worker = launch_code_worker(g.spec, intake, g.spec.limits)
    if worker is not None:
        worker.deadline = g.deadline
        g.workers.append(worker)
    checked, warnings, problems = check_answers(g.spec, intake)
    with g.timings.timed("code_s"):
        code, code_problems = check_code(g.spec, intake, worker)
    checked = {**checked, **code}
    items = [score_item(item, [checked[c.name] for c in item.checks]) for item in g.spec.items]
    ran = {}
    if worker is not None:
        ran = dict(output=captured_output(g.workers, g.spec.limits.output_cap_bytes), **_sandbox(worker, g.spec))
    return _results(
        g, intake, items, problems={**intake.problems, **problems, **code_problems}, warnings=warnings, **ran
    )


def _grade_with_checks(g: _Grade, intake: Intake) -> Results:
    """The checks engine: workers, the trusted side's imports while they start, the hidden checks."""
    worker = _launch_workers(g, intake)
    with g.timings.timed("trusted_imports_s"):
        from graders.checks.session import GradeContext  # pytest, Hypothesis, torch: while the worker starts
    with g.timings.timed("reference_s"):
        ref = load_reference(g.spec.reference_dir, g.spec.reference_modules) if g.spec.reference_dir else None
    _freeze_imports()
    broken = _wait_for_worker(g, worker, intake)
    g.import_notes = habits.import_notes(worker) if worker.boot_s is not None else []
    g.ctx = GradeContext(
        spec=g.spec,
        worker=worker,
        ref=ref,
        intake=intake,
        broken=broken,
        spare=g.workers[1] if len(g.workers) > 1 and not broken else None,
    )
    checked = _run_checks(g, g.ctx, broken)
    return _checked_results(g, g.ctx, intake, checked, broken)


def _launch_workers(g: _Grade, intake: Intake) -> Worker:
    """Spawn the worker (and the spare one, where the spec and the cores call for it); the first."""
    spec = g.spec
    modules = [m for m in spec.modules() if f"{m}.py" in intake.files]
    spare = spec.limits.worker_count() > 1 and any(i.own_worker for i in spec.items)
    habits.write_settings(intake.folder, spec)  # before the spare's copy: each worker reads its own
    if spare:  # its own copy: in a plain sandbox the two would share a folder
        shutil.copytree(intake.folder, g.scratch / "spare")
    worker = Worker(intake.folder, spec.limits, modules)
    g.workers.append(worker)
    worker.launch()
    if spare:
        g.workers.append(Worker(g.scratch / "spare", spec.limits, modules))
        g.workers[1].launch()
    g.breaker = Breaker(call_structure(spec))  # a method that hangs or crashes is paid for once
    for w in g.workers:
        w.deadline = g.deadline  # its start-up and every request end by then: a platform's hard limit is kept
        w.breaker = g.breaker
    return worker


def _wait_for_worker(g: _Grade, worker: Worker, intake: Intake) -> dict[str, str]:
    """Wait for the worker's start-up and the submission's imports; the files whose checks are
    blocked, and why (intake's problems, failed imports, a worker that could not start)."""
    start_error = None
    with g.timings.timed("worker_start_s"):  # the wait for it, after the trusted side's imports
        try:
            worker.start()
        except WorkerError as e:
            start_error = str(e)
    g.timings.update(
        {k: v for k, v in (("worker_boot_s", worker.boot_s), ("student_import_s", worker.import_s)) if v is not None}
    )
    broken = dict(intake.problems)
    for module, info in worker.import_errors.items():
        broken[f"{module}.py"] = describe_import_error(module, info, intake.problems)
    if start_error:
        for f in g.spec.required_files:  # a notebook runs in this worker too
            broken.setdefault(f, f"the worker could not start: {start_error}")
    return broken


def _run_checks(g: _Grade, ctx: "GradeContext", broken: dict[str, str]) -> dict[str, CheckResult]:
    """The hidden checks under pytest, then the charge-once policy; their costs into the timings."""
    from graders.checks.session import run_checks

    with g.timings.timed("checks_s"):
        checked, seconds = run_checks(ctx, g.deadline)
        checked = apply_policy(g.spec, _quiet_advice(g.spec, checked, broken), broken, ctx.ruled_out)
    g.timings.update({f"item {k} s": round(v, 3) for k, v in seconds.items()})
    g.timings["student_calls"] = sum(w.calls for w in g.workers)  # requests that ran student code
    g.timings["worker_starts"] = sum(w.starts for w in g.workers)
    g.timings["worker_forks"] = sum(w.forks for w in g.workers)  # of those, forked from the zygote (no torch import)
    assert g.breaker is not None
    g.timings.update(
        lost_to_failures_s=round(sum(w.lost_s for w in g.workers), 3),  # hangs, crashes, restarts
        failed_fast=g.breaker.failed_fast,
        broken_requests=len(g.breaker.broken),
    )
    return checked


def _checked_results(
    g: _Grade, ctx: "GradeContext", intake: Intake, checked: dict[str, CheckResult], broken: dict[str, str]
) -> Results:
    """Scores, the plot kept, the warnings in the report's order, and the workers' account."""
    items = [score_item(item, [checked[c.name] for c in item.checks]) for item in g.spec.items]
    _keep_plot(ctx.training, g.out_dir, ctx.extra_warnings)
    advice = [
        f"{c.title}: {c.message}"
        for i in items
        if i.status == "warning"
        for c in i.checks
        if c.status not in ("passed", "not_applicable")
    ]
    g.timings["worker_peak_rss_mb"] = round(max(w.peak_rss_kb for w in g.workers) / 1024, 1)
    notes = {m: n for w in g.workers for m, n in w.import_notes.items()}
    warnings = [postponed_note(m, n) for m, n in sorted(notes.items())] + g.import_notes
    warnings += [w for w in left_running(g.workers) + advice + ctx.extra_warnings if w not in g.import_notes]
    worker = g.workers[0]
    return _results(
        g,
        intake,
        items,
        problems=broken,
        training=ctx.training,
        warnings=warnings,
        output=captured_output(g.workers, g.spec.limits.output_cap_bytes),
        **_sandbox(worker, g.spec),
    )


def _sandbox(worker: Worker, spec: Spec) -> dict[str, Any]:
    """What results.json says of the sandbox: its layers, the level asked, what was missing."""
    verdict = policy.assess(spec.limits.sandbox, worker.sandbox.caps)
    return dict(
        sandbox=worker.layers,
        sandbox_notes=list(worker.sandbox.caps.notes),
        sandbox_level=spec.limits.sandbox,
        sandbox_missing=[str(m) for m in verdict.missing],
    )


def _release(g: _Grade) -> None:
    for w in g.workers:
        w.kill()  # a request still running ahead fails at once, its thread ends
    if g.ctx is not None:
        g.ctx.settle()
    for w in g.workers:
        w.close()
    shutil.rmtree(g.scratch, ignore_errors=True)


def _rejected(g: _Grade, intake: Intake, reason: str) -> Results:
    items = [
        score_item(
            i,
            [
                CheckResult(name=c.name, title=c.title, weight=c.weight, status="failed", message=reason)
                for c in i.checks
            ],
        )
        for i in g.spec.items
    ]
    return _results(g, intake, items, grader_error=None, problems={"submission": reason})


def _quiet_advice(spec: Spec, checked: dict[str, CheckResult], broken: dict[str, str]) -> dict[str, CheckResult]:
    """Advice is about behaviour that ran: a warning item whose files are broken says nothing."""
    quiet = dict(checked)
    for item in spec.items:
        if item.report_as == "warning" and any(f in broken for f in item.needs):
            for c in item.checks:
                if c.name in quiet:
                    quiet[c.name] = quiet[c.name].model_copy(update={"status": "not_applicable"})
    return quiet


def _results(
    g: _Grade, intake: Intake, items: list[ItemResult], warnings: list[str] | None = None, **extra: Any
) -> Results:
    spec = g.spec
    scored = [i for i in items if not i.bonus]
    bonus = [i for i in items if i.bonus]
    return Results(
        assignment=spec.assignment,
        grader_version=__version__,
        submission=Submission(
            name=g.source.name, sha256=intake.sha256, files=sorted(p.name for p in intake.files.values())
        ),
        score=round(sum(i.score for i in scored), 2),
        max_score=spec.points(),
        bonus_score=round(sum(i.score for i in bonus), 2),
        bonus_max=spec.points(bonus=True),
        items=items,
        timings={**g.timings, "total_s": since(g.started)},
        warnings=intake.warnings + (warnings or []),
        **extra,
    )


def _keep_plot(training: Training | None, out_dir: Path | None, warnings: list[str]) -> None:
    """Copy the student's plot out of scratch: a regular PNG file under the cap, never a link."""
    if training is None or training.plot is None:
        return
    source, training.plot = Path(training.plot), None
    if out_dir is None:
        return
    try:
        data = read_png(source)
    except OSError:
        return
    if data is None:
        warnings.append(f"{source.name} is not a PNG image under {MAX_PLOT_BYTES >> 20} MiB; not kept")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / source.name).write_bytes(data)
    training.plot = source.name


@functools.cache
def _freeze_imports() -> None:
    """Hide what the imports built (torch, pytest, Hypothesis: it lives as long as the
    process) from the cyclic collector, once per process: the full collections a grade triggers,
    pytest's own at the end of each check session among them, then walk only the grade's objects
    (0.3 CPU-s less per grade; bench/grade_cpu.py)."""
    gc.freeze()
