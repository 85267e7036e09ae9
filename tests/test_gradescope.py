"""`grade --gradescope PATH`: real zips through real `grade` processes, every file validated against
the JSON Schema written from Gradescope's documentation (graders/reports/schemas/gradescope_results.schema.json).

The graded runs here are shared with tests/test_html_report.py (`graded_runs`, run once per session)."""

import copy
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest

from conftest import GRADE, REPO, RESULTS_SCHEMA, SPARE, TEST_LIMITS, edited, reference_files, write_zip
from graders.deploy.batch import run_grade
from graders.tools import demo
from graders.reports.gradescope import SCHEMA_FILE, clip, handout_number, to_gradescope
from graders.scoring.results import Results
from graders.spec import load_spec, spec_path

SPEC = load_spec(spec_path("a3"))
GS_SCHEMA = json.loads(SCHEMA_FILE.read_text())

HOSTILE_NAME = '"><img src=x onerror=alert(1)>.zip'
HOSTILE_PRINT = "<script>alert(1)</script> <img src=x onerror=alert(2)>"
HOSTILE_RAISE = "<script>alert(3)</script><b onmouseover=alert(4)>bold</b>"


def _hostile_files() -> dict[str, str]:
    files = edited("model_solution.py", "        return self.fc2(self.gelu(self.fc1(x)))",
                   f"        raise ValueError({HOSTILE_RAISE!r})")
    return edited("model_solution.py", "from utils import state_dict_converter\n",
                  f"from utils import state_dict_converter\nprint({HOSTILE_PRINT!r}, flush=True)\n", files)


_RUNS: dict[str, dict] = {}


def _grade_once(base: Path) -> dict[str, dict]:
    """Grade the reference, the demo's planted bug and a hostile zip, in parallel, each in its own
    `grade` process with --gradescope; by name: its folder, results.json, Gradescope file, log."""
    if _RUNS:
        return _RUNS
    zips = dict(zip(("reference", "planted_bug"), demo.build(base / "zips")))
    zips["hostile"] = write_zip(base / "zips" / HOSTILE_NAME, _hostile_files())
    argvs = {name: [str(z), "--out", str(base / name), "--gradescope", str(base / f"{name}.gs.json"), *TEST_LIMITS,
                    *SPARE] for name, z in zips.items()}
    # Forked from this process's warm one where the platform allows, as grade_all's grades are.
    with ThreadPoolExecutor(len(argvs)) as pool:
        codes = pool.map(lambda name: run_grade(argvs[name], base / f"{name}.log", 900), argvs)
        codes = dict(zip(argvs, codes, strict=True))
    for name, code in codes.items():
        log = (base / f"{name}.log").read_text(errors="replace")
        assert code == 0, log[-3000:]
        out = base / name
        results = json.loads((out / "results.json").read_text())
        jsonschema.validate(results, RESULTS_SCHEMA)
        _RUNS[name] = {"out": out, "results": results, "log": log,
                       "gradescope": json.loads((base / f"{name}.gs.json").read_text())}
    return _RUNS


@pytest.fixture(scope="session")
def graded_runs(tmp_path_factory):
    return _grade_once(tmp_path_factory.mktemp("graded"))


def test_the_schema_is_a_valid_json_schema_and_not_vacuous():
    jsonschema.Draft202012Validator.check_schema(GS_SCHEMA)
    good = {"score": 1, "tests": [{"name": "a", "score": 1, "max_score": 1, "status": "passed", "visibility": "hidden"}]}
    jsonschema.validate(good, GS_SCHEMA)
    jsonschema.validate({"tests": [{"score": 0}]}, GS_SCHEMA)  # no top-level score: every test has one
    for bad in ({"tests": [{"name": "no score anywhere"}]},
                {**good, "visibility": "sometimes"},
                {**good, "stdout_visibility": "public"},
                {**good, "output_format": "latex"},
                {**good, "execution_time": "136"},
                {**good, "tests": [{"score": 1, "status": "ok"}]},
                {**good, "tests": [{"score": 1, "number": 1.1}]},
                {**good, "tests": [{"score": 1, "max_scores": 2}]},
                {**good, "leaderboard": [{"name": "Accuracy"}]},
                {**good, "scores": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, GS_SCHEMA)


def test_every_file_written_validates(graded_runs):
    for run in graded_runs.values():
        jsonschema.validate(run["gradescope"], GS_SCHEMA)


def test_reference_full_marks_in_handout_order(graded_runs):
    gs, results = graded_runs["reference"]["gradescope"], graded_runs["reference"]["results"]
    assert gs["score"] == results["score"] == 30
    assert isinstance(gs["execution_time"], (int, float)) and 0 < gs["execution_time"] < 900
    assert gs["stdout_visibility"] == SPEC.stdout_visibility
    assert gs["visibility"] == "visible" and gs["output_format"] == "text"
    tests = {t["tags"][0]: t for t in gs["tests"] if t["tags"] != ["output"]}
    assert list(tests) == [i.id for i in SPEC.items]
    for item in SPEC.items:
        t = tests[item.id]
        assert t["name"].startswith(f"{item.id} {item.title}")
        assert t["visibility"] == item.visibility and t["output_format"] == "text"
    numbers = [tuple(map(int, t["number"].split("."))) for t in gs["tests"]]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert tests["3(a)iii"]["number"] == "3.1.3" and tests["3(b)ii"]["number"] == "3.2.2"
    scored = [t for t in gs["tests"] if "status" in t and t["tags"] != ["output"]]
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in scored)
    assert sum(t["score"] for t in gs["tests"] if "score" in t) == gs["score"]


def test_the_bonus_is_listed_as_graded_by_hand_and_worth_nothing_here(graded_runs):
    bonus = next(t for t in graded_runs["reference"]["gradescope"]["tests"] if t["tags"][0] == "3(c)")
    assert (bonus["score"], bonus["max_score"]) == (0, 0) and "status" not in bonus
    assert "graded by hand" in bonus["output"].lower() and "9 bonus points" in bonus["output"]
    assert "graded by hand" in bonus["tags"] and "bonus" in bonus["tags"]


def test_failing_items_carry_every_failing_checks_message(graded_runs):
    gs, results = graded_runs["planted_bug"]["gradescope"], graded_runs["planted_bug"]["results"]
    assert gs["score"] == results["score"] < 30
    tests = {t["tags"][0]: t for t in gs["tests"]}
    failed_items = {i["id"] for i in results["items"]
                    if i["max_score"] and i["score"] < i["max_score"] and i["status"] != "manual"}
    assert "3(a)iii" in failed_items
    # The demo's bug (scores scaled by sqrt(d_model)) is a known mistake: named, on its item only.
    assert {(i["id"], c["diagnosis"]["id"]) for i in results["items"] for c in i["checks"] if c["diagnosis"]} \
        == {("3(a)iii", "attn_scaled_by_d_model")}
    for item in results["items"]:
        t = tests[item["id"]]
        if item["id"] in failed_items:
            assert t["status"] == "failed" and t["score"] == item["score"] and t["max_score"] == item["max_score"]
        for c in item["checks"]:
            if c["status"] in ("failed", "error"):
                assert f"✗ {c['title']}: {c['message']}" in t["output"]
                if c["measured"] is not None:
                    assert f"measured error {c['measured']:.3g}" in t["output"]
                if c["diagnosis"]:
                    assert f"diagnosis: {c['diagnosis']['explanation']}" in t["output"]
            elif c["status"] == "passed":
                assert f"✓ {c['title']}" in t["output"]


def test_hostile_submission_output_stays_text_and_follows_the_spec(graded_runs):
    gs = graded_runs["hostile"]["gradescope"]
    assert gs["output_format"] == gs["test_output_format"] == gs["test_name_format"] == "text"
    assert all(t["output_format"] == "text" for t in gs["tests"])
    printed = next(t for t in gs["tests"] if t["tags"] == ["output"])
    assert printed["visibility"] == SPEC.stdout_visibility
    assert HOSTILE_PRINT in printed["output"]
    mlp = next(t for t in gs["tests"] if t["tags"][0] == "3(a)ii")
    assert mlp["status"] == "failed" and mlp["score"] == 0 and HOSTILE_RAISE in mlp["output"]


def _results() -> Results:
    """A stored report to transform without grading: the reference's items, all visibilities."""
    items = []
    for n, item in enumerate(SPEC.items):
        items.append({"id": item.id, "title": item.title, "score": 0, "max_score": item.points, "bonus": item.bonus,
                      "status": "manual" if item.manual else "failed", "feedback": "x", "checks": [],
                      "visibility": ["visible", "hidden", "after_due_date", "after_published"][n % 4]})
    return Results.model_validate({"assignment": "a3", "grader_version": "t", "submission": {"name": "s", "sha256": "", "files": []},
                                   "score": 0, "max_score": 30, "bonus_score": 0, "bonus_max": 9, "items": items,
                                   "output": {"stdout": "a\rb\rprogress 100%\nline 2\n", "stderr": ""}})


def test_visibilities_come_from_the_report_and_the_spec():
    results = _results()
    for stdout_visibility in ("visible", "hidden", "after_due_date", "after_published"):
        gs = to_gradescope(results, stdout_visibility)
        jsonschema.validate(gs, GS_SCHEMA)
        assert gs["stdout_visibility"] == stdout_visibility
        assert [t["visibility"] for t in gs["tests"][:-1]] == [i.visibility for i in results.items]
        printed = gs["tests"][-1]
        assert printed["visibility"] == stdout_visibility
        assert "progress 100%\nline 2" in printed["output"] and "a\rb" not in printed["output"]


def test_a_grader_failure_still_gives_a_valid_file_with_score_zero():
    failed = _results().model_copy(update={"items": [], "grader_error": "RuntimeError: boom", "output": copy.copy(_results().output)})
    gs = to_gradescope(failed, "hidden")
    jsonschema.validate(gs, GS_SCHEMA)
    assert gs["score"] == 0 and "grader itself failed" in gs["output"] and "boom" in gs["output"]


def test_handout_numbers_and_clipping():
    assert [handout_number(i) for i in ("3(a)ii", "3(a)iv", "3(a)ix", "3(b)xiv", "3(c)", "12", "utils")] == \
        ["3.1.2", "3.1.4", "3.1.9", "3.2.14", "3.3", "12", None]
    text = "".join(chr(65 + i % 26) for i in range(50_000))
    short = clip(text, 1000)
    assert len(short) < 1100 and short.startswith(text[:400]) and short.endswith(text[-600:]) and "left out" in short


def test_gradescope_takes_one_submission(tmp_path):
    p = subprocess.run([*GRADE, "a.zip", "b.zip", "--gradescope", str(tmp_path / "r.json")], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "exactly one submission" in p.stderr
    assert not (tmp_path / "r.json").exists()
