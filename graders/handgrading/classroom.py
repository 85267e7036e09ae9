"""A graded batch's OUT as `grade hand` sees it: the assignment's spec and by-hand questions, the
students (OUT/sources.json, else the folders with a results.json), each one's results and answers,
and the groups of each question's answers."""

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from graders.deploy.sources import read_sources
from graders.handgrading.answers import Answer, extract
from graders.handgrading.grouping import Group, group_answers
from graders.handgrading.questions import HandQuestion, hand_questions
from graders.scoring.results import Results
from graders.spec import Spec, load_spec, spec_path


@dataclass
class Classroom:
    out: Path
    spec: Spec
    questions: list[HandQuestion]
    students: list[str]
    sources: dict[str, Path]
    results: dict[str, Results]
    answers: dict[str, dict[str, Answer]] = field(default_factory=dict)  # question -> student -> answer
    groups: dict[str, list[Group]] = field(default_factory=dict)

    def question(self, qid: str) -> HandQuestion | None:
        return next((q for q in self.questions if q.id == qid), None)

    def reload_results(self, student: str) -> Results | None:
        """results.json as it is now (a regrade may have rewritten it since the app started)."""
        r = read_results(self.out / student / "results.json")
        if r is not None:
            self.results[student] = r
        return self.results.get(student)


def read_results(path: Path) -> Results | None:
    try:
        return Results.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def _students(out: Path, assignment: str | None) -> tuple[str, dict[str, Path]]:
    """The batch's assignment and students: sources.json's, or the folders graded in OUT."""
    try:
        found, sources = read_sources(out)
    except ValueError:
        found, sources = "", {}
    graded = {d.name for d in out.iterdir() if (d / "results.json").is_file()} if out.is_dir() else set()
    students = {s: sources.get(s, Path(out / s / "missing")) for s in sorted(set(sources) | graded)}
    chosen = assignment or found
    if not chosen:
        raise ValueError(f"{out}: no sources.json to say which assignment it is: give --assignment")
    return chosen, students


def load_classroom(out: Path, assignment: str | None = None, answers: bool = True) -> Classroom:
    """ValueError (or SpecError) where OUT is no graded batch; `answers` False skips reading the
    submissions (a sheet import or the gradebook need only the students and their results)."""
    name, sources = _students(out, assignment)
    spec = load_spec(spec_path(name))
    questions = hand_questions(spec)
    if not sources:
        raise ValueError(f"{out}: no graded submission (run `grade batch FOLDER --out {out}` first)")
    results = {s: r for s in sources if (r := read_results(out / s / "results.json")) is not None}
    room = Classroom(out, spec, questions, sorted(sources), sources, results)
    if answers:
        read_answers(room)
    return room


def read_answers(room: Classroom) -> None:
    """Every student's answer to every by-hand question, and each question's groups."""
    started = time.monotonic()
    by_student = {
        s: extract(room.spec, room.questions, room.sources.get(s), room.results.get(s)) for s in room.students
    }
    for q in room.questions:
        room.answers[q.id] = {s: by_student[s][q.id] for s in room.students}
        room.groups[q.id] = group_answers({s: a.compared_text() for s, a in room.answers[q.id].items()})
    took = time.monotonic() - started
    print(
        f"grade hand: {len(room.students)} students, {len(room.questions)} by-hand parts read in {took:.1f} s",
        file=sys.stderr,
    )
