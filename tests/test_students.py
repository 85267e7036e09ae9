"""Whole, correct solutions written the way students write them (tests/corpus/students/), each going
beyond the interface in its own ways (KV caches, extra arguments, dropout, tabs, a train() that
raises after its loop, files written for Python 3.14...): every one gets 30/30 from real grades,
with at most advisory warnings, and the warnings say what they should."""

import pytest
from conftest import grade_all, lost
from corpus.students import COVERAGE, DEFERRED, EXTENSIONS, HERE, RAISES_AFTER_TRAINING, STUDENTS, write_zips

WRITTEN = [n for n in STUDENTS if (HERE / n).is_dir()]


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    zips = write_zips(tmp_path_factory.mktemp("students"), WRITTEN)
    return grade_all(list(zips.values()), tmp_path_factory.mktemp("students-out"))


def test_the_corpus_is_large_and_covers_every_extension():
    assert len(WRITTEN) >= 25 and set(WRITTEN) == set(STUDENTS)
    assert not [tag for tag in EXTENSIONS if not COVERAGE[tag]], "an extension no solution shows"


# advice (no points) that is true of a solution with the tag: its dropout is random in train mode,
# its tensors made without device= stay on the CPU
ADVICE = {"dropout": "warn_deterministic_train_mode", "arange_no_device": "warn_device_safe"}


@pytest.mark.parametrize("name", WRITTEN)
def test_a_correct_solution_gets_full_marks(graded, name):
    r = graded[name]
    assert r["score"] == 30 and not r["problems"], (STUDENTS[name], lost(r), r["problems"])
    failed = {c["name"] for i in r["items"] for c in i["checks"] if c["status"] == "failed"}
    assert failed == {ADVICE[tag] for tag in STUDENTS[name].split(", ") if tag in ADVICE}, \
        [(c["name"], c["message"]) for i in r["items"] for c in i["checks"] if c["status"] == "failed"]
    assert all(i["status"] == "passed" for i in r["items"] if i["max_score"] and not i["bonus"])


@pytest.mark.parametrize("name", WRITTEN)
def test_warnings_say_only_what_happened(graded, name):
    warnings = graded[name]["warnings"]
    after_loop = [w for w in warnings if w.startswith("train() raised after its training loop had finished")]
    postponed = [w for w in warnings if "postponed evaluation of annotations" in w]
    assert len(after_loop) == (name in RAISES_AFTER_TRAINING), warnings
    assert bool(postponed) == (name in DEFERRED), warnings
    for w in postponed:
        assert w.startswith("model_solution.py, line ") or w.startswith("train.py, line "), w
