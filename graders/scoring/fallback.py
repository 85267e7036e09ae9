"""The report of a grade that could not finish (the grader failed, a batch's grade process died,
Gradescope's budget ran out): score 0, no items, and why, in `grader_error`."""

from pathlib import Path

from graders import __version__
from graders.scoring.results import Results, Submission
from graders.spec import Spec


def fallback_results(source: Path, spec: Spec, reason: str) -> Results:
    return Results(
        assignment=spec.assignment,
        grader_version=__version__,
        submission=Submission(name=source.name, sha256="", files=[]),
        score=0,
        max_score=spec.points(),
        bonus_score=0,
        bonus_max=spec.points(bonus=True),
        items=[],
        grader_error=reason,
    )
