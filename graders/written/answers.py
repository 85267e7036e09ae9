"""A student's answers.yaml graded against the key, part by part.

The file is read by answerfile.py and each answer by reading.py, as the preview reads it; anything
wrong with one answer (a list, an unknown name, an ambiguous product) costs that part only.
Messages say how the answer was read and what kind of answer was expected, never the key's value.
"""

import math

from graders.scoring.results import CheckResult
from graders.written.answerfile import Answer, Answers
from graders.written.expressions import ExpressionError, Reading, number_value, same, same_order
from graders.written.key import AnswerKey, Part, Question, check_name, key_forms, part_form
from graders.written.reading import alias_notes, at, describe, find_answer, read_answer, shown, unknown_ids


def answer_warnings(key: AnswerKey, answers: Answers) -> list[str]:
    """Question and part ids in answers.yaml that the key does not have (likely typos), and each
    name read through an alias (dk for d_k: full marks, but the student should know)."""
    return unknown_ids(key_forms(key), answers) + _alias_warnings(key, answers)


def _alias_warnings(key: AnswerKey, answers: Answers) -> list[str]:
    notes = []
    for q in key.questions:
        for p in q.parts:
            form = part_form(q, p)
            found = find_answer(form, answers) if form.kind in ("number", "expression") else None
            if isinstance(found, Answer):
                try:
                    notes += alias_notes(form, answers, found, read_answer(form, found))
                except ExpressionError:
                    pass  # the part's own message says why it cannot be read
    return notes


def _tolerance_text(part: Part) -> str:
    def fmt(x: float) -> str:
        return f"{x:g}".replace("e-0", "e-")

    abs_tol, rel_tol = part.tolerance()
    shown = [f"abs {fmt(abs_tol)}" if abs_tol else "", f"rel {fmt(rel_tol)}" if rel_tol else ""]
    return " or ".join(s for s in shown if s) or "exact"


def _judge_number(part: Part, reading: Reading) -> tuple[bool, str]:
    try:
        given = number_value(reading.expr)
    except OverflowError:
        given = math.inf
    expected = part.number
    assert expected is not None  # only number parts come here
    abs_tol, rel_tol = part.tolerance()
    if abs(given - expected) <= max(abs_tol, rel_tol * abs(expected)):
        return True, "matches the key"
    return False, f"is not within the tolerance ({_tolerance_text(part)}) of the key"


def _judge_expression(part: Part, reading: Reading) -> tuple[bool, str]:
    if part.complexity:
        if same_order(part.expected(), reading.expr):
            return True, "is the key's complexity (up to a constant factor)"
        return False, "is not the key's complexity"
    if same(part.expected(), reading.expr):
        return True, "is equivalent to the key's"
    return False, "is not equivalent to the key's"


def _as_read(text: str, reading: str) -> str:
    """The answer, and beside it how it was read where that is not just the same text."""
    same_text = "".join(text.split()) == "".join(reading.split())
    return shown(text) if same_text else f"{shown(text)} (read as {reading})"


def _grade_part(question: Question, part: Part, answers: Answers) -> CheckResult:
    form = part_form(question, part)
    found = find_answer(form, answers)
    common = dict(name=check_name(question, part), title=part.rubric, weight=part.weight)
    if isinstance(found, str):
        return CheckResult(status="failed", message=found, **common)
    try:
        reading = read_answer(form, found)
    except ExpressionError as e:
        message = f"{at(form, answers, found)}: your answer {shown(found.text)} {e}"
        return CheckResult(status="failed", message=message, **common)
    noun = "answer" if part.number is not None else "expression"
    passed, verdict = (_judge_number if part.number is not None else _judge_expression)(part, reading)
    return CheckResult(
        status="passed" if passed else "failed",
        message=f"{form.label}: your {noun} {_as_read(found.text, describe(form, reading, aliases=False))} {verdict}",
        **common,
    )


def grade_answers(key: AnswerKey, answers: Answers) -> dict[str, CheckResult]:
    """One result per number or expression part, by its check name (key_items' checks); manual
    questions have none: they are graded by hand."""
    return {
        check_name(q, p): _grade_part(q, p, answers)
        for q in key.questions
        if not q.manual
        for p in q.parts
        if p.code is None  # graded by running the submitted .py (graders/written/code.py)
    }
