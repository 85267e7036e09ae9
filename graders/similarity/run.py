"""One similarity pass over a class: every submission's required files read (never run), the
starter code read from the assignment's template, every pair scored through the fingerprint
index, and OUT/similarity.html, .csv and .json written."""

import time
from dataclasses import dataclass
from pathlib import Path

from graders.paths import REPO
from graders.similarity.compare import Comparison, compare
from graders.similarity.report import write_outputs
from graders.similarity.sources import Submission, read_starter, read_submission, template_dir
from graders.spec import Spec

# What can be compared as Python: a module, or a notebook (percent-format .py or .ipynb).
_PYTHON = (".py", ".ipynb")


@dataclass(frozen=True)
class Options:
    min_score: float = 0.3  # pairs below this are counted in the histogram but not listed
    show: int = 50  # pairs shown side by side in the page (the CSV lists every pair over min_score)
    starter: Path | None = None  # the template folder; default: the assignment's own
    limit: int = 1000  # pairs listed in the CSV at most


def comparable(spec: Spec) -> None:
    """Raise ValueError for an assignment with no Python source (written answers are not code)."""
    other = [n for n in spec.required_files if not any(a.endswith(_PYTHON) for a in spec.accepted(n))]
    if other:
        raise ValueError(f"{spec.assignment}: {', '.join(other)} is not Python source; similarity compares code only")


def _shown(folder: Path) -> str:
    """The starter's folder as staff know it: relative to the repository where it is inside it."""
    folder = folder.resolve()
    return str(folder.relative_to(REPO)) if folder.is_relative_to(REPO) else str(folder)


def run_similarity(students: dict[str, Path], spec: Spec, out: Path, options: Options = Options()) -> Comparison:
    """Compare `students` (name -> zip or folder) on the spec's required files; write the outputs to `out`."""
    comparable(spec)
    started = time.perf_counter()
    submissions: list[Submission] = [read_submission(s, path, spec) for s, path in sorted(students.items())]
    folder = options.starter or template_dir(spec)
    starters, notes = read_starter(spec, folder)
    read = time.perf_counter()
    result = compare(submissions, starters, spec.required_files, options.min_score, options.limit)
    result.notes.extend(notes)
    compared = time.perf_counter()
    write_outputs(result, out, spec.title, options.show, options.min_score, _shown(folder))
    result.timings = {"read_s": read - started, **result.timings, "write_s": time.perf_counter() - compared}
    return result
