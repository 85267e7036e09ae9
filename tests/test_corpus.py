"""Sensitivity and fairness: every planted bug loses points on its item, every correct-but-different
implementation scores full marks; a bug that is a known mistake is named, exactly, on its item, and
no variant is ever told of a mistake it did not make. The corpus (tests/corpus/variants.py) is
checked against the reference outside the grader by tests/corpus/verify_variants.py."""

import re

import pytest
from conftest import REFERENCE, TEST_LIMITS, grade_all, items, lost, messages, write_zip

from corpus.variants import DIAGNOSES, VARIANTS, apply, diagnosed_exactly, diagnoses, expected_diagnoses

BUGS = [v for v in VARIANTS if v.kind == "bug"]
CORRECT = [v for v in VARIANTS if v.kind == "correct"]


TRAINING = "3(b)iii"


def _needs_training(v) -> bool:
    return v.kind == "correct" or TRAINING in v.loses + v.keeps or any(e.file == "train.py" for e in v.edits) \
        or any(f == "train.py" for f, _ in v.replace)


@pytest.fixture(scope="session")
def corpus_graded(tmp_path_factory):
    """Every variant graded by real `grade` processes. A bug that neither touches train.py nor names
    3(b)iii is graded without the training run (`--only` every other item), which halves its cost;
    correct variants get the whole grade."""
    folder = tmp_path_factory.mktemp("corpus")
    zips = {v.name: write_zip(folder / f"{v.name}.zip", apply(v, REFERENCE)) for v in VARIANTS}
    extra = TEST_LIMITS
    others = [arg for i in spec_items() if i != TRAINING for arg in ("--only", i)]
    full = [zips[v.name] for v in VARIANTS if _needs_training(v)]
    partial = [zips[v.name] for v in VARIANTS if not _needs_training(v)]
    out = tmp_path_factory.mktemp("corpus-out")
    return {**grade_all(full, out / "full", jobs=2, extra=extra),
            **grade_all(partial, out / "partial", jobs=2, extra=extra + others)}


def spec_items() -> list[str]:
    from graders.spec import load_spec, spec_path

    return [i.id for i in load_spec(spec_path("a3")).items]


def test_corpus_is_big_enough():
    assert len(BUGS) >= 15 and len(CORRECT) >= 6
    assert set(DIAGNOSES) <= {v.name for v in BUGS}  # no expectation for a bug that is not there


@pytest.mark.parametrize("variant", BUGS, ids=lambda v: v.name)
def test_planted_bug_loses_points_on_its_item(corpus_graded, variant):
    r = corpus_graded[variant.name]
    by_id = items(r)
    assert _needs_training(variant) or TRAINING not in by_id and r["warnings"][0].startswith("partial grade")
    for item in variant.loses:
        if by_id[item]["max_score"] == 0:  # utils: no points, but the check must fail
            assert by_id[item]["status"] != "passed", f"{variant.name}: {item} passed"
        else:
            assert item in lost(r), f"{variant.name}: {item} kept {by_id[item]['score']}"
        assert messages(r, item), f"{variant.name}: no message on {item}"
    for item in variant.keeps:
        assert by_id[item]["score"] == by_id[item]["max_score"] and by_id[item]["status"] in ("passed",), \
            f"{variant.name}: {item} lost points: {messages(r, item)}"
    assert not [c for i in r["items"] for c in i["checks"] if c["status"] == "error"]


@pytest.mark.parametrize("variant", BUGS, ids=lambda v: v.name)
def test_planted_bug_gets_exactly_its_diagnosis(corpus_graded, variant):
    r = corpus_graded[variant.name]
    assert diagnosed_exactly(variant, r), \
        f"{variant.name}: diagnosed {sorted(diagnoses(r))}, expected {expected_diagnoses(variant.name)}"


@pytest.mark.parametrize("variant", CORRECT, ids=lambda v: v.name)
def test_correct_but_different_scores_full_marks(corpus_graded, variant):
    r = corpus_graded[variant.name]
    failed = {i["id"]: messages(r, i["id"]) for i in r["items"] if i["id"] in lost(r)}
    assert r["score"] == 30, f"{variant.name}: {failed}"
    assert not diagnoses(r)
    assert items(r)["utils"]["status"] == "passed"


def test_no_message_depends_on_the_run(corpus_graded):
    """The same zip gets the same feedback: no object address, which differs from run to run, in
    any check's message (a not-applicable check within an explicit example once quoted Hypothesis's
    note of the example's arguments, `a3=<a3_checklib.A3 object at 0x7f...>`)."""
    found = {(name, c["name"]): c["message"][:300] for name, r in corpus_graded.items() for i in r["items"]
             for c in i["checks"] if re.search(r"\b0x[0-9a-f]{6,}", c["message"] or "")}
    assert not found, found


# bug -> {item: the items its failing checks point at as the likely cause}; {}: no pointer anywhere
# (the bug is in the item that fails, whose own checks say so).
UPSTREAM = {
    "mlp_relu": {i: {"3(a)ii"} for i in ("3(a)iv", "3(a)v", "3(a)vi", "3(b)ii")},
    "attn_no_mask": {i: {"3(a)iii"} for i in ("3(a)iv", "3(a)v", "3(a)vi", "3(b)ii")},
    "block_post_norm": {i: {"3(a)iv"} for i in ("3(a)v", "3(a)vi", "3(b)ii")},
    "forward_no_positions": {i: {"3(a)v"} for i in ("3(a)vi", "3(b)ii")},
    "forward_returns_probs": {"3(b)ii": {"3(a)v"}},
    "loss_sum": {},
    "generate_one_short": {},
}


def upstream_notes(results: dict) -> dict[str, set[str]]:
    notes: dict[str, set[str]] = {}
    for item in results["items"]:
        for c in item["checks"]:
            # cascade's note, or charge once's "not charged here: this check also runs your ..."
            m = re.search(r"[Tt]his check also runs your (.*?), which fails? (its|their) own checks", c["message"])
            if m:
                notes.setdefault(item["id"], set()).update(re.findall(r"\((\d\([a-c]\)[iv]*)\)", m.group(1)))
    return notes


def test_upstream_expectations_name_corpus_bugs():
    assert set(UPSTREAM) <= {v.name for v in BUGS}


@pytest.mark.parametrize("variant", BUGS, ids=lambda v: v.name)
def test_a_downstream_failure_points_at_the_item_that_fails_on_its_own(corpus_graded, variant):
    r = corpus_graded[variant.name]
    notes = upstream_notes(r)
    failing = {i["id"] for i in r["items"] if any(c["status"] == "failed" for c in i["checks"])}
    for item, named in notes.items():
        assert named and named <= failing - {item}, f"{variant.name}: {item} points at {named}"
    if variant.name in UPSTREAM:
        assert notes == UPSTREAM[variant.name], notes
