"""One similarity pass over a class: every submission's required files read (never run), the
starter code read (`--starter`, else the spec's `starter`, else the assignment's template), every
pair scored through the fingerprint index, and OUT/similarity.html, .csv and .json written; in a
batch's OUT, summary.html's "Similar code" section is rendered again from the new pass."""

import time
from dataclasses import dataclass, field
from pathlib import Path

from graders.paths import REPO
from graders.reports.summary import refresh_similarity
from graders.similarity.compare import Comparison, compare
from graders.similarity.index import Common
from graders.similarity.report import StarterShown, write_outputs
from graders.similarity.sources import Submission, choose_starter, read_starter, read_submission
from graders.spec import Spec

# What can be compared as Python: a module, or a notebook (percent-format .py or .ipynb).
_PYTHON = (".py", ".ipynb")


@dataclass(frozen=True)
class Options:
    min_score: float = 0.3  # pairs below this are counted in the histogram but not listed
    show: int = 50  # pairs shown side by side in the page (the CSV lists every pair over min_score)
    starter: Path | None = None  # a folder or zip; default: the spec's starter, else the assignment's template
    limit: int = 1000  # pairs of the CSV given their matched lines (the rest: scores only)
    common: Common | None = field(default_factory=Common)  # None: nothing removed as common to the class


def comparable(spec: Spec) -> None:
    """Raise ValueError for an assignment with no Python source (written answers are not code)."""
    other = [n for n in spec.required_files if not any(a.endswith(_PYTHON) for a in spec.accepted(n))]
    if other:
        raise ValueError(f"{spec.assignment}: {', '.join(other)} is not Python source; similarity compares code only")


def _shown(path: Path) -> str:
    """The starter as staff know it: relative to the repository where it is inside it."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def run_similarity(students: dict[str, Path], spec: Spec, out: Path, options: Options = Options()) -> Comparison:
    """Compare `students` (name -> zip or folder) on the spec's required files; write the outputs
    to `out`. ValueError if the starter chosen cannot be read."""
    comparable(spec)
    started = time.perf_counter()
    choice = choose_starter(spec, options.starter)
    starters, notes = read_starter(spec, choice.path)
    submissions: list[Submission] = [read_submission(s, path, spec) for s, path in sorted(students.items())]
    read = time.perf_counter()
    result = compare(submissions, starters, spec.required_files, options.min_score, options.limit, options.common)
    result.notes.extend(notes)
    compared = time.perf_counter()
    shown = StarterShown(_shown(choice.path), choice.origin)
    result.starter = f"{shown.path} ({shown.origin})"
    paths = write_outputs(result, out, spec.title, options.show, options.min_score, shown)
    refresh_similarity(out / "summary.html", paths["json"])
    result.timings = {"read_s": read - started, **result.timings, "write_s": time.perf_counter() - compared}
    return result
