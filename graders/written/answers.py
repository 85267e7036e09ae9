"""A student's answers.yaml, read as hostile input, and its grade against the key, part by part.

A file that cannot be read at all (too big, not YAML, anchors, tags, not a mapping) raises
AnswersProblem; anything wrong with one answer (a list, an unknown name, an unreadable number)
costs that part only. Messages say what kind of answer was expected, never the key's value.
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import sympy as sp
import yaml

from graders.scoring.results import CheckResult
from graders.written import yamlsafe
from graders.written.expressions import ExpressionError, number_value, parse_expression, same
from graders.written.key import AnswerKey, Part, Question, check_name

ANSWER_CAPS = yamlsafe.Caps(max_bytes=256 << 10, max_depth=8, max_nodes=5_000)
_SHOWN = 60  # characters of a student's answer repeated in a message


class AnswersProblem(Exception):
    """answers.yaml cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class Answer:
    value: object  # as YAML read it: str, int, float, bool, None (or a date...)
    line: int
    problem: str | None = None  # why it cannot be graded, e.g. a list where one value belongs
    text: str = ""  # as the student wrote it ("yes", not True), for the messages


@dataclass(frozen=True)
class Answers:
    source: str
    entries: dict[str, "Answer | dict[str, Answer]"]  # question id -> its answer, or part id -> answer
    lines: dict[str, int]  # question id -> the line it is on


def _kind(node: yaml.Node) -> str:
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"


def _answer(node: yaml.Node, source: str) -> Answer:
    line = yamlsafe.line(node)
    if not isinstance(node, yaml.ScalarNode):
        return Answer(None, line, f"{_kind(node)} is not an answer: give one number or expression")
    try:
        return Answer(yamlsafe.scalar(node, source), line, text=node.value)
    except yamlsafe.YamlProblem as e:
        return Answer(None, line, str(e).removeprefix(f"{source} line {line}: "))


def read_answers(data: bytes, source: str = "answers.yaml") -> Answers:
    try:
        root = yamlsafe.compose(data, source, ANSWER_CAPS)
        if root is None:
            return Answers(source, {}, {})
        if not isinstance(root, yaml.MappingNode):
            raise AnswersProblem(
                f"{source} line {yamlsafe.line(root)}: the file must map question ids to answers, e.g. `1a: 64`"
            )
        entries: dict[str, Answer | dict[str, Answer]] = {}
        lines: dict[str, int] = {}
        for qid, (key_node, node) in yamlsafe.mapping(root, source).items():
            lines[qid] = yamlsafe.line(key_node)
            if isinstance(node, yaml.MappingNode):
                entries[qid] = {pid: _answer(v, source) for pid, (_, v) in yamlsafe.mapping(node, source).items()}
            else:
                entries[qid] = _answer(node, source)
        return Answers(source, entries, lines)
    except yamlsafe.YamlProblem as e:
        raise AnswersProblem(str(e)) from None


def load_answers(path: Path) -> Answers:
    try:
        with open(path, "rb") as fh:  # never more than the cap (plus one byte, to tell it was over)
            data = fh.read(ANSWER_CAPS.max_bytes + 1)
    except OSError as e:
        raise AnswersProblem(f"{path.name}: cannot be read ({e.strerror})") from None
    return read_answers(data, path.name)


def answer_warnings(key: AnswerKey, answers: Answers) -> list[str]:
    """Question and part ids in answers.yaml that the key does not have (likely typos)."""
    known = {q.id: q for q in key.questions}
    warnings = []
    for qid, entry in answers.entries.items():
        where = f"{answers.source} line {answers.lines[qid]}"
        if qid not in known:
            warnings.append(
                f"{where}: {qid!r} is not a question of this assignment "
                f"(the questions are {', '.join(known)}); it was not graded"
            )
        elif isinstance(entry, dict) and known[qid].parts:
            parts = [p.id for p in known[qid].parts]
            for pid, answer in entry.items():
                if pid not in parts:
                    warnings.append(
                        f"{answers.source} line {answer.line}: question {qid} has no part {pid!r} "
                        f"(its parts are {', '.join(parts)}); it was not graded"
                    )
    return warnings


def _shown(text: str) -> str:
    text = text.strip().replace("\n", " ")
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _tolerance_text(part: Part) -> str:
    def fmt(x: float) -> str:
        return f"{x:g}".replace("e-0", "e-")

    abs_tol, rel_tol = part.tolerance()
    shown = [f"abs {fmt(abs_tol)}" if abs_tol else "", f"rel {fmt(rel_tol)}" if rel_tol else ""]
    return " or ".join(s for s in shown if s) or "exact"


def _not_a_value(value: object, kind: str) -> str | None:
    """Why a YAML value cannot be a number or an expression, if it cannot."""
    if isinstance(value, bool):  # YAML reads yes/no/true/on as booleans
        return f"is a yes/no value, not {kind}"
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if not isinstance(value, (int, float, str)):
        return f"is {type(value).__name__} data, not {kind}"
    return None


def _judge_number(part: Part, value: object) -> tuple[bool, str]:
    if (why := _not_a_value(value, "a number")) is not None:
        raise ExpressionError(why)
    if isinstance(value, str):
        given = number_value(parse_expression(value, ()))
    else:
        try:
            given = float(cast(int | float, value))  # _not_a_value let through nothing else
        except OverflowError:
            given = math.inf
    expected = part.number
    assert expected is not None  # only number parts come here
    abs_tol, rel_tol = part.tolerance()
    if abs(given - expected) <= max(abs_tol, rel_tol * abs(expected)):
        return True, "matches the key"
    return False, f"is not within the tolerance ({_tolerance_text(part)}) of the key"


def _judge_expression(part: Part, value: object) -> tuple[bool, str]:
    if (why := _not_a_value(value, "an expression")) is not None:
        raise ExpressionError(why)
    if isinstance(value, str):
        given = parse_expression(value, part.symbols)
    else:  # a bare YAML number: the constant expression it is, exactly as written
        given = sp.Integer(value) if isinstance(value, int) else sp.Rational(repr(value))
    if same(part.expected(), given):
        return True, "is equivalent to the key's"
    return False, "is not equivalent to the key's"


def _find(question: Question, part: Part, answers: Answers) -> Answer | str:
    """The part's answer, or the message saying why there is none to grade."""
    entry = answers.entries.get(question.id)
    missing = f"no answer for {question.label(part)} in {answers.source}"
    if isinstance(entry, dict):
        entry = entry.get(part.id)
    elif entry is not None and len(question.parts) > 1:
        parts = ", ".join(p.id for p in question.parts)
        return (
            f"{_at(question, part, answers, entry)}: question {question.id} has parts {parts}: "
            f"answer each under {question.id}: on its own line, e.g. `  {part.id}: ...`"
        )
    if entry is None:
        return missing
    if entry.problem:
        return f"{_at(question, part, answers, entry)}: {entry.problem}"
    if entry.value is None or (isinstance(entry.value, str) and not entry.value.strip()):
        return missing
    return entry


def _at(question: Question, part: Part, answers: Answers, answer: Answer) -> str:
    return f"{question.label(part)} ({answers.source} line {answer.line})"


def _grade_part(question: Question, part: Part, answers: Answers) -> CheckResult:
    found = _find(question, part, answers)
    common = dict(name=check_name(question, part), title=part.rubric, weight=part.weight)
    if isinstance(found, str):
        return CheckResult(status="failed", message=found, **common)
    noun = "answer" if part.number is not None else "expression"
    judge = _judge_number if part.number is not None else _judge_expression
    try:
        passed, verdict = judge(part, found.value)
    except ExpressionError as e:
        return CheckResult(
            status="failed",
            message=f"{_at(question, part, answers, found)}: your answer {_shown(found.text)} {e}",
            **common,
        )
    return CheckResult(
        status="passed" if passed else "failed",
        message=f"{question.label(part)}: your {noun} {_shown(found.text)} {verdict}",
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
