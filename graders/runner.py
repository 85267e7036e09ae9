"""One grade: intake, a worker, the hidden checks under pytest, scores, a Results object."""

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky

from . import __version__
from .checking import CheckFailure
from .client import StudentError, Worker, WorkerError
from .intake import Intake, take_in
from .reference import REPO, load_reference
from .pngfile import MAX_PLOT_BYTES, read_png
from .results import CheckResult, Output, Results, Submission, Training
from .scoring import score_item
from .spec import Spec

REFERENCE_MODULES = ("utils", "model_solution")


@dataclass
class GradeContext:
    """What the hidden checks get through the `grade` fixture."""

    spec: Spec
    worker: Worker
    ref: SimpleNamespace
    intake: Intake
    training: Training | None = None
    extra_warnings: list[str] = field(default_factory=list)


def _describe_import_error(module: str, info: dict) -> str:
    name = f"{module}.py"
    if info.get("type") == "WorkerError":
        return f"{name} could not be imported: {info['message']}"
    loc = f", line {info['line']}" if info.get("line") else ""
    where = info.get("file") or name
    if info.get("type") == "SystemExit":
        return f"{name} {info['message'].replace(' was called', '')} at import ({where}{loc})"
    if info.get("missing_module"):
        return (f"{name} failed at import ({where}{loc}): it imports '{info['missing_module']}', "
                "which is not a module of the submission or of the grading environment")
    return f"{name} failed at import ({where}{loc}): {info.get('type')}: {info.get('message')}"


def _example(exc: BaseException) -> str | None:
    notes = [n for n in getattr(exc, "__notes__", []) if n.startswith("Falsifying example")]
    return notes[0].split(":", 1)[1].strip()[:1000] if notes else None


class GradePlugin:
    """Bridges pytest's outcomes to check results; never lets a test's exception escape unjudged."""

    def __init__(self, ctx: GradeContext, broken: dict[str, str], deadline: float):
        self.ctx, self.broken, self.deadline = ctx, broken, deadline
        self.by_check = ctx.spec.check_item()
        self.results: dict[str, CheckResult] = {}
        self.seconds: dict[str, float] = {}

    def pytest_configure(self, config: pytest.Config) -> None:
        # Same zip, same examples, same feedback: no database, derandomized, no shrinking (a shrink
        # re-runs student code many times, and a hang would be paid for at every run).
        settings.register_profile(
            "grading", derandomize=True, database=None, deadline=None, print_blob=False,
            max_examples=self.ctx.spec.hypothesis.max_examples, phases=(Phase.explicit, Phase.generate),
            report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
        settings.load_profile("grading")

    @pytest.fixture(scope="session")
    def grade(self) -> GradeContext:
        return self.ctx

    def _check_of(self, item: pytest.Item) -> str:
        return item.originalname.removeprefix("test_")

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        check = self._check_of(item)
        spec_item = self.by_check.get(check)
        if spec_item is None:
            return
        reasons = [self.broken[f] for f in spec_item.needs if f in self.broken]
        if reasons:
            pytest.skip("blocked: " + "; ".join(dict.fromkeys(reasons)))
        if time.monotonic() > self.deadline:
            pytest.skip(f"blocked: not run, the grade's time budget of {self.ctx.spec.limits.total_timeout_s:g} s ran out")
        self.ctx.worker.begin_check()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        check = self._check_of(item)
        spec_item = self.by_check.get(check)
        if spec_item is not None:
            self.seconds[spec_item.id] = self.seconds.get(spec_item.id, 0.0) + report.duration
        if spec_item is None or (report.when != "call" and not (report.failed or report.skipped)):
            return
        spec_check = next(c for c in spec_item.checks if c.name == check)
        base = dict(name=check, title=spec_check.title, weight=spec_check.weight)
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
            if reason.startswith("blocked: "):
                self.results[check] = CheckResult(status="failed", message=reason.removeprefix("blocked: "), **base)
            else:
                self.results[check] = CheckResult(status="not_applicable", message=reason, **base)
        elif report.passed:
            self.results[check] = CheckResult(status="passed", **base)
        else:
            exc = call.excinfo.value if call.excinfo else None
            self.results[check] = self._failure(exc, base)

    @staticmethod
    def _failure(exc: BaseException | None, base: dict) -> CheckResult:
        if isinstance(exc, Flaky):  # FlakyFailure too: it is a group of the failures seen
            inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions else None
            result = GradePlugin._failure(inner, base) if inner else None
            detail = f": {result.message}" if result else ""
            return CheckResult(status="failed", message="the same input gave different results on two runs "
                               f"(randomness in the code?){detail}", **base)
        example = _example(exc) if exc else None
        if isinstance(exc, CheckFailure):
            return CheckResult(status="failed", message=exc.message, measured=exc.measured, tolerance=exc.tolerance,
                               where=exc.where, example=example, **base)
        if isinstance(exc, (StudentError, WorkerError)):
            return CheckResult(status="failed", message=str(exc), example=example, **base)
        if isinstance(exc, AssertionError):
            return CheckResult(status="failed", message=str(exc).split("\n")[0], example=example, **base)
        return CheckResult(status="error", example=example,
                           message=f"grader error: {type(exc).__name__}: {exc}"[:2000], **base)


def _rejected(source: Path, spec: Spec, intake: Intake, reason: str, started: float) -> Results:
    items = [score_item(i, [CheckResult(name=c.name, title=c.title, weight=c.weight, status="failed", message=reason)
                            for c in i.checks]) for i in spec.items]
    return _results(source, spec, intake, items, started, grader_error=None, problems={"submission": reason})


def _results(source: Path, spec: Spec, intake: Intake, items, started: float, **extra) -> Results:
    scored = [i for i in items if not i.bonus]
    bonus = [i for i in items if i.bonus]
    return Results(assignment=spec.assignment, grader_version=__version__,
                   submission=Submission(name=source.name, sha256=intake.sha256, files=sorted(intake.files)),
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


def grade(source: Path, spec: Spec, out_dir: Path | None = None) -> Results:
    """Grade one submission (a zip or a folder). Never raises for anything the submission does.
    Files kept for the report (the training plot) go to `out_dir`."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="grade-"))
    try:
        intake = take_in(source, spec.required_files, scratch / "submission")
        if intake.rejected:
            return _rejected(source, spec, intake, intake.rejected, started)
        timings: dict[str, float] = {"intake_s": round(time.monotonic() - started, 3)}
        modules = [f.removesuffix(".py") for f in spec.required_files if f in intake.files]
        worker = Worker(intake.folder, spec.limits, modules)
        try:
            t = time.monotonic()
            ref = load_reference(spec.reference_dir, REFERENCE_MODULES)
            timings["reference_s"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            try:
                worker.start()
                start_error = None
            except WorkerError as e:
                start_error = str(e)
            timings["worker_start_s"] = round(time.monotonic() - t, 3)
            broken = dict(intake.problems)
            for module, info in worker.import_errors.items():
                broken[f"{module}.py"] = _describe_import_error(module, info)
            if start_error:
                for f in spec.required_files:
                    broken.setdefault(f, f"the worker could not start: {start_error}")
            ctx = GradeContext(spec=spec, worker=worker, ref=ref, intake=intake)
            plugin = GradePlugin(ctx, broken, started + spec.limits.total_timeout_s)
            t = time.monotonic()
            checks_dir = REPO / spec.checks_dir
            code = pytest.main([str(checks_dir), "-p", "no:cacheprovider", "-p", "no:terminal",
                                "-c", str(checks_dir / "pytest.ini"), "--rootdir", str(checks_dir)],
                               plugins=[plugin])
            timings["checks_s"] = round(time.monotonic() - t, 3)
            timings.update({f"item {k} s": round(v, 3) for k, v in plugin.seconds.items()})
            missing = [c.name for i in spec.items for c in i.checks if c.name not in plugin.results]
            if missing:
                raise RuntimeError(f"hidden checks did not run (pytest exit {int(code)}): {', '.join(missing)}")
            items = []
            for item in spec.items:
                items.append(score_item(item, [plugin.results[c.name] for c in item.checks]))
            _keep_plot(ctx.training, out_dir, ctx.extra_warnings)
            warnings = [f"{c.title}: {c.message}" for i in items if i.status == "warning"
                        for c in i.checks if c.status not in ("passed", "not_applicable")]
            return _results(source, spec, intake, items, started, timings=timings,
                            problems=broken, training=ctx.training, warnings=warnings + ctx.extra_warnings,
                            output=Output(stdout=worker.stdout.text(), stderr=worker.stderr.text()),
                            sandbox=worker.layers)
        finally:
            worker.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
