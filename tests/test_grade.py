"""End to end: real zips through real `grade` processes and real workers."""

import copy
import json
import re
import subprocess

import pytest

from conftest import GRADE, REPO, edited, items, lost, messages, reference_files, write_zip
from scenarios import stub


def test_the_demo_zips_grade_as_the_readme_says(graded):
    assert graded["demo_reference"]["score"] == 30
    planted = lost(graded["demo_planted_bug"])
    assert "3(a)iii" in planted and not planted & {"3(a)ii", "3(b)iii"}
    assert "differs from the reference" in messages(graded["demo_planted_bug"], "3(a)iii")


def test_reference_scores_full_marks(graded):
    r = graded["reference"]
    assert (r["score"], r["max_score"], r["bonus_max"]) == (30, 30, 9)
    assert all(c["status"] in ("passed", "not_applicable") for i in r["items"] for c in i["checks"])
    assert r["warnings"] == [] and r["problems"] == {} and r["grader_error"] is None
    t = r["training"]
    assert t["initial_loss"] - t["final_loss"] >= 1 and t["steps"] == 100 and t["plot"] == "losses_and_grad_norms.png"
    assert len(t["recorded_losses"]) == 100


def test_a_zip_with_one_folder_and_mac_junk_grades_the_same(graded):
    assert graded["nested"]["score"] == 30


def test_same_submission_same_json_but_timings(graded):
    a, b = (copy.deepcopy(graded[k]) for k in ("reference", "reference_again"))  # the fixture is shared
    for r in (a, b):
        r.pop("timings")
        r["submission"].pop("name")
        r["output"]["stderr"] = ""  # tqdm's rates are timings too
    assert a == b


def test_stub_scores_zero_with_not_implemented_feedback(graded):
    r = graded["stub"]
    assert r["score"] == 0
    for item in ("3(a)ii", "3(a)iii", "3(a)iv", "3(a)v", "3(a)vi", "3(b)ii"):
        assert "not implemented" in items(r)[item]["feedback"], items(r)[item]["feedback"]
    assert all(c["status"] != "error" for i in r["items"] for c in i["checks"])


@pytest.mark.parametrize("case, reason", [
    ("hang_in_generate", "timed out after 2 s in Transformer.generate"),
    ("segfault_in_generate", "worker killed by SIGSEGV in Transformer.generate"),
    ("exit_in_generate", "sys.exit(0) was called"),
    ("os_exit_in_generate", "worker exited with status 3 during Transformer.generate"),
    ("memory_bomb_in_generate", "RuntimeError in Transformer.generate"),
])
def test_a_broken_method_costs_its_item_only(graded, case, reason):
    r = graded[case]
    assert lost(r) == {"3(a)vi"}, lost(r)
    assert r["score"] == 25
    assert reason in messages(r, "3(a)vi")


def test_randomness_fails_its_item_without_a_grader_error(graded):
    r = graded["random_generate"]
    assert lost(r) == {"3(a)vi"}
    assert all(c["status"] != "error" for i in r["items"] for c in i["checks"])


@pytest.mark.parametrize("case, words", [("device_unsafe", "torch.arange without device="),
                                         ("dropout", "different logits for the same input")])
def test_warnings_cost_no_points(graded, case, words):
    r = graded[case]
    assert r["score"] == 30
    assert any(words in w for w in r["warnings"]), r["warnings"]


def test_broken_attention_is_charged_once(graded):
    """The block's check that runs the broken attention is excused (charge once): the block keeps
    its points through its stand-in check, and the excused check says what it found."""
    r = graded["raise_in_attention"]
    assert items(r)["3(a)ii"]["score"] == 1
    block = {c["name"]: c for c in items(r)["3(a)iv"]["checks"]}
    assert {n: c["status"] for n, c in block.items()} == {"block_agrees": "not_applicable", "block_wiring": "passed"}
    assert items(r)["3(a)iv"]["score"] == 2
    assert block["block_agrees"]["message"].startswith("not charged here: this check also runs your "
                                                       "CausalAttention.forward (3(a)iii), which fails its own checks")
    assert "What this check found: ValueError in DecoderBlock.forward (model_solution.py, line" in block["block_agrees"]["message"]
    # the training run needs the attention and has no check without it: charged there too (test_fairness)
    assert {i["id"] for i in r["items"] if i["score"] < i["max_score"] and not i["bonus"]} == {"3(a)iii", "3(b)iii"}
    assert "ValueError in CausalAttention.forward (model_solution.py, line" in messages(r, "3(a)iii")


def test_a_stdout_flood_is_capped(graded):
    r = graded["stdout_flood"]
    assert r["score"] == 30
    assert len(r["output"]["stdout"]) < 70_000 and "more bytes not kept" in r["output"]["stdout"]


def test_syntax_error_names_file_and_line(graded):
    r = graded["syntax_error"]
    line = reference_files()["model_solution.py"].splitlines().index("class GELU(nn.Module):") + 1
    assert r["problems"]["model_solution.py"] == f"model_solution.py, line {line}: SyntaxError: expected ':'"
    assert r["score"] == 0
    assert items(r)["3(a)iii"]["feedback"].startswith("model_solution.py, line")
    assert items(r)["utils"]["status"] == "passed"  # utils.py is fine and still graded


def test_unknown_import_is_named(graded):
    msg = graded["unknown_import"]["problems"]["model_solution.py"]
    assert "imports 'einopz'" in msg and "line" in msg


def test_exit_at_import_costs_the_training_item_only(graded):
    r = graded["exit_at_import_of_train"]
    assert lost(r) == {"3(b)iii"}
    assert "train.py sys.exit(0) at import" in r["problems"]["train.py"]


def test_missing_train_py(graded):
    r = graded["no_train"]
    assert lost(r) == {"3(b)iii"} and r["score"] == 27
    assert items(r)["3(b)iii"]["feedback"] == "train.py missing from the submission"


def test_cli_prints_a_table_and_exits_zero(tmp_path):
    z = write_zip(tmp_path / "submission.zip", stub())
    run = subprocess.run([*GRADE, str(z), "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "3(a)iii" in run.stdout and "not implemented" in run.stdout
    assert re.search(r"^total\s+0\s+30\s", run.stdout, re.M), run.stdout
    assert json.loads((tmp_path / "out" / "results.json").read_text())["score"] == 0


def test_not_a_zip_gets_a_report_with_the_reason(tmp_path):
    bad = tmp_path / "submission.zip"
    bad.write_bytes(b"this is not a zip")
    run = subprocess.run([*GRADE, str(bad), "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0
    r = json.loads((tmp_path / "out" / "results.json").read_text())
    assert r["score"] == 0 and "not a readable zip file" in r["problems"]["submission"]


def test_only_regrades_one_item_and_says_so(tmp_path):
    """A planted attention bug, re-checked with --only: just that item, its loss, and a warning."""
    z = write_zip(tmp_path / "bug.zip", edited("model_solution.py", " / math.sqrt(self.d_attention)", ""))
    run = subprocess.run([*GRADE, str(z), "--out", str(tmp_path / "out"), "--only", "3(a)iii"], cwd=REPO,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    r = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [i["id"] for i in r["items"]] == ["3(a)iii"] and r["max_score"] == 6 and r["score"] < 6
    assert r["warnings"][0].startswith("partial grade: only 3(a)iii graded")
    assert "training" not in r or r["training"] is None


@pytest.mark.parametrize("args, says", [
    (["--only", "3(z)"], "unknown item 3(z)"),
    (["--limit", "memory_mb=lots"], "limits.memory_mb: Input should be a valid integer"),
    (["--set", "training.max_steps=0"], "training.max_steps: Input should be greater than or equal to 1"),
    (["--set", "training.nothing=1"], "expected NAME=VALUE with NAME one of"),
])
def test_bad_options_are_refused_before_grading(tmp_path, args, says):
    run = subprocess.run([*GRADE, str(tmp_path / "none.zip"), "--out", str(tmp_path / "out"), *args], cwd=REPO,
                         capture_output=True, text=True)
    assert run.returncode == 2 and says in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()
