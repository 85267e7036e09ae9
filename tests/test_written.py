"""The written-answers key: real YAML files, real sympy, and `grade check-key` in real workers."""

import re
import subprocess
import time
from pathlib import Path

import pytest
import sympy as sp

from conftest import GRADE, REPO
from graders.scoring.results import CheckResult
from graders.scoring.score import score_item
from graders.spec import Item
from graders.written.answerfile import AnswersProblem, load_answers, read_answers
from graders.written.answers import answer_warnings, grade_answers
from graders.written.expressions import ExpressionError, number_value, parse_expression, same
from graders.written.key import KeyProblem, key_items, load_key
from graders.written.template import answers_template

WRITTEN = REPO / "assignment" / "written"
KEY_FILE = WRITTEN / "key.yaml"
KEY = load_key(KEY_FILE)
ITEMS = [Item.model_validate(item) for item in key_items(KEY)]
REFERENCE = (WRITTEN / "reference" / "answers.yaml").read_text()
FULL = sum(i.points for i in ITEMS if not i.manual)


def _answers(tmp_path: Path, text: str | bytes) -> object:
    path = tmp_path / "answers.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return load_answers(path)


def _score(results: dict[str, CheckResult]) -> float:
    return sum(score_item(i, [results[c.name] for c in i.checks]).score for i in ITEMS if not i.manual)


def _edited(old: str, new: str) -> str:
    assert REFERENCE.count(old) == 1, old
    return REFERENCE.replace(old, new)


def test_reference_answers_score_full_marks(tmp_path):
    answers = _answers(tmp_path, REFERENCE)
    results = grade_answers(KEY, answers)
    assert {c.name for i in ITEMS for c in i.checks} == set(results)
    for item in ITEMS:
        scored = score_item(item, [results[c.name] for c in item.checks])
        if item.manual:
            assert (scored.status, scored.feedback, scored.score) == ("manual", "graded by hand", 0)
        else:
            assert scored.score == item.points, scored
    assert answer_warnings(KEY, answers) == []
    assert FULL == 6 and sum(i.points for i in ITEMS if i.manual) == 3


def test_the_template_lists_exactly_the_keys_ids_and_gives_nothing_away(tmp_path):
    shipped = (WRITTEN / "template" / "answers.yaml").read_text()
    assert shipped == answers_template(KEY), "regenerate: python -m graders.written.template"
    template = read_answers(shipped.encode())
    assert list(template.entries) == [q.id for q in KEY.questions]
    for q in KEY.questions:
        entry = template.entries[q.id]
        if len(q.parts) > 1:
            assert list(entry) == [p.id for p in q.parts]
            assert all(a.value is None for a in entry.values())
        else:
            assert entry.value in (None, "")
    assert all(r.status == "failed" and r.message.startswith("no answer for")
               for r in grade_answers(KEY, template).values())
    assert "1048576" not in shipped and "4*d_model" not in shipped


@pytest.mark.parametrize("old, new, check, message", [
    ("1a: 64", "1a: 65", "q1a_d_k", "1a: your answer 65 is not within the tolerance (rel 1e-9) of the key"),
    ("count: 1048576", "count: 1048577", "q1b_count", "1b.count: your answer 1048577 is not within the tolerance"),
    ("formula: 4*d_model^2", "formula: 3*d_model^2", "q1b_formula",
     "1b.formula: your expression 3*d_model^2 (read as 3*d_model**2) is not equivalent to the key's"),
    ("2a: d_k", "2a: 2*d_k", "q2a_variance", "2a: your expression 2*d_k is not equivalent to the key's"),
    ("  count: 1048576\n", "", "q1b_count", "no answer for 1b.count in answers.yaml"),
    ("1a: 64", "1a:", "q1a_d_k", "no answer for 1a in answers.yaml"),
    ("2a: d_k", "2a: [d_k]", "q2a_variance", "2a (answers.yaml line 6): a list is not an answer"),
    ("2a: d_k", "2a: dq", "q2a_variance",
     "your answer dq uses the name 'dq', which this question does not define; the names are d_k"),
    ("2a: d_k", "2a: 1/2d_k", "q2a_variance", "is ambiguous: it could be (1/2)*d_k or 1/(2*d_k)"),
    ("2a: d_k", "2a: O(d_k)", "q2a_variance", "is written as a complexity, O(...), but this part asks for an exact"),
    ("1a: 64", "1a: d_model/h", "q1a_d_k", "uses the name 'd_model', but this answer is a number"),
    ("1a: 64", "1a: yes", "q1a_d_k", "your answer yes is a yes/no value, not a number"),
    ("1a: 64", "1a: 2001-12-14", "q1a_d_k", "is date data, not a number"),
    ("3: n - m", "3: m - n", "q3_j", "3: your expression m - n is not equivalent to the key's"),
    ("2b: 1", "2b: 1/0", "q2b_variance", "is not finite (a division by zero?)"),
])
def test_a_planted_wrong_answer_costs_exactly_its_part(tmp_path, old, new, check, message):
    results = grade_answers(KEY, _answers(tmp_path, _edited(old, new)))
    failed = {name for name, r in results.items() if r.status != "passed"}
    assert failed == {check}
    assert message in results[check].message, results[check].message
    item = next(i for i in ITEMS if check in {c.name for c in i.checks})
    share = item.points * results[check].weight / sum(c.weight for c in item.checks)
    assert _score(results) == pytest.approx(FULL - share)
    assert "64" not in results[check].message or "64" in new  # the key's value is never shown


def test_one_value_for_a_question_with_parts_fails_both_parts(tmp_path):
    text = _edited("1b:\n  formula: 4*d_model^2\n  count: 1048576\n", "1b: 1048576\n")
    results = grade_answers(KEY, _answers(tmp_path, text))
    for name in ("q1b_formula", "q1b_count"):
        assert "question 1b has parts formula, count" in results[name].message
    assert _score(results) == FULL - 2


@pytest.mark.parametrize("old, new", [
    ("formula: 4*d_model^2", "formula: 4*h*d_model*(d_model/h)"),
    ("formula: 4*d_model^2", "formula: 4·d_model²"),
    ("formula: 4*d_model^2", "formula: (2*d_model)**2"),
    ("formula: 4*d_model^2", "formula: d_model × d_model × 4"),
    ("formula: 4*d_model^2", "formula: h*(3*d_model*(d_model/h)) + d_model*h*(d_model/h)"),
    ("count: 1048576", "count: 2^20"),
    ("count: 1048576", "count: 1,048,576"),
    ("count: 1048576", 'count: "1,048,576"'),
    ("count: 1048576", "count: 4*512^2"),
    ("count: 1048576", "count: 1048576.0"),
    ("1a: 64", "1a: 512/8"),
    ("1a: 64", "1a: 2^6"),
    ("1a: 64", "1a: sqrt(4096)"),
    ("2a: d_k", "2a: 0.5*2*d_k"),
    ("2a: d_k", "2a: d_k*1"),
    ("2a: d_k", "2a: sqrt(d_k)^2"),
    ("2a: d_k", "2a: (d_k^2 + d_k)/(d_k + 1)"),
    ("2b: 1", "2b: d_k/sqrt(d_k)^2"),
    ("2b: 1", "2b: 1.0"),
    ("2b: 1", '2b: "1"'),
    ("3: n - m", '3: "-(m - n)"'),
    ("3: n - m", "3: n − m"),
])
def test_equivalent_forms_get_full_marks(tmp_path, old, new):
    results = grade_answers(KEY, _answers(tmp_path, _edited(old, new)))
    assert all(r.status == "passed" for r in results.values()), [r.message for r in results.values()]


def test_a_tolerance_is_the_keys_and_is_named_without_the_value(tmp_path):
    path = tmp_path / "key.yaml"
    path.write_text("title: t\nquestions:\n  - id: q\n    title: t\n    prompt: p\n    points: 1\n    parts:\n"
                    "      - {id: ratio, rubric: r, number: 0.5, abs_tol: 0.01}\n")
    key = load_key(path)
    near, far = (grade_answers(key, read_answers(f"q: {v}".encode()))["qq_ratio"] for v in ("0.505", "1/1.9"))
    assert near.status == "passed" and far.status == "failed"
    assert far.message == "q: your answer 1/1.9 (read as 1/1.9 = 0.526315789474) is not within the tolerance (abs 0.01) of the key"


def test_unknown_ids_are_warnings_not_errors(tmp_path):
    answers = _answers(tmp_path, REFERENCE + "9z: 3\n1b_extra: 1\n")
    warnings = answer_warnings(KEY, answers)
    assert len(warnings) == 2 and "'9z' is not a question of this assignment" in warnings[0]
    assert re.search(r"line \d+", warnings[0])
    assert _score(grade_answers(KEY, answers)) == FULL
    nested = answer_warnings(KEY, _answers(tmp_path, _edited("  count: 1048576\n", "  count: 1048576\n  cuont: 1\n")))
    assert nested == ["answers.yaml line 6: question 1b has no part 'cuont' (its parts are formula, count); "
                      "it was not graded"]


_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("text, message", [
    (_BOMB, "answers.yaml line 1: YAML anchors (&a) are not accepted"),
    ("1a: *x\n", "YAML aliases (*x) are not accepted"),
    ("1a: 64\n" + "#" * (1 << 20) + "\n", "bytes, more than the 262144 accepted"),
    ("1a: " + "[" * 5000 + "]" * 5000 + "\n", "line 1: nested more than 8 levels deep"),
    ("1a: !!python/object/apply:os.system ['touch PWNED']\n", "YAML tags (!!python/object/apply:os.system)"),
    ("1a: 64\n2a: !!binary aGVsbG8=\n", "answers.yaml line 2: YAML tags (!!binary) are not accepted"),
    ("- 64\n- 1048576\n", "line 1: the file must map question ids to answers"),
    ("1a: 64\n1a: 65\n", "answers.yaml line 2: '1a' appears twice (first on line 1)"),
    ("1a: [64\n", "not valid YAML"),
    (b"1a: \xff\xfe\n", "not UTF-8 text"),
    ("1a: 64\n---\n1a: 65\n", "not valid YAML"),
])
def test_hostile_yaml_is_refused_quickly_with_its_line(tmp_path, text, message):
    started = time.process_time()  # CPU time: a busy machine does not make it fail
    with pytest.raises(AnswersProblem, match=re.escape(message)):
        _answers(tmp_path, text)
    assert time.process_time() - started < 2
    assert not (Path.cwd() / "PWNED").exists()


@pytest.mark.parametrize("text, message", [
    ("__import__('os').system('touch PWNED')", "contains text in quotes, which is not a number"),
    ("__import__(d_k)", "calls __import__(), which is not one of the functions allowed"),
    ("(9**9)**(9**9)", "has an exponent beyond the ±64 accepted (387420489)"),
    ("2^64^64", "has an exponent beyond the ±64 accepted (a 116-digit number)"),
    ("((10**15)**64)**64", "makes a number too large to work with"),
    ("((d_k**64)**64)", "has an exponent beyond the ±64 accepted (4096)"),
    ("d_k**64 * d_k**64", "has an exponent beyond the ±64 accepted (128)"),
    ("exp(10^12*log(3))", "takes exp of an expression with log in it"),  # sympy would compute 3^(10^12)
    ("E^(10^12*log(3))", "takes exp of an expression with log in it"),
    ("3^(log(3)*10^12)", "has log in an exponent"),
    ("(987654321098767^64+1)^(1/3)*(987654321098767^64+3)^(-1/5)", "takes a root of a number beyond 2^64"),
    ("sqrt(987654321098767^64+1)", "takes a root of a number beyond 2^64"),
    ("10000000000000000", "beyond 10^15"),
    ("1e400", "beyond 10^15"),
    ("d_k.__class__", "attribute access"),
    ("(lambda: 0)()", "uses the character ':'"),
    ("lambda d_k", "uses the Python keyword 'lambda'"),
    ("[c for c in ()]", "uses square brackets [ ], which are not accepted"),
    ("d_k if d_k else 0", "uses the Python keyword 'if'"),
    ("'x' * 9", "text in quotes"),
    ("d_k[0]", "uses square brackets"),
    ("d_k % 2", "uses %, which is not one of the operators + - * / ^"),
    ("sqrt", "without brackets"),
    ("sqrt(d_k, 2)", "several values separated by commas"),
    ("2 3", "is ambiguous: 2 3 could be 23 or 2*3"),
    ("1,5", "several values separated by commas"),
    ("x" * 10_000, "is longer than 500 characters"),
    ("+".join(["d_k"] * 120), "has more than 200 parts"),
    ("-" * 150 + "d_k", "is nested more than 30 levels deep"),
    ("sqrt(" * 40 + "d_k" + ")" * 40, "nested more than 30 levels deep"),
    ("", "is empty"),
])
def test_hostile_expressions_are_refused_without_being_run(text, message):
    started = time.process_time()  # CPU time: a busy machine does not make it fail
    with pytest.raises(ExpressionError, match=re.escape(message)):
        parse_expression(text, ["d_k"])
    assert time.process_time() - started < 0.5
    assert not (Path.cwd() / "PWNED").exists()


def test_a_hostile_answer_in_the_file_costs_its_part_only(tmp_path):
    text = _edited("2a: d_k", "2a: \"__import__('os').system('touch PWNED')\"")
    results = grade_answers(KEY, _answers(tmp_path, text))
    assert results["q2a_variance"].status == "failed" and "text in quotes" in results["q2a_variance"].message
    long = grade_answers(KEY, _answers(tmp_path, _edited("2a: d_k", "2a: " + "d" * 10_000)))["q2a_variance"]
    assert "is longer than 500 characters" in long.message and len(long.message) < 200
    assert _score(results) == FULL - 1 and not (tmp_path / "PWNED").exists()


def test_equivalence_neither_passes_nor_fails_by_accident():
    d_k, h = sp.symbols("d_k h", positive=True)
    assert same(parse_expression("d_k", ["d_k"]), parse_expression("sqrt(d_k^2)", ["d_k"]))  # d_k > 0
    # Integer probes would see sin(pi*d_k) = 0; non-integer ones do not.
    assert not same(d_k, parse_expression("d_k + sin(pi*d_k)", ["d_k"]))
    assert not same(d_k / h, parse_expression("1", ["d_k", "h"]))
    assert not same(d_k, parse_expression("d_k + 1e-6", ["d_k"]))
    # simplify would take ~13 s here: its budget ends it, and the probes decide.
    started = time.process_time()  # CPU time: a busy machine does not make it fail
    assert not same(d_k, parse_expression("(d_k+h+1)^64 - (d_k+h+2)^64", ["d_k", "h"]))
    assert time.process_time() - started < 5
    assert not same(d_k, parse_expression("exp(exp(exp(exp(d_k))))", ["d_k"]))  # no value at the probes
    assert number_value(parse_expression("1,048,576")) == 2**20


# -- the key ------------------------------------------------------------------------------------
def _check_key(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GRADE, "check-key", str(path), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def _status(stdout: str) -> dict[str, str]:
    """Claim id -> its status word, from check-key's table."""
    return {m[1]: m[2] for m in re.finditer(r"^(\w+)\s+(true|FALSE|CRASHED|TIMED OUT)\s", stdout, re.M)}


def test_check_key_passes_the_shipped_key():
    p = _check_key(KEY_FILE)
    assert p.returncode == 0, p.stdout + p.stderr
    assert _status(p.stdout) == {c.id: "true" for c in KEY.claims}
    assert {c.about for c in KEY.claims} >= {"1a", "1b", "2a", "2b", "3"}
    assert f"key ok: all {len(KEY.claims)} claims true" in p.stdout


def test_check_key_refuses_a_key_with_one_false_claim(tmp_path):
    text = KEY_FILE.read_text()
    assert text.count("R(n - m)) == sp.zeros") == 1
    (tmp_path / "key.yaml").write_text(text.replace("R(n - m)) == sp.zeros", "R(m - n)) == sp.zeros"))
    p = _check_key(tmp_path / "key.yaml")
    assert p.returncode == 1, p.stdout + p.stderr
    assert _status(p.stdout) == {c.id: "FALSE" if c.id == "rope_relative" else "true" for c in KEY.claims}
    assert re.search(r"^rope_relative\s+FALSE .*not true: it evaluated to False$", p.stdout, re.M)
    assert "key refused: 1 of 6 claims not true: rope_relative" in p.stdout


CLAIMS = """\
title: claims that are not true
questions:
  - {id: "1", title: t, prompt: p, points: 1, parts: [{id: x, rubric: r, number: 1}]}
claims:
  - id: raises
    statement: divides by zero
    code: |
      x = 1
      y = x / 0
      y
  - id: loops
    statement: never ends
    code: |
      while True:
          pass
      True
  - id: unevaluated
    statement: an Eq sympy cannot decide
    code: |
      import sympy as sp
      sp.Eq(sp.Symbol("a"), 1)
  - id: truthy
    statement: a nonzero number is not true
    code: "1"
  - id: nothing
    statement: None is not true
    code: "None"
  - id: numpy_true
    statement: numpy's True counts
    code: "import numpy as np\\nnp.bool_(True)"
  - id: sympy_true
    statement: sympy's true counts
    code: "import sympy as sp\\nsp.Eq(sp.Integer(2), 2)"
  - id: exits
    statement: kills its worker
    code: "import os\\nos._exit(3)\\nTrue"
  - id: after
    statement: still checked after the others
    code: "512 / 8 == 64"
"""


def test_check_key_reports_each_way_a_claim_fails_and_checks_the_rest(tmp_path):
    (tmp_path / "key.yaml").write_text(CLAIMS)
    p = _check_key(tmp_path / "key.yaml", "--timeout", "3")
    assert p.returncode == 1, p.stdout + p.stderr
    assert _status(p.stdout) == {"raises": "CRASHED", "loops": "TIMED OUT", "unevaluated": "FALSE", "truthy": "FALSE",
                                 "nothing": "FALSE", "numpy_true": "true", "sympy_true": "true",
                                 "exits": "CRASHED", "after": "true"}
    lines = {line.split()[0]: line for line in p.stdout.splitlines() if line.strip()}
    assert "raised ZeroDivisionError at line 2 of its code (y = x / 0): division by zero" in lines["raises"]
    assert "did not finish within 3 s" in lines["loops"]
    assert "it evaluated to Eq(a, 1)" in lines["unevaluated"] and "it evaluated to 1" in lines["truthy"]
    assert "it evaluated to None" in lines["nothing"] and "worker exited with status 3" in lines["exits"]
    assert "claims not true: raises, loops, unevaluated, truthy, nothing, exits" in p.stdout


_QUESTION = '  - {id: "1", title: t, prompt: p, points: 1, parts: [{id: x, rubric: r, number: 1}]}\n'


@pytest.mark.parametrize("body, message", [
    ("questions:\n" + _QUESTION * 2, "questions.1.id (line 4): duplicate question id '1'"),
    ("questions:\n  - {id: \"1\", title: t, prompt: p, points: 2}\n",
     "questions.0.parts (line 3): question 1 has 2 points but no parts: give it parts, or mark it manual: true"),
    ("questions:\n" + _QUESTION + "claims:\n  - {id: c, about: \"9\", statement: s, code: \"True\"}\n",
     "claims.0.about (line 5): claim c is about '9', which is not a question; the questions are 1"),
    ("questions:\n" + _QUESTION + "claims:\n  - {id: c, statement: s, code: \"True\"}\n  - {id: c, statement: s, "
     "code: \"True\"}\n", "claims.1.id (line 6): duplicate claim id 'c'"),
    ("questions:\n" + _QUESTION + "claims:\n  - {id: c, statement: s, code: \"x = 1\"}\n",
     "claims.0.code (line 5): must end with an expression"),
    ("questions:\n" + _QUESTION + "claims:\n  - {id: c, statement: s, code: \"1 +\"}\n",
     "claims.0.code (line 5): not valid Python (line 1 of the code)"),
    ("questions:\n" + _QUESTION.replace("number: 1", "expression: dk*2, symbols: [d_k]"),
     "questions.0.parts.0.expression (line 3): 'dk*2' uses the name 'dk', which this question does not define"),
    ("questions:\n" + _QUESTION.replace("number: 1", "number: 1, expression: \"2\""),
     "questions.0.parts.0 (line 3): part x needs exactly one of number, expression and code"),
    ("questions:\n" + _QUESTION.replace("number: 1", "expression: \"2\", rel_tol: 0.1"),
     "tolerances go with a number"),
    ("questions:\n" + _QUESTION.replace("number: 1", "expression: pi, symbols: [pi]"), "'pi' cannot be a name"),
    ("questions:\n" + _QUESTION.replace("number: 1", "number: true"), "questions.0.parts.0.number"),
    ("questions:\n" + _QUESTION.replace("number: 1", "number: 1, colour: red"),
     "questions.0.parts.0.colour (line 3): Extra inputs are not permitted"),
    ("questions:\n" + _QUESTION.replace("id: x", "id: a_b") + _QUESTION.replace('"1"', '"1_a"').replace("id: x", "id: b"),
     "questions.1.parts.0.id (line 4): the check name q1_a_b is taken"),
    ("questions: []\n", "questions (line 2): a key needs at least one question"),
    ("questions: [1, 2\n", "line 3: not valid YAML"),
])
def test_an_invalid_key_exits_2_naming_the_field(tmp_path, body, message):
    path = tmp_path / "key.yaml"
    path.write_text("title: t\n" + body)
    with pytest.raises(KeyProblem, match=re.escape(str(path))) as problem:
        load_key(path)
    assert message in str(problem.value), str(problem.value)
    if "duplicate question" in message or "no parts" in message or "about" in message:  # the CLI too
        p = _check_key(path)
        assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr
