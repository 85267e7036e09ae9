"""Fair on code that goes beyond the interface: a train() that raises once its loop is done, a file
written for Python 3.14's deferred annotations, a buffer of the student's own; a bug charged once
(and, as a course may choose, in cascade); messages about what never ran. Real zips, real grades."""

import pytest
from conftest import TEST_LIMITS, edited, grade_all, items, lost, write_zip

LOOP_END = '    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")\n\n\nif'
CHECKPOINT = ('    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")\n'
              '    torch.save(model.state_dict(), "checkpoints/final.pt")  # a folder the zip does not have\n\n\nif')
MID_LOOP = ("        if (step + 1) % 10 == 0:\n",
            "        if step == 49:\n            torch.save(model.state_dict(), 'checkpoints/step50.pt')\n"
            "        if (step + 1) % 10 == 0:\n")
ATTENTION_DEF = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        B, T, _ = x.shape"


def _py314() -> dict[str, str]:
    """Annotations that Python 3.11 evaluates at import and cannot: a bare Ellipsis in jaxtyping's
    Float, and a class named in its own body."""
    files = edited("model_solution.py", "from transformers import GPT2LMHeadModel",
                   "from jaxtyping import Float\nfrom torch import Tensor\nfrom transformers import GPT2LMHeadModel")
    files = edited("model_solution.py", ATTENTION_DEF,
                   "    def forward(self, x: Float[Tensor, ...]) -> Float[Tensor, ...]:\n        B, T, _ = x.shape", files)
    return edited("model_solution.py", 'def from_pretrained(cls) -> "Transformer":',
                  "def from_pretrained(cls) -> Transformer:", files)


CASES = {
    "checkpoint_after_loop": edited("train.py", LOOP_END, CHECKPOINT),
    "checkpoint_mid_loop": edited("train.py", *MID_LOOP),
    "python314_annotations": _py314(),
    # not an annotation: the retry must not happen, the import fails as written
    "python314_and_a_real_error": edited("model_solution.py", "\n\n@dataclass\nclass ModelConfig:",
                                         "\n\nFloat_table = {}[0]\n\n\n@dataclass\nclass ModelConfig:", _py314()),
    "persistent_buffer": edited("model_solution.py", "                             persistent=False)",
                                "                             persistent=False)\n"
                                "        self.register_buffer(\"bias\", torch.tril(torch.ones(config.context_length, "
                                "config.context_length)))"),
    "raise_in_attention": edited("model_solution.py", "        B, T, _ = x.shape\n",
                                 "        B, T, _ = x.shape\n        raise ValueError('not done yet')\n"),
    "syntax_error": edited("model_solution.py", "class GELU(nn.Module):", "class GELU(nn.Module)"),
}


@pytest.fixture(scope="module")
def fair(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("fair")
    zips = [write_zip(folder / f"{name}.zip", files) for name, files in CASES.items()]
    cascade = write_zip(folder / "cascade.zip", CASES["raise_in_attention"])
    graded = grade_all(zips, tmp_path_factory.mktemp("fair-out"))
    graded.update(grade_all([cascade], tmp_path_factory.mktemp("cascade-out"), jobs=1,
                            extra=TEST_LIMITS + ["--set", "scoring.policy=cascade"]))
    return graded


def test_train_raising_after_its_loop_is_graded_with_a_warning(fair):
    r = fair["checkpoint_after_loop"]
    assert r["score"] == 30, lost(r)
    line = CASES["checkpoint_after_loop"]["train.py"].splitlines().index(
        '    torch.save(model.state_dict(), "checkpoints/final.pt")  # a folder the zip does not have') + 1
    [warning] = [w for w in r["warnings"] if w.startswith("train() raised after its training loop had finished")]
    assert f"in train() (train.py, line {line}):" in warning and "checkpoints" in warning, warning
    assert r["training"]["final_loss"] < r["training"]["initial_loss"] - 1


def test_train_raising_inside_its_loop_still_fails(fair):
    r = fair["checkpoint_mid_loop"]
    assert lost(r) == {"3(b)iii"}
    assert items(r)["3(b)iii"]["score"] == 0
    assert "train() failed:" in items(r)["3(b)iii"]["feedback"] and "train.py, line" in items(r)["3(b)iii"]["feedback"]
    assert not any("after its training loop" in w for w in r["warnings"])


def test_a_file_for_python_314_annotations_is_imported_with_postponed_annotations(fair):
    r = fair["python314_annotations"]
    assert r["score"] == 30, lost(r)
    line = CASES["python314_annotations"]["model_solution.py"].splitlines().index(
        "    def forward(self, x: Float[Tensor, ...]) -> Float[Tensor, ...]:") + 1
    [warning] = [w for w in r["warnings"] if "postponed evaluation of annotations" in w]
    assert warning.startswith(f"model_solution.py, line {line}: evaluating an annotation failed on Python 3.")
    assert "AttributeError" in warning and "Python 3.14" in warning


def test_an_import_error_outside_annotations_is_not_retried(fair):
    r = fair["python314_and_a_real_error"]
    assert r["score"] == 0
    assert "KeyError" in r["problems"]["model_solution.py"], r["problems"]
    assert not any("postponed" in w for w in r["warnings"])


def test_a_buffer_of_the_students_own_keeps_full_marks(fair):
    assert fair["persistent_buffer"]["score"] == 30, lost(fair["persistent_buffer"])


def test_cascade_policy_charges_every_check_that_runs_the_bug(fair):
    once, cascade = fair["raise_in_attention"], fair["cascade"]
    # 3(b)iii has no check that runs without the student's model (train.py is given complete), so
    # a run that the attention breaks is charged there too, saying where to look first.
    assert lost(once) == {"3(a)iii", "3(b)iii"}
    training = {c["name"]: c for c in items(once)["3(b)iii"]["checks"]}["training_improves"]
    assert training["status"] == "failed" and "(This check also runs your" in training["message"], training
    assert {"3(a)iii", "3(a)iv", "3(a)v", "3(a)vi", "3(b)ii"} <= lost(cascade)
    assert cascade["score"] < once["score"]
    agrees = {c["name"]: c for c in items(cascade)["3(a)iv"]["checks"]}["block_agrees"]
    assert agrees["status"] == "failed" and "(This check also runs your CausalAttention.forward" in agrees["message"]


def test_a_file_that_does_not_compile_is_named_by_the_files_that_import_it(fair):
    r = fair["syntax_error"]
    assert r["problems"]["train.py"].startswith("train.py could not be graded: it imports model_solution, and "
                                                "model_solution.py could not be loaded (model_solution.py, line ")
    assert "not a module of the submission" not in r["problems"]["train.py"]


def test_a_failed_import_gives_no_advice_about_code_that_never_ran(fair):
    for case in ("syntax_error", "python314_and_a_real_error"):
        r = fair[case]
        assert not [w for w in r["warnings"] if "no randomness" in w or "device" in w or "past context_length" in w], \
            r["warnings"]
        assert all(c["status"] == "not_applicable" for c in items(r)["advice"]["checks"])

