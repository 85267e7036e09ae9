"""The hidden checks as a pytest session: the `grade` fixture they get, and the plugin that turns
pytest's outcomes into check results. Imports pytest, Hypothesis and (through the checks) torch,
so the runner loads it only once the worker is already starting."""

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky

from graders.checks.checking import CheckFailure
from graders.execution.client import StudentError, Worker, WorkerError
from graders.intake.submission import Intake
from graders.paths import REPO
from graders.scoring.results import CheckResult, Training
from graders.spec import Spec


@dataclass
class GradeContext:
    """What the hidden checks get through the `grade` fixture."""

    spec: Spec
    worker: Worker
    ref: SimpleNamespace | None  # None: the assignment has no reference
    intake: Intake
    broken: dict[str, str] = field(default_factory=dict)  # file -> why its checks are blocked
    spare: Worker | None = None  # already starting, when the limits allow a second worker
    training: Training | None = None
    extra_warnings: list[str] = field(default_factory=list)
    # check name -> items the check showed are not the cause of its failure (it ran the grader's own
    # code in their place, or compared theirs with it as it ran): charge-once names them to no one
    ruled_out: dict[str, set[str]] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)  # what several checks compute once per grade
    _ahead: dict[str, Callable[[], dict]] = field(default_factory=dict)
    _threads: list[threading.Thread] = field(default_factory=list)

    def ahead(self, key: str, op: str, where: str, timeout: float, **fields: Any) -> None:
        """Send a long request now on the spare worker, so it runs while the other checks do;
        `collect(key)` waits for its reply. Without a spare it runs, on the worker, at collect."""
        if key in self._ahead:
            return
        if self.spare is None:
            self._ahead[key] = lambda: self.worker.request(op, where, timeout, **fields)
            return
        future: Future = Future()
        spare = self.spare

        def send() -> None:
            try:
                future.set_result(spare.request(op, where, timeout, **fields))
            except BaseException as e:  # handed to whoever collects: StudentError, WorkerError
                future.set_exception(e)

        thread = threading.Thread(target=send, name=f"ahead-{key}", daemon=True)
        thread.start()
        self._threads.append(thread)
        self._ahead[key] = future.result

    def collect(self, key: str) -> dict:
        """The reply of the request `ahead(key, ...)` sent; raises as `Worker.request` does."""
        return self._ahead.pop(key)()

    def settle(self, timeout: float = 10) -> None:
        """Wait for requests sent ahead and never collected (their worker is killed by now)."""
        for thread in self._threads:
            thread.join(timeout)


def _example(exc: BaseException) -> str | None:
    notes = [n for n in getattr(exc, "__notes__", []) if n.startswith("Falsifying example")]
    return notes[0].split(":", 1)[1].strip()[:1000] if notes else None


class GradePlugin:
    """Bridges pytest's outcomes to check results; never lets a test's exception escape unjudged."""

    def __init__(self, ctx: GradeContext, deadline: float):
        self.ctx, self.deadline = ctx, deadline
        self.by_check = ctx.spec.check_item()
        self.results: dict[str, CheckResult] = {}
        self.seconds: dict[str, float] = {}

    def pytest_configure(self, config: pytest.Config) -> None:
        # Same zip, same examples, same feedback: no database, derandomized, no shrinking (a shrink
        # re-runs student code many times, and a hang would be paid for at every run).
        settings.register_profile(
            "grading",
            derandomize=True,
            database=None,
            deadline=None,
            print_blob=False,
            max_examples=self.ctx.spec.hypothesis.max_examples,
            phases=(Phase.explicit, Phase.generate),
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        )
        settings.load_profile("grading")
        # A failure's message comes from its exception (_failure), never from pytest's report of it:
        # without this, pytest formats every failed check's traceback (its source, parsed, and its
        # arguments' reprs), a third of the trusted side's time on a submission that fails many.
        config.option.tbstyle = "no"

    @pytest.fixture(scope="session")
    def grade(self) -> GradeContext:
        return self.ctx

    def _check_of(self, item: pytest.Item) -> str:
        return cast(pytest.Function, item).originalname.removeprefix("test_")  # every check is a function

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """The spec decides what runs: a test that is no check of its items (grade --only) is not run."""
        keep = [i for i in items if self._check_of(i) in self.by_check]
        if len(keep) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in keep])
            items[:] = keep

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        check = self._check_of(item)
        spec_item = self.by_check.get(check)
        if spec_item is None:
            return
        reasons = [self.ctx.broken[f] for f in spec_item.needs if f in self.ctx.broken]
        if reasons:
            pytest.skip("blocked: " + "; ".join(dict.fromkeys(reasons)))
        if time.monotonic() > self.deadline:
            pytest.skip(
                f"blocked: not run, the grade's time budget of {self.ctx.spec.limits.total_timeout_s:g} s ran out"
            )
        self.ctx.worker.begin_check(next(c.title for c in spec_item.checks if c.name == check))

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
            reason = self._skip_reason(call, report)
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
    def _skip_reason(call: pytest.CallInfo, report: pytest.TestReport) -> str:
        """What pytest.skip was given. Not pytest's report of it: within an explicit example,
        Hypothesis notes the example's arguments on the exception, object addresses included,
        and the same zip's feedback would differ from run to run."""
        exc = call.excinfo.value if call.excinfo else None
        if isinstance(exc, pytest.skip.Exception) and exc.msg:
            return exc.msg
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return reason.removeprefix("Skipped: ")

    @staticmethod
    def _failure(exc: BaseException | None, base: dict) -> CheckResult:
        if isinstance(exc, Flaky):  # FlakyFailure too: it is a group of the failures seen
            inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions else None
            result = GradePlugin._failure(inner, base) if inner else None
            detail = f": {result.message}" if result else ""
            return CheckResult(
                status="failed",
                message=f"the same input gave different results on two runs (randomness in the code?){detail}",
                **base,
            )
        example = _example(exc) if exc else None
        if isinstance(exc, CheckFailure):
            return CheckResult(
                status="failed",
                message=exc.message,
                measured=exc.measured,
                tolerance=exc.tolerance,
                where=exc.where,
                example=example,
                diagnosis=exc.diagnosis,
                **base,
            )
        if isinstance(exc, (StudentError, WorkerError)):
            return CheckResult(status="failed", message=str(exc), example=example, **base)
        if isinstance(exc, AssertionError):
            return CheckResult(status="failed", message=str(exc).split("\n")[0], example=example, **base)
        return CheckResult(
            status="error", example=example, message=f"grader error: {type(exc).__name__}: {exc}"[:2000], **base
        )


def run_checks(ctx: GradeContext, deadline: float) -> tuple[dict[str, CheckResult], dict[str, float]]:
    """Run the spec's hidden checks on `ctx` (those of files in ctx.broken are blocked): each
    check's result, and seconds spent per item."""
    # The reference's tensors are tiny, and the workers want the other cores: with a pool of
    # threads, torch.tril on an 8x8 mask took 2.4 ms (a thread descheduled mid-op), not 0.05 ms.
    torch.set_num_threads(1)
    plugin = GradePlugin(ctx, deadline)
    assert ctx.spec.checks_dir is not None  # engine checks: the spec requires it
    checks_dir = REPO / ctx.spec.checks_dir
    # Only the plugins the checks use: autoloading every installed one (anyio, jaxtyping) costs 0.5 s.
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        code = pytest.main(
            [
                str(checks_dir),
                "-p",
                "no:cacheprovider",
                "-p",
                "no:terminal",
                "-p",
                "_hypothesis_pytestplugin",
                "-c",
                str(checks_dir / "pytest.ini"),
                "--rootdir",
                str(checks_dir),
            ],
            plugins=[plugin],
        )
    finally:
        if autoload is None:
            del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
    missing = [c.name for i in ctx.spec.items for c in i.checks if c.name not in plugin.results]
    if missing:
        raise RuntimeError(f"hidden checks did not run (pytest exit {int(code)}): {', '.join(missing)}")
    return plugin.results, plugin.seconds
