"""The class summary of a batch (`OUT/summary.html`): what the class scored, which checks it
struggles with and why, how long grading took, and which submissions need a person's look.

Built only from the stored results.json files, so it can be re-rendered without regrading."""

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from graders.handgrading.progress import HandProgress
from graders.reports.html import data_uri, env, figure_png
from graders.scoring.results import Results

# Measured values differ per student; grouping failures by message with numbers blanked shows the
# common mistake ("... off by # at batch #, position #") instead of one row per student.
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# What graders/similarity/ leaves beside the summary: its counts and top pairs, for the "Similar
# code" section (the summary reads the file, never the similarity package: reports stay views).
SIMILARITY_FILE = "similarity.json"
_SECTION = re.compile(r"<!-- similar-code -->.*?<!-- /similar-code -->", re.S)  # summary_similarity.html.j2


def message_kind(message: str) -> str:
    return _NUMBER.sub("#", message.strip())[:300]


@dataclass
class CheckRate:
    name: str
    title: str
    passed: int = 0
    ran: int = 0
    blocked: int = 0  # could not run: the submission's files were unusable (counted apart)
    failures: Counter = field(default_factory=Counter)
    example: dict[str, str] = field(default_factory=dict)

    @property
    def percent(self) -> float:
        return round(100 * self.passed / self.ran, 1) if self.ran else 0.0

    def common_failure(self) -> tuple[str, int] | None:
        """The most common failing message (an actual one, numbers and all) and how many got it;
        ties go to the message that sorts first, so the page is the same every time."""
        if not self.failures:
            return None
        kind, count = min(self.failures.items(), key=lambda kv: (-kv[1], kv[0]))
        return self.example[kind], count


@dataclass
class ItemRate:
    id: str
    title: str
    max_score: float
    scores: list[float] = field(default_factory=list)
    full: int = 0
    checks: dict[str, CheckRate] = field(default_factory=dict)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores) if self.scores else 0.0

    @property
    def full_percent(self) -> float:
        return round(100 * self.full / len(self.scores), 1) if self.scores else 0.0


def item_rates(graded: dict[str, Results]) -> list[ItemRate]:
    rates: dict[str, ItemRate] = {}
    for student in sorted(graded):
        problems = [p for p in graded[student].problems.values() if p]
        for item in graded[student].items:
            rate = rates.setdefault(item.id, ItemRate(item.id, item.title, item.max_score))
            if item.status != "manual":
                rate.scores.append(item.score)
                # Full marks; for an item worth no points (a warning, a sanity check): passed.
                rate.full += item.status == "passed" if item.max_score == 0 else item.score >= item.max_score
            for check in item.checks:
                c = rate.checks.setdefault(check.name, CheckRate(check.name, check.title or check.name))
                if check.status == "not_applicable":
                    continue
                if check.status != "passed" and any(p in check.message for p in problems):
                    c.blocked += 1
                    continue
                c.ran += 1
                if check.status == "passed":
                    c.passed += 1
                else:
                    kind = message_kind(check.message)
                    c.failures[kind] += 1
                    c.example.setdefault(kind, check.message)
    return list(rates.values())


def diagnosis_counts(graded: dict[str, Results]) -> list[tuple[str, str, str, int]]:
    """(item, diagnosis id, explanation, how many students) for every known mistake diagnosed in the
    class, most common first: what to go over in the next section."""
    seen: Counter = Counter()
    text: dict[tuple[str, str], str] = {}
    for results in graded.values():
        mine = {
            (item.id, c.diagnosis.id): c.diagnosis.explanation
            for item in results.items
            for c in item.checks
            if c.diagnosis
        }
        seen.update(mine.keys())
        text.update(mine)
    return [
        (item, name, text[(item, name)], n) for (item, name), n in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def _histogram(values: list[float], bins: list[float], xlabel: str, color: str) -> bytes:
    from matplotlib.figure import Figure  # 0.6 s to import: only when a plot is drawn
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6.5, 2.8), dpi=100)
    ax = fig.add_subplot()
    ax.hist(values, bins=bins, color=color, edgecolor="white")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("submissions")
    cast(MaxNLocator, ax.yaxis.get_major_locator()).set_params(integer=True)  # matplotlib's default locator
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return figure_png(fig)


def _bins(top: float, count: int) -> list[float]:
    top = max(top, 1e-9)
    return [top * i / count for i in range(count + 1)]


def _plots(totals: dict[str, float], max_score: float, times: dict[str, float]) -> tuple[bytes | None, bytes | None]:
    """The histograms of total scores and of grading times (None for an empty one)."""
    score_plot = (
        _histogram(
            list(totals.values()),
            _bins(max_score, min(15, int(max_score) or 1)),
            f"total score (out of {max_score:g})",
            "#4477aa",
        )
        if totals
        else None
    )
    time_plot = (
        _histogram(
            list(times.values()),
            _bins(max(times.values(), default=1.0) * 1.05, 12),
            "grading time per submission (s)",
            "#228833",
        )
        if times
        else None
    )
    return score_plot, time_plot


def read_similarity(folder: Path) -> dict | None:
    """The similarity pass's summary in `folder`, if one was run there and its file is readable."""
    try:
        data = json.loads((folder / SIMILARITY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("top"), list) else None


def refresh_similarity(summary: Path, similarity: Path) -> bool:
    """summary.html's "Similar code" section rendered again from `similarity` (the JSON a new
    similarity pass wrote beside it), the rest of the page as it was. False where there is no
    summary there, or one without the section's marks (older: `grade batch` writes it anew)."""
    try:
        page = summary.read_text(encoding="utf-8")
    except OSError:
        return False
    section = env.get_template("summary_similarity.html.j2").render(similarity=read_similarity(similarity.parent))
    page, found = _SECTION.subn(lambda _: section.strip(), page, count=1)
    if found:
        summary.write_text(page, encoding="utf-8")
    return bool(found)


def render_summary(
    graded: dict[str, Results],
    failed: dict[str, str],
    title: str,
    similarity: dict | None = None,
    engine: str = "",
    hand: list[HandProgress] | None = None,
    finals: dict[str, float] | None = None,
) -> str:
    """`graded`: each student's results; `failed`: students whose grade did not finish, and why;
    `similarity`: read_similarity's, when the class was compared; `engine`: a Dask one, described;
    `hand`: the by-hand parts' progress, and `finals` each student's total with the marks entered."""
    totals = {s: r.score for s, r in graded.items()}
    max_score = max((r.max_score for r in graded.values()), default=0.0)
    times = {s: t for s, r in graded.items() if (t := r.timings.get("total_s")) is not None}
    attention = sorted(
        (s, r.grader_error or "; ".join(f"{k}: {v}" for k, v in sorted(r.problems.items())))
        for s, r in graded.items()
        if r.grader_error or r.problems
    )
    score_plot, time_plot = _plots(totals, max_score, times)
    return env.get_template("summary.html.j2").render(
        sandbox_warnings=sorted(Counter(w for r in graded.values() if (w := r.sandbox_warning)).items()),
        title=title,
        engine=engine,
        count=len(graded) + len(failed),
        graded=len(graded),
        max_score=max_score,
        mean=statistics.fmean(totals.values()) if totals else 0.0,
        median=statistics.median(totals.values()) if totals else 0.0,
        full=sum(1 for r in graded.values() if r.score >= r.max_score),
        items=item_rates(graded),
        diagnoses=diagnosis_counts(graded),
        score_plot=data_uri(score_plot) if score_plot else None,
        time_plot=data_uri(time_plot) if time_plot else None,
        time_median=statistics.median(times.values()) if times else None,
        time_total=sum(times.values()),
        slowest=sorted(times.items(), key=lambda kv: (-kv[1], kv[0]))[:5],
        failed=sorted(failed.items()),
        attention=attention,
        students=sorted(graded.items()),
        similarity=similarity,
        hand=hand or [],
        finals=finals or {},
        finals_mean=statistics.fmean(finals.values()) if finals else None,
    )


def write_summary(
    graded: dict[str, Results],
    failed: dict[str, str],
    path: Path,
    title: str,
    engine: str = "",
    hand: list[HandProgress] | None = None,
    finals: dict[str, float] | None = None,
) -> Path:
    page = render_summary(graded, failed, title, read_similarity(path.parent), engine, hand, finals)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(page, encoding="utf-8")
    partial.replace(path)
    return path
