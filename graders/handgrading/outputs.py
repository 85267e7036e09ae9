"""The batch's views with the by-hand marks in them: grades.csv, each marked student's
report.html and summary.html, rewritten from the store and the stored results.json files (after
`grade batch`, after a sheet import, and while the app runs, as marks change)."""

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from graders.deploy.gradebook import gradebook_row, write_gradebook
from graders.handgrading.marks import Marks
from graders.handgrading.progress import HandProgress, hand_progress
from graders.handgrading.questions import hand_questions
from graders.handgrading.store import load_marks
from graders.reports.html import write_report
from graders.reports.summary import write_summary
from graders.scoring.results import Results
from graders.spec import Spec


@dataclass(frozen=True)
class HandViews:
    marks: Marks
    progress: list[HandProgress]
    finals: dict[str, float]  # each student's total with the marks entered (grades.csv's total)


def hand_views(spec: Spec, students: list[str], graded: dict[str, Results], marks: Marks) -> HandViews | None:
    """None for an assignment with nothing graded by hand."""
    questions = hand_questions(spec)
    if not questions:
        return None
    rows = {s: gradebook_row(spec, graded[s], marks.get(s, {})) for s in students if s in graded}
    finals = {s: float(row[0]) for s, row in rows.items()} if marks else {}  # nothing entered: nothing to add
    return HandViews(marks, hand_progress(questions, students, marks), finals)


def write_marked_reports(out: Path, graded: dict[str, Results], marks: Marks, students: Iterable[str]) -> None:
    """report.html of each of `students` with its marks (a student whose marks were cleared too)."""
    for student in students:
        if student in graded:
            write_report(graded[student], out / student, hand=marks.get(student, {}))


def write_views(
    out: Path, spec: Spec, students: list[str], graded: dict[str, Results], reports: Iterable[str] | None = None
) -> Marks:
    """grades.csv and summary.html of the class, and report.html of `reports` (None: every student
    with a mark), from the marks stored now. The marks, as written."""
    marks = load_marks(out)
    write_gradebook(out / "grades.csv", spec, students, graded, marks)
    write_marked_reports(out, graded, marks, marks.keys() if reports is None else reports)
    unfinished = {s: r.grader_error for s, r in graded.items() if r.grader_error}
    missing = {s: "no readable results.json" for s in students if s not in graded}
    views = hand_views(spec, students, graded, marks)
    write_summary(
        {s: r for s, r in graded.items() if s not in unfinished},
        {**unfinished, **missing},
        out / "summary.html",
        spec.title,
        hand=views.progress if views else None,
        finals=views.finals if views else None,
    )
    return marks
