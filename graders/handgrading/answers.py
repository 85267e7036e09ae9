"""Each student's answer to each by-hand part, taken from the submission through intake (its caps
and zip checks; nothing runs): an answers file's entry, a notebook's section, or files against the
starter's, with the evidence the grade measured (A3 3(c): the training run beside the baseline's)."""

import difflib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from graders.handgrading.notebook_text import notebook_cells, section
from graders.handgrading.questions import HandQuestion
from graders.intake.submission import take_in
from graders.paths import REPO
from graders.scoring.results import Results
from graders.spec import Spec

MAX_SHOWN = 40_000  # characters of one section


@dataclass(frozen=True)
class Section:
    label: str
    text: str
    kind: str  # "text", "code", "markdown", "output" or "diff"
    compared: bool = True  # part of what groups compare (a file shown for context is not)


@dataclass(frozen=True)
class Evidence:
    label: str
    theirs: float | None
    baseline: float | None

    @property
    def difference(self) -> float | None:
        return None if self.theirs is None or self.baseline is None else self.theirs - self.baseline


@dataclass(frozen=True)
class Answer:
    sections: tuple[Section, ...] = ()
    missing: str = ""  # why there is no answer to show
    evidence: tuple[Evidence, ...] = ()
    evidence_note: str = ""

    def compared_text(self) -> str:
        return "\n".join(s.text for s in self.sections if s.compared)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"\n… {len(text) - MAX_SHOWN} characters left out"


def _answers_entries(files: dict[str, Path], problems: dict[str, str], name: str) -> dict | str:
    """The answers file's entries, or why there are none."""
    from graders.written.answerfile import AnswersProblem, load_answers  # yaml: a written assignment only

    if name not in files:
        return problems.get(name, f"{name} missing from the submission")
    try:
        return load_answers(files[name]).entries
    except AnswersProblem as e:
        return str(e)


def _from_answers_file(q: HandQuestion, entries: dict | str, name: str) -> Answer:
    if isinstance(entries, str):
        return Answer(missing=entries)
    entry = entries.get(q.id)
    if entry is None:
        return Answer(missing=f"{name} has no answer to {q.id}")
    if isinstance(entry, dict):
        text = "\n".join(f"{part}: {a.text}" for part, a in entry.items())
    else:
        text = entry.text if entry.problem is None else f"({entry.problem})"
    return Answer((Section("answer", _clip(text.strip()), "text"),))


def _from_notebook(q: HandQuestion, path: Path) -> Answer:
    cells = notebook_cells(path)
    found = section(cells, q.answer.heading)
    note = (
        "" if found is not None else f"no markdown cell names '{q.answer.heading}': the notebook's last cells are shown"
    )
    shown = found if found is not None else cells[-3:]
    sections = []
    for cell in shown:
        label = f"{'markdown' if cell.kind == 'markdown' else 'code'} cell"
        sections.append(Section(label, _clip(cell.text), cell.kind))
        if cell.outputs:
            sections.append(Section("its saved output", _clip(cell.outputs), "output", compared=False))
    return Answer(tuple(sections), missing=note if not sections else "", evidence_note=note)


def _diff(name: str, starter: Path, text: str, compared: bool) -> Section:
    theirs = text.splitlines(keepends=True)
    given = starter.read_text(encoding="utf-8").splitlines(keepends=True) if starter.is_file() else []
    lines = list(difflib.unified_diff(given, theirs, f"starter/{name}", name, n=2))
    body = "".join(lines) if lines else "(the same as the starter's)"
    return Section(f"{name} against the starter's", _clip(body), "diff", compared)


def _from_changes(q: HandQuestion, files: dict[str, Path], problems: dict[str, str]) -> Answer:
    """The first file's changes are what groups compare (A3: train.py, given complete, so its diff
    is exactly the student's changes); the others are shown for context."""
    sections = []
    for i, name in enumerate(q.answer.files):
        if name not in files:
            sections.append(Section(name, problems.get(name, f"{name} missing"), "text", compared=i == 0))
            continue
        text = files[name].read_text(encoding="utf-8", errors="replace")
        sections.append(_diff(name, REPO / q.answer.starter / name, text, compared=i == 0))
    return Answer(tuple(sections))


def training_evidence(results: Results | None) -> tuple[tuple[Evidence, ...], str]:
    """The grade's run of the student's own train() beside the baseline's (the starter's train.py
    on the reference model, same data and seed), as results.json holds them."""
    t = results.training if results is not None else None
    if t is None or (t.final_loss is None and not t.recorded_losses):
        return (), (
            "not measured: this grade's results.json has no training run (regrade it with "
            "`grade batch INPUT --out OUT --only '3(b)iii'`, which keeps every other result and every mark)"
        )
    last = next((x for x in reversed(t.recorded_losses or []) if x is not None), None)
    steps = f" after {t.steps} steps" if t.steps is not None else ""
    return (
        Evidence(f"final training loss{steps}", last, t.reference_losses[-1] if t.reference_losses else None),
        Evidence(f"held-out loss{steps}, recomputed by the grader", t.final_loss, t.reference_final_loss),
    ), ""


def _one(spec: Spec, q: HandQuestion, files: dict[str, Path], problems: dict[str, str], entries: dict | str) -> Answer:
    if q.answer.source == "answers":
        return _from_answers_file(q, entries, spec.answers_file())
    if q.answer.source == "notebook":
        notebook = next((files[n] for n in spec.notebooks if n in files), None)
        return _from_notebook(q, notebook) if notebook else Answer(missing="; ".join(problems.values()))
    return _from_changes(q, files, problems)


def extract(
    spec: Spec, questions: list[HandQuestion], source: Path | None, results: Results | None
) -> dict[str, Answer]:
    """One student's answers to `questions`, from one intake of the submission; never raises for
    a bad submission (the reason is the answer)."""
    if source is None or not source.exists():
        return {
            q.id: Answer(missing="the submission is not where the batch found it (sources.json)") for q in questions
        }
    with tempfile.TemporaryDirectory(prefix="grade-hand-") as tmp:
        intake = take_in(source, spec.required_files, Path(tmp) / "files", spec.alternatives, spec.notebooks)
        if intake.rejected:
            return {q.id: Answer(missing=intake.rejected) for q in questions}
        wants_answers = any(q.answer.source == "answers" for q in questions)
        entries = _answers_entries(intake.files, intake.problems, spec.answers_file()) if wants_answers else {}
        found = {q.id: _one(spec, q, intake.files, intake.problems, entries) for q in questions}
    for q in questions:
        if q.answer.evidence == "training":
            evidence, note = training_evidence(results)
            a = found[q.id]
            found[q.id] = Answer(a.sections, a.missing, evidence, note)
    return found
