"""The Transformer exam (`--assignment transformer_exam`): real `grade` processes on real zips, the
code parts run in real workers, `grade check-key` and `grade gradescope-bundle` as TAs run them."""

import json
import re
import shutil
import subprocess
import zipfile

import pytest

from conftest import GRADE, REPO, grade_all, items, messages, write_zip
from test_html_report import by_id, parse
from graders.reports.console import table
from graders.reports.gradescope import to_gradescope
from graders.reports.html import render
from graders.scoring.results import Results
from graders.spec import load_spec
from graders.written.key import load_key
from graders.written.template import answers_template

EXAM = REPO / "assignment" / "transformer_exam"
ANSWERS = (EXAM / "reference" / "answers.yaml").read_text()
# The same answers as students typeset them: LaTeX, Unicode, implicit products, O(...), an alias.
TYPESET = (REPO / "tests" / "written" / "exam_answers_typeset.yaml").read_text()
CODE = (EXAM / "reference" / "exam.py").read_text()
AUTO = {"1a": 3, "1b": 4, "1c": 4, "2a": 4, "2b": 6, "3a": 3, "4b": 5, "5a": 4}
MANUAL = {"1b_saturation": 1, "3a_relative": 2, "3b": 7, "4a": 4, "5b": 5, "6a": 5, "6b": 3}
LIMITS = ["--assignment", "transformer_exam", "--limit", "call_timeout_s=3", "--limit", "import_timeout_s=30"]


def bug(*edits: tuple[str, str]) -> str:
    code = CODE
    for old, new in edits:
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    return code


SDPA_AND_LARGE_NEGATIVE = '''
import torch
import torch.nn.functional as F

def attention(Q, K, V, mask=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=None if mask is None else mask.bool())

def causal_masked_softmax(scores):
    L = scores.shape[-1]
    future = ~torch.ones(L, L, dtype=torch.bool).tril()
    return scores.masked_fill(future, -1e9).softmax(dim=-1)
'''
EINSUM_AND_ADDED_MASK = '''
import math
import torch

def attention(Q, K, V, mask=None):
    scores = torch.einsum("...nd,...md->...nm", Q, K) * (1.0 / math.sqrt(K.shape[-1]))
    if mask is not None:
        scores = torch.where(mask.bool(), scores, torch.tensor(-1e9))
    return torch.einsum("...nm,...me->...ne", torch.nn.functional.softmax(scores, -1), V)

def causal_masked_softmax(scores):
    L = scores.size(-1)
    return torch.softmax(scores + torch.triu(torch.full((L, L), float("-inf")), diagonal=1), dim=-1)
'''
SOFTMAX_LINE = 'weights = torch.softmax(scores, dim=-1)\n'
# name -> (the edit of exam.py, the item it must cost, the words its failing checks must have)
BUGS = {
    "attn_softmax_dim": ((SOFTMAX_LINE + "    return weights @ V", SOFTMAX_LINE.replace("-1", "-2") + "    return weights @ V"),
                         "1c", "softmax taken over the queries"),
    "attn_no_scaling": ((" / math.sqrt(d_k)", ""), "1c", "without dividing the scores by sqrt(d_k)"),
    "attn_zero_fill": (('        scores = scores.masked_fill(mask == 0, float("-inf"))',
                        "        scores = scores.masked_fill(mask == 0, 0.0)"), "1c", "set to 0 instead of -inf"),
    "attn_mask_ignored": (("    if mask is not None:\n", "    if False:\n"), "1c", "mask not applied"),
    "causal_triu": (("torch.tril(", "torch.triu("), "4b", "upper-triangular mask (triu)"),
    "causal_zero_fill": (('\n    scores = scores.masked_fill(mask == 0, float("-inf"))',
                          "\n    scores = scores.masked_fill(mask == 0, 0.0)"), "4b", "set to 0 instead of -inf"),
    "causal_no_mask": (('\n    scores = scores.masked_fill(mask == 0, float("-inf"))', ""), "4b", "no mask applied"),
    "causal_softmax_dim": ((SOFTMAX_LINE + "    return weights\n", SOFTMAX_LINE.replace("-1", "-2")
                            + "    return weights\n"), "4b", "softmax taken over dim -2"),
}
# One bug of 1(c) and one of 4(b) per submission (half the grades): each function is checked on
# its own, so each bug must still cost its own part only.
PAIRS = {f"{a}+{b}": bug(BUGS[a][0], BUGS[b][0]) for a, b in zip(list(BUGS)[:4], list(BUGS)[4:], strict=True)}
CORRECT = {"reference": CODE, "sdpa_large_negative": SDPA_AND_LARGE_NEGATIVE, "einsum_added_mask": EINSUM_AND_ADDED_MASK}
BROKEN = {"answers_only": None, "raises_at_import": CODE + "\nraise RuntimeError('exam.py is broken')\n"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("exam")
    # Asleep, not spinning: the timeout is the same, and the hostile suite has spinning hangs (this one
    # burned 12 CPU-s of the suite's two cores while the other grades ran).
    hang = write_zip(folder / "hangs_at_import.zip",
                     {"answers.yaml": ANSWERS, "exam.py": "import time\n\ntime.sleep(600)\n"})
    # Alone, beside the others: its import is cut at import_timeout_s.
    slow = subprocess.Popen([*GRADE, str(hang), "--out", str(folder / "hang"), "--quiet", *LIMITS[:4],
                             "--limit", "import_timeout_s=12"], cwd=REPO)
    cases = {**CORRECT, **BROKEN, **PAIRS}
    zips = [write_zip(folder / f"{name}.zip", {"answers.yaml": ANSWERS, **({"exam.py": code} if code else {})})
            for name, code in cases.items()]
    zips.append(write_zip(folder / "typeset_answers.zip", {"answers.yaml": TYPESET, "exam.py": CODE}))
    results = grade_all(zips, folder / "out", jobs=2, extra=LIMITS)
    assert slow.wait(timeout=120) == 0
    results["hangs_at_import"] = json.loads((folder / "hang" / "results.json").read_text())
    for pair in PAIRS:  # each bug's view: its pair's result
        for name in pair.split("+"):
            results[name] = results[pair]
    return results


def lost(r: dict) -> set[str]:
    return {i["id"] for i in r["items"] if i["status"] != "manual" and i["score"] < i["max_score"]}


def _scores(r: dict) -> dict[str, float]:
    return {i["id"]: i["score"] for i in r["items"] if i["status"] != "manual"}


def test_the_key_has_the_exams_points_per_question_and_part():
    key = load_key(EXAM / "key.yaml")
    per_question: dict[str, float] = {}
    for q in key.questions:
        per_question[q.id[0]] = per_question.get(q.id[0], 0) + q.points
    assert per_question == {"1": 12, "2": 10, "3": 12, "4": 9, "5": 9, "6": 8} and key.points() == 60
    assert {q.id: q.points for q in key.questions if q.manual} == MANUAL
    assert {q.id: q.points for q in key.questions if not q.manual} == AUTO
    shipped = (EXAM / "template" / "answers.yaml").read_text()
    assert shipped == answers_template(key, "exam.py"), "regenerate: python -m graders.written.template transformer_exam"
    assert "1048576" not in shipped and "786432" not in shipped and "10000" not in shipped


@pytest.mark.parametrize("name", CORRECT)
def test_correct_code_gets_full_marks_and_the_manual_parts_are_listed(graded, name):
    r = graded[name]
    assert r["grader_error"] is None and r["max_score"] == 60
    assert _scores(r) == AUTO, {i: messages(r, i) for i in lost(r)}
    assert r["score"] == 33 and r["problems"] == {} and r["warnings"] == []
    for item, points in MANUAL.items():
        manual = items(r)[item]
        assert (manual["status"], manual["score"], manual["max_score"]) == ("manual", 0, points)
        assert manual["rubric"], item  # for the graders
    assert not any(items(r)[i]["rubric"] for i in AUTO)  # an auto part's rubric states its answer
    assert "bwrap" in r["sandbox"] or "rlimits" in r["sandbox"]


def test_the_reference_answers_as_students_typeset_them_get_all_33_points(graded):
    r = graded["typeset_answers"]
    assert _scores(r) == AUTO and r["score"] == 33, {i: messages(r, i) for i in lost(r)}
    assert r["warnings"] == ["1b.variance (answers.yaml line 13): 'dk' was read as d_k, the name this part uses; write d_k"]
    said = {c["name"]: c["message"] for i in r["items"] for c in i["checks"]}
    assert said["q2a_cost"] == \
        "2a.cost: your expression O(n^2 d) (read as O(n**2*d)) is the key's complexity (up to a constant factor)"
    assert said["q2b_total"] == r"2b.total: your answer 4 \times 512^2 (read as 4*512**2 = 1048576) matches the key"
    assert said["q1b_variance"] == "1b.variance: your expression dk (read as d_k) is equivalent to the key's"
    assert said["q1a_scores_rows"] == "1a.scores_rows: your expression $n$ (read as n) is equivalent to the key's"
    # The report shows each reading beside the answer.
    page = render(Results.model_validate(r))
    assert "(read as O(n**2*d))" in page and "(read as 512/8 = 64)" in page


def test_the_printed_total_says_which_points_staff_still_grade_by_hand(graded):
    # "33 / 60" alone reads as a failing grade: the table says the other 27 are not in it yet.
    total = table(Results.model_validate(graded["reference"])).splitlines()
    row = next(line for line in total if line.startswith("total"))
    assert row.split()[1:3] == ["33", "60"] and row.endswith("27 of the 60 points are graded by hand, not in this total")


def test_the_html_report_says_which_points_staff_still_grade_by_hand(graded):
    results = Results.model_validate(graded["reference"])
    root = parse(render(results))
    assert by_id(root, "total").text() == "33 / 60"
    assert by_id(root, "by-hand").text() == \
        "27 of the 60 points are graded by hand by the course staff and are not in this total yet."
    # Hand-graded bonus points are no part of max_score: the bonus line speaks for them, not this one.
    bonus_only = results.model_copy(update={"items": [i.model_copy(update={"bonus": True}) if i.status == "manual" else i
                                                      for i in results.items]})
    assert bonus_only.by_hand_points == 0 and 'id="by-hand"' not in render(bonus_only)


@pytest.mark.parametrize("name", BUGS)
def test_a_planted_bug_costs_only_its_own_part_and_is_named(graded, name):
    _, item, words = BUGS[name]
    r = graded[name]
    assert lost(r) == {"1c", "4b"}, {i: messages(r, i) for i in lost(r)}  # its pair's bug costs the other
    assert {i: s for i, s in _scores(r).items() if i not in ("1c", "4b")} == {
        i: p for i, p in AUTO.items() if i not in ("1c", "4b")}
    said = messages(r, item) + " | " + " | ".join(
        c["diagnosis"]["explanation"] for c in items(r)[item]["checks"] if c.get("diagnosis"))
    assert words in said, said


def test_planted_bugs_lose_what_their_checks_weigh(graded):
    lost_points = {name: AUTO[item] - _scores(graded[name])[item] for name, (_, item, _) in BUGS.items()}
    print("points lost:", lost_points)
    # In 1(c) the mask bugs keep the unmasked comparison (2 of 4), no scaling and the softmax over
    # the queries the causal property (it holds for them); in 4(b) a softmax over dim -2 still
    # gives the future weight 0 (2 of 5), the others keep only the rows' sums (1 of 5).
    assert lost_points == {"attn_softmax_dim": 3, "attn_no_scaling": 3, "attn_zero_fill": 2, "attn_mask_ignored": 2,
                           "causal_triu": 4, "causal_zero_fill": 4, "causal_no_mask": 4, "causal_softmax_dim": 3}


@pytest.mark.parametrize("name, words", [
    ("answers_only", "exam.py missing from the submission; the code parts run attention(), causal_masked_softmax() "
                     "from exam.py, so they get 0"),
    ("raises_at_import", f"exam.py failed at import (exam.py, line {len(CODE.splitlines()) + 2}): RuntimeError: "
                         "exam.py is broken"),
    ("hangs_at_import", "exam.py could not be imported: timed out after 12 s in import of exam.py"),
])
def test_code_that_is_missing_raises_or_hangs_costs_only_the_code_parts(graded, name, words):
    r = graded[name]
    assert _scores(r) == {**AUTO, "1c": 0, "4b": 0} and r["grader_error"] is None
    for item in ("1c", "4b"):
        assert all(words in c["message"] for c in items(r)[item]["checks"]), messages(r, item)
    assert "exam.py" in r["problems"]


def test_what_students_read_has_no_rubric_of_a_manual_part(graded):
    page = json.dumps(to_gradescope(Results.model_validate(graded["reference"]), "visible"))
    assert "Graded by hand" in page and "FlashAttention never" not in page and "SRAM" not in page


def test_check_key_refuses_a_key_with_one_wrong_number(tmp_path):
    shutil.copy(EXAM / "spec.toml", tmp_path / "spec.toml")
    text = (EXAM / "key.yaml").read_text()
    assert text.count("number: 786432}") == 1
    (tmp_path / "key.yaml").write_text(text.replace("number: 786432}", "number: 786433}"))
    p = subprocess.run([*GRADE, "check-key", str(tmp_path / "key.yaml")], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"three_projections +FALSE .* it evaluated to 786432, the key says 786433", p.stdout), p.stdout
    assert "key refused: 1 of 27 claims not true: three_projections" in p.stdout


def test_the_gradescope_bundle_checks_the_key_and_holds_the_exam(tmp_path):
    out = tmp_path / "x.zip"
    p = subprocess.run([*GRADE, "gradescope-bundle", "--assignment", "transformer_exam", "--out", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    names = set(zipfile.ZipFile(out).namelist())
    assert {"run_autograder", "setup.sh", "assignment/transformer_exam/key.yaml",
            "assignment/transformer_exam/spec.toml", "graders/written/code.py"} <= names
    assert load_spec(EXAM / "spec.toml").gradescope.time_budget_s == 240
