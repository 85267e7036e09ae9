"""The by-hand parts of an assignment: its spec's manual items, each with its maximum, the prompt
(a written key's question) and its rubric lines as the rubric items a TA starts from."""

import re
from dataclasses import dataclass

from graders.spec import HandAnswer, Spec, assignment_dir

# "2 points: ...", "1 pt: ...", "0.5 point - ...": a key's rubric line that says what it is worth.
_POINTS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:points?|pts?)\s*[:\-–]\s*(.+)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class HandQuestion:
    id: str
    title: str
    max: float
    bonus: bool
    answer: HandAnswer
    prompt: str = ""
    rubric: tuple[tuple[str, float], ...] = ()  # (text, points), the starting rubric items


def rubric_item(line: str) -> tuple[str, float]:
    """A rubric line as an item: its text and the points it states (0 where it states none)."""
    m = _POINTS.match(line)
    text = " ".join(line.split())
    return (" ".join(m[2].split()), float(m[1])) if m else (text, 0.0)


def _prompts(spec: Spec) -> dict[str, str]:
    if spec.engine != "written" or not spec.key:
        return {}
    from graders.written.key import load_key  # the key is read only for a written assignment

    return {q.id: q.prompt.strip() for q in load_key(assignment_dir(spec) / spec.key).questions}


def hand_questions(spec: Spec) -> list[HandQuestion]:
    """The spec's manual items, in the spec's order; a written assignment's answer is its answers
    file's entry of the same id unless the item says otherwise."""
    prompts = _prompts(spec)
    default = HandAnswer(source="answers")
    return [
        HandQuestion(
            id=i.id,
            title=i.title,
            max=i.points,
            bonus=i.bonus,
            answer=i.answer or default,
            prompt=prompts.get(i.id, ""),
            rubric=tuple(rubric_item(line) for line in i.rubric),
        )
        for i in spec.items
        if i.manual
    ]
