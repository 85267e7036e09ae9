"""The written assignment's answer key, as a TA writes it in YAML, validated here.

The pydantic models are the single source of the key's schema. A broken key fails to load with a
KeyProblem naming the file, the field (pydantic's location, e.g. `questions.2.parts.0.expression`)
and its line in the YAML.
"""

import ast
import math
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import sympy as sp
import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError, model_validator
from pydantic_core import ErrorDetails

from graders.written import yamlsafe
from graders.written.expressions import RESERVED, ExpressionError, evaluable, parse_expression
from graders.written.mathparse import ReadError, Sym, parse
from graders.written.reading import Kind, PartForm

Id = Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$", max_length=40)]
DEFAULT_REL_TOL = 1e-9  # a number with no tolerance given: equal up to float rounding
KEY_CAPS = yamlsafe.Caps(max_bytes=1 << 20, max_depth=8, max_nodes=20_000)


class KeyProblem(Exception):
    """The key file is missing or invalid; the message names the file, the field and the line."""


class FieldProblem(ValueError):
    """A validator's complaint about one field below the model it checks: pydantic keeps the
    exception (ctx.error), and load_key adds `loc` to pydantic's own location."""

    def __init__(self, loc: tuple, message: str):
        super().__init__(message)
        self.loc, self.message = loc, message


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _duplicate(values: list[str]) -> int | None:
    """Index of the first value seen before."""
    return next((i for i, v in enumerate(values) if v in values[:i]), None)


# What the grader can check of a student's function (graders/written/code.py implements each):
# attention(Q, K, V, mask) against the reference without and with a mask, and the causal property;
# causal_masked_softmax(scores) against the reference, its future weights, its rows' sums.
CodeCheck = Literal[
    "attention_unmasked",
    "attention_masked",
    "attention_causal",
    "causal_softmax_matches",
    "causal_softmax_future_zero",
    "causal_softmax_rows",
]
CODE_CHECKS: tuple[str, ...] = get_args(CodeCheck)


class Code(_Strict):
    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="the function of the submitted .py")
    check: CodeCheck = Field(description="what is checked of it, by running it in the worker")


class Part(_Strict):
    id: Id
    weight: float = Field(1.0, gt=0, description="the question's points are shared among its parts by weight")
    rubric: str = Field(min_length=1, description="what the part asks, shown beside its result")
    number: StrictInt | StrictFloat | None = None
    abs_tol: float | None = Field(None, ge=0)
    rel_tol: float | None = Field(None, ge=0)
    expression: str | None = Field(None, description="in the same syntax students use: d_model/h, 2^20, sqrt(d_k)")
    symbols: tuple[str, ...] = Field((), description="the names the expression (and students) may use")
    complexity: bool = Field(
        False,
        description="an expression that is a cost: O(...) or Theta(...) around the answer accepted, and "
        "compared up to a positive constant factor (O(2 n^2 d) is O(n^2 d))",
    )
    code: Code | None = Field(None, description="graded by running the student's function in the worker")

    @model_validator(mode="after")
    def _one_answer(self) -> "Part":
        if sum(x is not None for x in (self.number, self.expression, self.code)) != 1:
            raise FieldProblem((), f"part {self.id} needs exactly one of number, expression and code")
        if self.complexity and self.expression is None:
            raise FieldProblem(("complexity",), "complexity goes with an expression (the cost, e.g. n^2*d)")
        if self.code is not None:
            if self.symbols or self.abs_tol is not None or self.rel_tol is not None:
                raise FieldProblem(("code",), "symbols and tolerances go with a number or an expression, not code")
            return self
        if self.number is not None:
            if not math.isfinite(self.number):
                raise FieldProblem(("number",), "the number must be finite")
            if self.symbols:
                raise FieldProblem(("symbols",), "symbols go with an expression, not a number")
            return self
        if self.abs_tol is not None or self.rel_tol is not None:
            raise FieldProblem(("expression",), "tolerances go with a number; expressions are compared exactly")
        for name in self.symbols:
            if not name.isidentifier() or name in RESERVED or name.startswith("_") or not _typeable(name, self.symbols):
                raise FieldProblem(
                    ("symbols",),
                    f"{name!r} cannot be a name (a function, a constant, O, not an identifier, or not typeable as d_k)",
                )
        if _duplicate(list(self.symbols)) is not None:
            raise FieldProblem(("symbols",), "a name is listed twice")
        assert self.expression is not None  # a number part returned above
        try:
            expr = parse_expression(self.expression, self.symbols)
        except ExpressionError as e:
            raise FieldProblem(("expression",), f"{self.expression!r} {e}") from None
        if not evaluable(expr):
            raise FieldProblem(("expression",), "has no value at some of the positive points answers are compared at")
        return self

    def tolerance(self) -> tuple[float, float]:
        """(abs_tol, rel_tol): the default is DEFAULT_REL_TOL alone; one given, the other is 0."""
        if self.abs_tol is None and self.rel_tol is None:
            return 0.0, DEFAULT_REL_TOL
        return self.abs_tol or 0.0, self.rel_tol or 0.0

    def expected(self) -> sp.Expr:
        """An expression part's answer, as sympy."""
        assert self.expression is not None, "a number part has no expression"
        return parse_expression(self.expression, self.symbols)


class Question(_Strict):
    id: Id
    title: str
    prompt: str = Field(description="the question as the handout asks it")
    points: float = Field(ge=0)
    manual: bool = Field(False, description="free text: graded by hand, listed with its points and rubric")
    rubric: tuple[str, ...] = Field((), description="rubric lines shown to graders and students")
    parts: tuple[Part, ...] = ()

    @model_validator(mode="after")
    def _graded_somehow(self) -> "Question":
        if self.manual and self.parts:
            raise FieldProblem(("parts",), f"question {self.id} is graded by hand (manual): it takes no parts")
        if not self.manual and self.points > 0 and not self.parts:
            raise FieldProblem(
                ("parts",),
                f"question {self.id} has {self.points:g} points but no parts: give it parts, or mark it manual: true",
            )
        dup = _duplicate([p.id for p in self.parts])
        if dup is not None:
            raise FieldProblem(("parts", dup, "id"), f"duplicate part id {self.parts[dup].id!r}")
        if len({p.code is None for p in self.parts}) > 1:  # answers.yaml and the .py each answer whole questions
            raise FieldProblem(("parts",), f"question {self.id} mixes code parts with others: make them two questions")
        return self

    def label(self, part: Part) -> str:
        """How answers.yaml and the messages name a part: 1b.count, or just 1a for a single part."""
        return self.id if len(self.parts) == 1 else f"{self.id}.{part.id}"


class Claim(_Strict):
    id: Id
    about: Id | None = Field(None, description="the question this claim supports")
    part: str | None = Field(
        None,
        description="a part, as question.part (2b.three), whose key answer the code computes: the claim is "
        "true iff its last expression's value equals that answer (a number within the part's tolerance, an "
        "expression by equivalence), so a wrong number in the key is refused",
    )
    statement: str = Field(description="the claim in words")
    code: str = Field(description="Python; the claim is true iff its last expression's value is exactly true")

    @model_validator(mode="after")
    def _ends_in_expression(self) -> "Claim":
        try:
            body = ast.parse(self.code).body
        except SyntaxError as e:
            raise FieldProblem(("code",), f"not valid Python (line {e.lineno} of the code): {e.msg}") from None
        if not body or not isinstance(body[-1], ast.Expr):
            raise FieldProblem(("code",), "must end with an expression: its value is what the claim asserts")
        return self


def _typeable(name: str, symbols: tuple[str, ...]) -> bool:
    """A student typing `name` gets that name: d__k, for one, could never be typed."""
    try:
        return parse(name, symbols, aliases=False).tree == Sym(name)
    except ReadError:
        return False


def part_form(question: Question, part: Part) -> PartForm:
    """What the part asks for, without its answer (the preview's and the templates' view of it)."""
    kind: Kind = "code" if part.code is not None else "number" if part.number is not None else "expression"
    return PartForm(
        question=question.id,
        part=part.id,
        label=question.label(part),
        kind=kind,
        symbols=part.symbols,
        complexity=part.complexity,
        siblings=tuple(p.id for p in question.parts),
        function=part.code.function if part.code is not None else None,
    )


def key_forms(key: "AnswerKey") -> list[PartForm]:
    """Every part of the key as a PartForm, and each manual question as one, in the key's order."""
    forms = []
    for q in key.questions:
        if q.manual:
            forms.append(PartForm(question=q.id, part=None, label=q.id, kind="manual"))
        forms += [part_form(q, p) for p in q.parts]
    return forms


def check_name(question: Question, part: Part) -> str:
    return f"q{question.id}_{part.id}".lower()


class AnswerKey(_Strict):
    title: str
    # At least one, checked below: a min_length here is also reported when only an item is invalid.
    questions: tuple[Question, ...]
    claims: tuple[Claim, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> "AnswerKey":
        if not self.questions:
            raise FieldProblem(("questions",), "a key needs at least one question")
        for field, ids in (("questions", [q.id for q in self.questions]), ("claims", [c.id for c in self.claims])):
            dup = _duplicate(ids)
            if dup is not None:
                raise FieldProblem((field, dup, "id"), f"duplicate {field[:-1]} id {ids[dup]!r}")
        known = {q.id for q in self.questions}
        answered = {f"{q.id}.{p.id}" for q in self.questions for p in q.parts if p.code is None}
        for i, claim in enumerate(self.claims):
            if claim.part is not None and claim.part not in answered:
                raise FieldProblem(
                    ("claims", i, "part"),
                    f"claim {claim.id} computes {claim.part!r}, which is not a number or expression part "
                    "(written question.part, e.g. 2b.three)",
                )
            if claim.about is not None and claim.about not in known:
                raise FieldProblem(
                    ("claims", i, "about"),
                    f"claim {claim.id} is about {claim.about!r}, which is not "
                    f"a question; the questions are {', '.join(sorted(known))}",
                )
        names = [(check_name(q, p), (i, j)) for i, q in enumerate(self.questions) for j, p in enumerate(q.parts)]
        dup = _duplicate([n for n, _ in names])
        if dup is not None:
            i, j = names[dup][1]
            raise FieldProblem(
                ("questions", i, "parts", j, "id"),
                f"the check name {names[dup][0]} is taken by another question's part (ids are compared lower-cased)",
            )
        return self

    def question(self, question_id: str) -> Question:
        return next(q for q in self.questions if q.id == question_id)

    def points(self) -> float:
        return sum(q.points for q in self.questions)

    def part(self, label: str) -> Part:
        """The part named question.part (a claim's `part`)."""
        qid, _, pid = label.partition(".")
        return next(p for p in self.question(qid).parts if p.id == pid)

    def code_parts(self) -> list[tuple[Question, Part]]:
        return [(q, p) for q in self.questions for p in q.parts if p.code is not None]


def _describe(error: ErrorDetails, root: yaml.Node | None) -> str:
    cause = (error.get("ctx") or {}).get("error")
    loc = tuple(error["loc"]) + (cause.loc if isinstance(cause, FieldProblem) else ())
    message = cause.message if isinstance(cause, FieldProblem) else error["msg"]
    where = ".".join(map(str, loc)) or "(top)"
    line = yamlsafe.line_at(root, loc)
    return f"{where}{f' (line {line})' if line else ''}: {message}"


def load_key(path: Path) -> AnswerKey:
    try:
        root = yamlsafe.compose(path.read_bytes(), str(path), KEY_CAPS)
        data = yamlsafe.plain(root, str(path))
    except FileNotFoundError:
        raise KeyProblem(f"{path}: no such key file") from None
    except (OSError, yamlsafe.YamlProblem) as e:
        raise KeyProblem(str(e) if isinstance(e, yamlsafe.YamlProblem) else f"{path}: {e}") from None
    if not isinstance(data, dict):
        raise KeyProblem(f"{path}: the key must be a mapping with title, questions and claims")
    try:
        return AnswerKey.model_validate(data)
    except ValidationError as e:
        raise KeyProblem(f"{path}: " + "; ".join(_describe(err, root) for err in e.errors())) from None


def key_items(key: AnswerKey) -> list[dict[str, Any]]:
    """One item per question, as the spec's `items` table would give it (graders.spec validates it
    as an Item: the key knows nothing of the spec); each auto part is a check named check_name()."""
    # Only a manual question's rubric goes into the report: an auto question's rubric states the
    # key's answer, and a student who resubmits must not read it off the feedback.
    return [
        dict(
            id=q.id,
            title=q.title,
            points=q.points,
            manual=q.manual,
            rubric=list(q.rubric) if q.manual else [],
            checks=[dict(name=check_name(q, p), weight=p.weight, title=p.rubric) for p in q.parts],
        )
        for q in key.questions
    ]
