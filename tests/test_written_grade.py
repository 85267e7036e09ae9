"""The written assignment through real `grade --assignment written` processes: answers.yaml in real
zips, scored per question, free text listed as graded by hand, never a traceback."""

import json

import jsonschema
import pytest

from conftest import REPO, grade_all, items, lost, messages, write_zip
from graders.reports.gradescope import SCHEMA_FILE, to_gradescope
from graders.scoring.results import Results

WRITTEN = REPO / "assignment" / "written"
REFERENCE = (WRITTEN / "reference" / "answers.yaml").read_text()
AUTO = {"1a": 1, "1b": 2, "2a": 1, "2b": 1, "3": 1}


def edit(old: str, new: str) -> str:
    assert REFERENCE.count(old) == 1, old
    return REFERENCE.replace(old, new)


# name -> (files, {item: points it keeps}, {item: words its message has})
CASES = {
    "reference": ({"answers.yaml": REFERENCE}, AUTO, {}),
    "equivalent_forms": ({"answers.yaml": edit("formula: 4*d_model^2", "formula: 2*(d_model*2)*d_model")
                          .replace("count: 1048576", "count: 2^20").replace("2a: d_k", "2a: d_k*1")}, AUTO, {}),
    "wrong_number": ({"answers.yaml": edit("1a: 64", "1a: 512")}, {**AUTO, "1a": 0},
                     {"1a": "your answer 512 is not"}),
    "one_part_wrong": ({"answers.yaml": edit("count: 1048576", "count: 786432")}, {**AUTO, "1b": 1},
                       {"1b": "786432"}),
    "not_equivalent": ({"answers.yaml": edit("3: n - m", "3: m - n")}, {**AUTO, "3": 0},
                       {"3": "not equivalent"}),
    "unknown_name": ({"answers.yaml": edit("2a: d_k", "2a: dq")}, {**AUTO, "2a": 0}, {"2a": "dq"}),
    # As students typeset them: LaTeX, Unicode, implicit products and an alias (dk for d_k, a warning).
    "typeset": ({"answers.yaml": edit("1a: 64", r"1a: $\frac{512}{8}$").replace("formula: 4*d_model^2", "formula: 4d_{model}^2")
                 .replace("count: 1048576", r"count: 4 \times 512^{2}").replace("2a: d_k", "2a: dk")
                 .replace("2b: 1", r"2b: \frac{d_k}{\sqrt{d_k}^2}").replace("3: n - m", "3: n − m")}, AUTO,
                {"1b": "4d_{model}^2 (read as 4*d_model**2)", "2a": "2a: your expression dk (read as d_k) is equivalent"}),
    "code_is_data": ({"answers.yaml": edit("2a: d_k", "2a: __import__('os').system('touch /tmp/pwned')")},
                     {**AUTO, "2a": 0}, {}),
    "alias_bomb": ({"answers.yaml": "a: &a [1, 1]\nb: [*a, *a]\n" + REFERENCE}, {q: 0 for q in AUTO},
                   {"1a": "answers.yaml"}),
    "missing": ({"notes.txt": "forgot"}, {q: 0 for q in AUTO}, {"1a": "answers.yaml missing"}),
    "in_a_folder": ({"hw/answers.yaml": REFERENCE}, AUTO, {}),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("written")
    zips = [write_zip(folder / f"{name}.zip", files) for name, (files, _, _) in CASES.items()]
    return grade_all(zips, folder / "out", extra=["--assignment", "written"])


@pytest.mark.parametrize("name", CASES)
def test_each_question_scores_what_its_answers_earn(graded, name):
    _, keeps, words = CASES[name]
    r = graded[name]
    assert r["assignment"] == "written" and r["max_score"] == 9 and r["grader_error"] is None
    scores = {i["id"]: i["score"] for i in r["items"] if i["status"] != "manual"}
    assert scores == keeps, {i: messages(r, i) for i in lost(r)}
    assert r["score"] == sum(keeps.values())
    for item, text in words.items():  # every check's message: a passed one shows how the answer was read
        said = " | ".join(c["message"] for c in items(r)[item]["checks"])
        assert text in said, said
    manual = items(r)["4"]
    assert manual["status"] == "manual" and manual["score"] == 0 and manual["max_score"] == 3
    assert manual["rubric"] and not any(items(r)[q]["rubric"] for q in AUTO)  # an auto rubric states the answer


def test_no_key_value_in_what_students_read(graded):
    r = graded["wrong_number"]
    page = json.dumps(to_gradescope(Results.model_validate(r), "visible"))
    jsonschema.validate(json.loads(page), json.loads(SCHEMA_FILE.read_text()))
    assert "64" not in messages(r, "1a") and "1048576" not in page
    assert "Graded by hand" in page and "saturates" not in page  # the manual rubric stays with the graders


def test_a_file_that_cannot_be_read_is_named_once_in_problems(graded):
    r = graded["alias_bomb"]
    assert list(r["problems"]) == ["answers.yaml"] and "line 1" in r["problems"]["answers.yaml"]
    assert all(r["problems"]["answers.yaml"] in messages(r, q) for q in AUTO)  # each item still says why
    assert graded["reference"]["problems"] == {} and "answers.yaml" in graded["missing"]["problems"]


def test_an_expression_is_never_run(graded):
    assert "contains text in quotes" in messages(graded["code_is_data"], "2a")
    assert not __import__("pathlib").Path("/tmp/pwned").exists()


def test_an_alias_is_a_warning_not_a_loss(graded):
    r = graded["typeset"]
    assert r["score"] == sum(AUTO.values())
    assert r["warnings"] == ["2a (answers.yaml line 6): 'dk' was read as d_k, the name this part uses; write d_k"]
