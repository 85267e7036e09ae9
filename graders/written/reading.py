"""How the grader reads one answer of answers.yaml, for a part described by a PartForm: its kind,
its names and whether it is a complexity. The grade (answers.py) and the preview students run
before they submit (preview.py) read every answer through here, so the reading a student
previews is the one that is graded.

This module and what it imports (answerfile, yamlsafe, expressions, mathparse, mathlex) need
only sympy and PyYAML: the written templates ship them for `make selfcheck` (template.py).
"""

import math
from dataclasses import dataclass, field
from typing import Literal

import sympy as sp

from graders.written.answerfile import Answer, Answers
from graders.written.expressions import ExpressionError, Reading, number_value, read_expression

Kind = Literal["number", "expression", "code", "manual"]
_SHOWN = 60  # characters of a student's answer repeated in a message


@dataclass(frozen=True)
class PartForm:
    """What a part asks for, without its answer: safe to give students (the templates' parts.json)."""

    question: str  # the question id
    part: str | None  # the part id; None for a manual question, which has no parts
    label: str  # how answers.yaml and the messages name it: 2a.cost, or 1a for a question's only part
    kind: Kind
    symbols: tuple[str, ...] = ()
    complexity: bool = False  # O(...) or Theta(...) accepted, compared up to a positive constant
    siblings: tuple[str, ...] = field(default=(), compare=False)  # the question's part ids, in order
    function: str | None = None  # a code part: the function of the submitted .py it runs


def shown(text: str) -> str:
    """A student's answer as repeated in a message: one line, at most _SHOWN characters."""
    text = text.strip().replace("\n", " ")
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def at(form: PartForm, answers: Answers, answer: Answer) -> str:
    return f"{form.label} ({answers.source} line {answer.line})"


def find_answer(form: PartForm, answers: Answers) -> Answer | str:
    """The part's answer, or the message saying why there is none to read."""
    entry = answers.entries.get(form.question)
    missing = f"no answer for {form.label} in {answers.source}"
    if isinstance(entry, dict):
        entry = entry.get(form.part or "")
    elif entry is not None and len(form.siblings) > 1:
        return (
            f"{at(form, answers, entry)}: question {form.question} has parts {', '.join(form.siblings)}: "
            f"answer each under {form.question}: on its own line, e.g. `  {form.part}: ...`"
        )
    if entry is None:
        return missing
    if entry.problem:
        return f"{at(form, answers, entry)}: {entry.problem}"
    if entry.value is None or (isinstance(entry.value, str) and not entry.value.strip()):
        return missing
    return entry


def _not_a_value(value: object, kind: str) -> str | None:
    """Why a YAML value cannot be a number or an expression, if it cannot."""
    if isinstance(value, bool):  # YAML reads yes/no/true/on as booleans
        return f"is a yes/no value, not {kind}"
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if not isinstance(value, (int, float, str)):
        return f"is {type(value).__name__} data, not {kind}"
    return None


def read_answer(form: PartForm, answer: Answer) -> Reading:
    """How the grader reads a number or expression part's answer. The text as written is read, not
    YAML's number: YAML 1.1 reads 010 as 8 and 1:30 as 90. Raises ExpressionError."""
    kind = "a number" if form.kind == "number" else "an expression"
    if (why := _not_a_value(answer.value, kind)) is not None:
        raise ExpressionError(why)
    names = form.symbols if form.kind == "expression" else ()
    reading = read_expression(answer.text, names, aliases=True)
    if reading.bound == "Omega":
        raise ExpressionError("is written as Ω(...), a lower bound: give the cost as O(...)")
    if reading.bound is not None and not form.complexity:
        raise ExpressionError(
            f"is written as a complexity, {reading.bound}(...), but this part asks for an exact answer: "
            f"leave out the {reading.bound}(...)"
        )
    if form.kind == "number":
        number_value(reading.expr)  # a number part's answer must have a value: this raises if not
    return reading


def value_text(expr: sp.Expr) -> str:
    """A number part's reading as a value: 1048576, 0.5, 3.14159265359."""
    value = number_value(expr)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return f"{value:.12g}"


def describe(form: PartForm, reading: Reading, aliases: bool = True) -> str:
    """The reading as the preview and the report show it: "n**2*d", "4*512**2 = 1048576", and with
    `aliases` those named ("d_k (dk read as d_k)"; the report has them among its warnings)."""
    text = reading.shown
    if form.kind == "number" and reading.expr.is_number:
        value = value_text(reading.expr)
        text = text if value == text else f"{text} = {value}"
    if aliases and reading.aliases:
        text += " (" + ", ".join(f"{written} read as {name}" for written, name in reading.aliases) + ")"
    return text


def alias_notes(form: PartForm, answers: Answers, answer: Answer, reading: Reading) -> list[str]:
    """One warning per alias: not a loss, but the student should write the part's name."""
    return [
        f"{at(form, answers, answer)}: {written!r} was read as {name}, the name this part uses; write {name}"
        for written, name in reading.aliases
    ]


def unknown_ids(forms: list[PartForm], answers: Answers) -> list[str]:
    """Question and part ids in answers.yaml that the assignment does not have (likely typos)."""
    questions: dict[str, tuple[str, ...]] = {}
    for form in forms:
        questions.setdefault(form.question, form.siblings)
    warnings = []
    for qid, entry in answers.entries.items():
        if qid not in questions:
            warnings.append(
                f"{answers.source} line {answers.lines[qid]}: {qid!r} is not a question of this assignment "
                f"(the questions are {', '.join(questions)}); it was not graded"
            )
        elif isinstance(entry, dict) and questions[qid]:
            warnings += [
                f"{answers.source} line {answer.line}: question {qid} has no part {pid!r} "
                f"(its parts are {', '.join(questions[qid])}); it was not graded"
                for pid, answer in entry.items()
                if pid not in questions[qid]
            ]
    return warnings
