"""One grade: intake, a worker, the hidden checks under pytest, scores, a Results object.

Light to import on purpose: the worker is spawned first and imports torch while this process
loads pytest, Hypothesis, torch and the reference (two cores: the two overlap)."""

import shutil
import tempfile
import time
from pathlib import Path

from graders import __version__
from graders.execution.breaker import Breaker, call_structure
from graders.execution.client import Worker, WorkerError
from graders.intake.submission import Intake, take_in
from graders.checks.reference import load_reference
from graders.intake.png import MAX_PLOT_BYTES, read_png
from graders.scoring.results import CheckResult, Output, Results, Submission, Training
from graders.scoring.score import score_item
from graders.spec import Spec
from graders.scoring.upstream import apply_policy

def _describe_import_error(module: str, info: dict, problems: dict[str, str]) -> str:
    """Why `module` could not be imported, in words; `problems` are intake's, per file: a module that
    imports a file intake refused (a syntax error) is named as blocked by that file, not as missing."""
    name = f"{module}.py"
    if info.get("type") == "WorkerError":
        return f"{name} could not be imported: {info['message']}"
    loc = f", line {info['line']}" if info.get("line") else ""
    where = info.get("file") or name
    if info.get("type") == "SystemExit":
        return f"{name} {info['message'].replace(' was called', '')} at import ({where}{loc})"
    missing = info.get("missing_module")
    if missing and f"{missing}.py" in problems:
        return (f"{name} could not be graded: it imports {missing}, and {missing}.py could not be loaded "
                f"({problems[f'{missing}.py']})")
    if missing:
        return (f"{name} failed at import ({where}{loc}): it imports '{missing}', "
                "which is not a module of the submission or of the grading environment")
    return f"{name} failed at import ({where}{loc}): {info.get('type')}: {info.get('message')}"


def _postponed_note(module: str, note: dict) -> str:
    """The warning for a module imported with postponed annotations (worker data: shown, clipped)."""
    line = note.get("line") if isinstance(note.get("line"), int) else "?"
    error, python = str(note.get("error", ""))[:300], str(note.get("python", ""))[:20]
    return (f"{module}.py, line {line}: evaluating an annotation failed on Python {python} ({error}). The file "
            "looks written for Python 3.14, which never evaluates annotations at import, so it was imported with "
            "postponed evaluation of annotations (as `from __future__ import annotations` does) and graded that "
            "way; nothing else about the code was changed")


def _rejected(source: Path, spec: Spec, intake: Intake, reason: str, started: float) -> Results:
    items = [score_item(i, [CheckResult(name=c.name, title=c.title, weight=c.weight, status="failed", message=reason)
                            for c in i.checks]) for i in spec.items]
    return _results(source, spec, intake, items, started, grader_error=None, problems={"submission": reason})


def _left_running(workers: list[Worker]) -> list[str]:
    """A warning for each request whose student code left processes running (killed at once)."""
    found: dict[str, int] = {}
    for w in workers:
        for where, count in w.left_running.items():
            found.setdefault(where, count)
    return [f"your code left {n} process{'es' if n > 1 else ''} running after {where}; "
            f"{'they were' if n > 1 else 'it was'} killed before anything else ran, so grading went on as usual"
            for where, n in sorted(found.items())]


def _quiet_advice(spec: Spec, checked: dict[str, CheckResult], broken: dict[str, str]) -> dict[str, CheckResult]:
    """Advice is about behaviour that ran: a warning item whose files are broken says nothing."""
    quiet = dict(checked)
    for item in spec.items:
        if item.report_as == "warning" and any(f in broken for f in item.needs):
            for c in item.checks:
                if c.name in quiet:
                    quiet[c.name] = quiet[c.name].model_copy(update={"status": "not_applicable"})
    return quiet


def _results(source: Path, spec: Spec, intake: Intake, items, started: float, **extra) -> Results:
    scored = [i for i in items if not i.bonus]
    bonus = [i for i in items if i.bonus]
    return Results(assignment=spec.assignment, grader_version=__version__,
                   submission=Submission(name=source.name, sha256=intake.sha256,
                                         files=sorted(p.name for p in intake.files.values())),
                   score=round(sum(i.score for i in scored), 2), max_score=spec.points(),
                   bonus_score=round(sum(i.score for i in bonus), 2), bonus_max=spec.points(bonus=True),
                   items=items, timings={**extra.pop("timings", {}), "total_s": round(time.monotonic() - started, 3)},
                   warnings=intake.warnings + extra.pop("warnings", []), **extra)


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


def _preload_report() -> None:
    import matplotlib.figure  # noqa: F401  the report's plots

    import matplotlib.backends.backend_agg  # noqa: F401


def _output(workers: list[Worker], cap: int) -> Output:
    """What student code printed, at most `cap` characters per stream for the whole grade: the
    second worker's (the training run's, after its own import prints) follows under a rule."""
    def join(texts: list[str]) -> str:
        body = texts[0] if texts else ""  # capped by its worker already
        for more in filter(None, texts[1:]):
            room = max(0, cap - len(body))
            body += "\n--- in the second worker (training run) ---\n" + more[:room]
            if len(more) > room:
                body += f"\n[... {len(more) - room} more characters not kept]"
        return body

    started = [w for w in workers if w.starts]
    return Output(stdout=join([w.stdout.text() for w in started]), stderr=join([w.stderr.text() for w in started]))


def grade(source: Path, spec: Spec, out_dir: Path | None = None) -> Results:
    """Grade one submission (a zip or a folder). Never raises for anything the submission does.
    Files kept for the report (the training plot) go to `out_dir`."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="grade-"))
    workers: list[Worker] = []
    ctx = None
    try:
        intake = take_in(source, spec.required_files, scratch / "submission", spec.alternatives, spec.notebooks)
        if intake.rejected:
            return _rejected(source, spec, intake, intake.rejected, started)
        timings: dict[str, float] = {"intake_s": round(time.monotonic() - started, 3)}
        if spec.engine == "written":
            from graders.written.grading import check_answers

            checked, warnings, problems = check_answers(spec, intake)
            items = [score_item(item, [checked[c.name] for c in item.checks]) for item in spec.items]
            return _results(source, spec, intake, items, started, timings=timings,
                            problems={**intake.problems, **problems}, warnings=warnings)
        modules = [m for m in spec.modules() if f"{m}.py" in intake.files]
        spare = spec.limits.worker_count() > 1 and any(i.own_worker for i in spec.items)
        if spare:  # its own copy: in a plain sandbox the two would share a folder
            shutil.copytree(intake.folder, scratch / "spare")
        deadline = started + spec.limits.total_timeout_s
        worker = Worker(intake.folder, spec.limits, modules)
        workers.append(worker)
        worker.launch()
        if spare:
            workers.append(Worker(scratch / "spare", spec.limits, modules))
            workers[1].launch()
        breaker = Breaker(call_structure(spec))  # a method that hangs or crashes is paid for once
        for w in workers:
            w.deadline = deadline  # its start-up and every request end by then: a platform's hard limit is kept
            w.breaker = breaker
        t = time.monotonic()
        from graders.checks.session import GradeContext, run_checks  # pytest, Hypothesis, torch: while the worker starts

        timings["trusted_imports_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        ref = load_reference(spec.reference_dir, spec.reference_modules) if spec.reference_dir else None
        timings["reference_s"] = round(time.monotonic() - t, 3)
        _preload_report()  # costs nothing while the worker still imports torch, 0.6 s at report time otherwise
        t = time.monotonic()
        try:
            worker.start()
            start_error = None
        except WorkerError as e:
            start_error = str(e)
        timings["worker_start_s"] = round(time.monotonic() - t, 3)  # the wait for it, after the imports above
        timings.update({k: v for k, v in (("worker_boot_s", worker.boot_s), ("student_import_s", worker.import_s))
                        if v is not None})
        broken = dict(intake.problems)
        for module, info in worker.import_errors.items():
            broken[f"{module}.py"] = _describe_import_error(module, info, intake.problems)
        if start_error:
            for f in spec.required_files:  # a notebook runs in this worker too
                broken.setdefault(f, f"the worker could not start: {start_error}")
        ctx = GradeContext(spec=spec, worker=worker, ref=ref, intake=intake, broken=broken,
                           spare=workers[1] if len(workers) > 1 and not broken else None)
        t = time.monotonic()
        checked, seconds = run_checks(ctx, deadline)
        checked = apply_policy(spec, _quiet_advice(spec, checked, broken), broken)
        timings["checks_s"] = round(time.monotonic() - t, 3)
        timings.update({f"item {k} s": round(v, 3) for k, v in seconds.items()})
        timings["student_calls"] = sum(w.calls for w in workers)  # requests that ran student code
        timings.update(lost_to_failures_s=round(sum(w.lost_s for w in workers), 3),  # hangs, crashes, restarts
                       failed_fast=breaker.failed_fast, broken_requests=len(breaker.broken))
        items = [score_item(item, [checked[c.name] for c in item.checks]) for item in spec.items]
        _keep_plot(ctx.training, out_dir, ctx.extra_warnings)
        warnings = [f"{c.title}: {c.message}" for i in items if i.status == "warning"
                    for c in i.checks if c.status not in ("passed", "not_applicable")]
        timings["worker_peak_rss_mb"] = round(max(w.peak_rss_kb for w in workers) / 1024, 1)
        notes = {m: n for w in workers for m, n in w.import_notes.items()}
        warnings = [_postponed_note(m, n) for m, n in sorted(notes.items())] + _left_running(workers) + warnings \
            + ctx.extra_warnings
        results = _results(source, spec, intake, items, started, timings=timings,
                           problems=broken, training=ctx.training, warnings=warnings,
                           output=_output(workers, spec.limits.output_cap_bytes), sandbox=worker.layers,
                           sandbox_notes=list(worker.sandbox.caps.notes))
    finally:
        for w in workers:
            w.kill()  # a request still running ahead fails at once, its thread ends
        if ctx is not None:
            ctx.settle()
        for w in workers:
            w.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return results
