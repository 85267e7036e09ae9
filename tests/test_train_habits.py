"""train.py as students really write it (tests/corpus/train_habits/): each whole file graded end to end
by real `grade` processes, with the reference's model code (or a planted loss bug), gets its
expected score and says what it should: 30/30 with a warning naming each stand-in's line, or,
where the habit truly stops training, a message naming the line and the fix; a loss bug costs
3(b)ii only."""

import ast

import pytest
from conftest import grade_all, lost, messages, write_zip

from corpus.train_habits import CASES, HERE, files

WRITTEN = sorted(p.stem for p in HERE.glob("*.py") if p.name != "__init__.py")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("habits")
    zips = [write_zip(folder / f"{name}.zip", files(name)) for name in CASES]
    return grade_all(zips, tmp_path_factory.mktemp("habits-out"), jobs=2)


def test_the_corpus_is_whole_train_files_each_graded():
    assert len(WRITTEN) >= 15 and set(WRITTEN) == {c.train for c in CASES.values()}
    for name in WRITTEN:
        source = (HERE / f"{name}.py").read_text()
        if name == "colab_export":  # its !pip lines are the habit: it parses once they are skipped
            source = "\n".join("pass" if line.startswith("!") else line for line in source.splitlines())
        tree = ast.parse(source)
        assert any(isinstance(n, ast.FunctionDef) and n.name == "train" for n in tree.body), name


def _said(r: dict, items: tuple[str, ...]) -> str:
    return " | ".join([*r["problems"].values(), *(messages(r, i) for i in items)])


@pytest.mark.parametrize("name", CASES)
def test_each_habit_gets_its_score_and_its_words(graded, name):
    r, case = graded[name], CASES[name]
    assert (r["score"], lost(r)) == (case.score, set(case.lost)), (case.habits, _said(r, tuple(lost(r))))
    said = _said(r, case.lost)
    for words in case.says:
        assert words in said, (words, said)
    warnings = " | ".join(r["warnings"])
    for words in case.warns:
        assert words in warnings, (words, r["warnings"])
    if not case.warns:
        assert r["warnings"] == [], r["warnings"]
    assert not [c for i in r["items"] for c in i["checks"] if c["status"] == "error"]


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.lost == ("3(b)iii",)])
def test_a_habit_that_stops_training_is_told_by_its_line_in_our_words(graded, name):
    said = _said(graded[name], CASES[name].lost)
    assert "line " in said, said
    assert "http" not in said and "huggingface.co" not in said and "offline mode" not in said, said


TRACKER = 'import my_tracker  # the course\'s own tracker\nmy_tracker.start(project="a3")\n'


@pytest.mark.parametrize("listed", [False, True], ids=["default list", "course's list"])
def test_a_course_extends_the_list_of_stand_ins_in_its_spec(tmp_path, listed):
    """The list is the spec's data: a package a course adds is stood in for like the defaults."""
    from graders.runner import grade
    from graders.spec import load_spec, spec_path

    spec = load_spec(spec_path("a3")).only(["3(b)iii"])
    if listed:
        spec = spec.model_copy(update={"inert_packages": (*spec.inert_packages, "my_tracker")})
    submission = files("argparse_module_level")
    submission["train.py"] = TRACKER + submission["train.py"]
    r = grade(write_zip(tmp_path / "tracker.zip", submission), spec).model_dump()
    if listed:
        assert r["score"] == 3 and "train.py, line 1: my_tracker is left out of grading" in r["warnings"][0], r
    else:
        assert r["score"] == 0 and "it imports 'my_tracker'" in r["problems"]["train.py"], r["problems"]


def test_only_notebook_lines_that_stop_a_file_parsing_are_skipped():
    from graders.intake.shell_lines import skip_shell_lines

    text, warning = skip_shell_lines("train.py", "import os\n!pip install wandb\nif True:\n    %cd /content\nx = 1\n")
    assert text == "import os\npass\nif True:\n    pass\nx = 1\n"
    assert warning.startswith("train.py, lines 2, 4: `!pip install wandb`, `%cd /content` are notebook shell")
    assert skip_shell_lines("train.py", "x = 5 % 2\nprint('!')\n") is None  # parses: nothing to skip
    assert skip_shell_lines("train.py", "!pip install x\ndef f(:\n") is None  # still broken: refused as before
