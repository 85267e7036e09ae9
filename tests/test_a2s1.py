"""A2S1, the attention notebook: real notebooks (percent .py, nbconvert script, .ipynb) graded by
real `grade --assignment a2s1` processes; planted wrong answers lose exactly their items."""

import json
import re
from pathlib import Path

import pytest
import torch

from graders.checks.notebook import read_cells
from graders.spec import load_spec, spec_path

from conftest import REPO, grade_all, items, lost, messages, write_zip

A2S1 = REPO / "assignment" / "a2s1"
REFERENCE = (A2S1 / "reference" / "A2S1.py").read_text()
ALL = {"1.2.1", "1.2.2", "1.3.1", "1.3.2", "1.3.3a", "1.3.3b"}
# 10 s: a first cell imports what the notebook imports, which on a loaded 2-core CI took past 3 s once.
LIMITS = ["--assignment", "a2s1", "--limit", "call_timeout_s=10"]


def edit(old: str, new: str, text: str = REFERENCE) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def ipynb(text: str, extra_cells: list[tuple[str, str]] = ()) -> str:
    """The percent-format script as a Jupyter notebook, with `extra_cells` (type, source) first."""
    cells = [{"cell_type": t, "metadata": {}, "source": s.splitlines(True), **({"outputs": [], "execution_count": None}
                                                                              if t == "code" else {})}
             for t, s in extra_cells]
    for block in re.split(r"^# %%", text, flags=re.M)[1:]:
        header, _, body = block.partition("\n")
        if "[markdown]" in header:
            cells.append({"cell_type": "markdown", "metadata": {},
                          "source": [line.removeprefix("# ").removeprefix("#") + "\n" for line in body.splitlines()]})
        else:
            cells.append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                          "source": body.strip("\n").splitlines(True)})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def nbconvert(text: str) -> str:
    """The script `jupyter nbconvert --to script` writes: `# In[ ]:` markers, magics via get_ipython()."""
    counter = iter(range(1, 100))
    body = re.sub(r"^# %%.*$", lambda m: f"# In[{next(counter)}]:", text, flags=re.M)
    return "get_ipython().system('pip install torch')\nget_ipython().run_line_magic('matplotlib', 'inline')\n" + body


# name -> (files, items lost, {item: words its message has}, {item: diagnosis id})
VARIANTS: dict[str, tuple[dict[str, str], set[str], dict[str, str], dict[str, str]]] = {
    "reference": ({"A2S1.py": REFERENCE}, set(), {}, {}),
    "ipynb_with_magics": ({"A2S1.ipynb": ipynb(
        edit("query131 = torch.zeros(1, 3)", "%time x = 1\nquery131 = torch.zeros(1, 3)"),
        [("code", "!pip install torch\n%matplotlib inline\n"), ("code", "%%bash\necho not python\n"),
         ("code", "%%time\nwarm = torch.ones(1)\n")])}, set(), {}, {}),
    "nbconvert_script": ({"A2S1.py": nbconvert(REFERENCE)}, set(), {}, {}),
    "lists_not_tensors": ({"A2S1.py": edit("query131 = torch.zeros(1, 3)", "query131 = [[0, 0, 0]]")}, set(), {}, {}),
    "selects_value_1": ({"A2S1.py": edit("query121 = 100 * key[0:1]", "query121 = 100 * key[1:2]")},
                        {"1.2.1"}, {"1.2.1": "differs from value[0]"}, {"1.2.1": "output_is_1"}),
    "not_sharp": ({"A2S1.py": edit("query121 = 100 * key[0:1]", "query121 = 2 * key[0:1]")},
                  {"1.2.1"}, {"1.2.1": "tolerance 0.05"}, {"1.2.1": "softmax_not_sharp"}),
    "identity_reversed": ({"A2S1.py": edit("query122 = 100 * key", "query122 = 100 * key.flip(0)")},
                          {"1.2.2"}, {"1.2.2": "row 0 of attention(query122"}, {"1.2.2": "output_is_3"}),
    "wrong_shape": ({"A2S1.py": edit("query122 = 100 * key", "query122 = 100 * key[:3]")},
                    {"1.2.2"}, {"1.2.2": "shape (3, 3)"}, {}),
    "average_of_ones": ({"A2S1.py": edit("query131 = torch.zeros(1, 3)", "query131 = 5 * torch.ones(1, 3)")},
                        {"1.3.1"}, {"1.3.1": "mean of all 4 values"}, {"1.3.1": "output_is_0"}),
    "m_key_changes_row_1": ({"A2S1.py": edit("m_key[2] = key[0]\n", "m_key[2] = key[0]\nm_key[1] = key[1] * 2\n")},
                            {"1.3.3a"}, {"1.3.3a": "changes row 1"}, {}),
    "m_key_once": ({"A2S1.py": edit("m_key = key.clone()\nm_key[2] = 10 * key[0]\n", "")},
                   {"1.3.3b"}, {"1.3.3b": "the second m_key is not answered (A2S1.py): its cell, cell 7 (line 66), "
                                          "does not set m_key"}, {}),
    "m_key_unchanged": ({"A2S1.py": edit("m_key[2] = key[0]\n", "")}, {"1.3.3a"}, {"1.3.3a": "key unchanged"}, {}),
    "cell_raises": ({"A2S1.py": edit("query121 = 100 * key[0:1]", "raise ValueError('not yet')\nquery121 = 1")},
                    {"1.2.1"}, {"1.2.1": "cell 2 (line 29) failed before it set query121: ValueError, line 30"}, {}),
    "cell_syntax_error": ({"A2S1.py": edit("query131 = torch.zeros(1, 3)", "query131 = torch.zeros(1, 3))")},
                          {"1.3.1"}, {"1.3.1": "its cell, cell 4 (line 45), did not run: SyntaxError, line 46"}, {}),
    "cell_hangs": ({"A2S1.py": edit("query122 = 100 * key", "while True:\n    pass")},
                   {"1.2.2"}, {"1.2.2": "query122 is not answered (A2S1.py): its cell, cell 3 (line 34), did not run: timed out"}, {}),
    # A process a cell leaves running is the notebook's own: the later cells keep its namespace.
    "cell_leaves_a_child": ({"A2S1.py": edit("query121 = 100 * key[0:1]", "import subprocess, sys\n"
                                             "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                                             "query121 = 100 * key[0:1]")}, set(), {}, {}),
    "cell_exits": ({"A2S1.py": edit("query131 = torch.zeros(1, 3)", "import sys\nsys.exit(3)")},
                   {"1.3.1"}, {"1.3.1": "sys.exit(3)"}, {}),
    # Answers right for the student's own data: the grader's key and value are what count.
    "own_value": ({"A2S1.py": edit("query121 = 100 * key[0:1]", "value[0] = value[3]\nquery121 = 100 * key[3:4]")},
                  {"1.2.1"}, {"1.2.1": "differs from value[0]"}, {"1.2.1": "output_is_3"}),
    # The grader's own files are out of the worker's reach: the answer is given only if one is read.
    "reads_hidden_files": ({"A2S1.py": edit("query121 = 100 * key[0:1]", f"""try:
    stolen = [open(p).read() for p in {[str(A2S1 / "checks" / "a2s1_checklib.py"), str(A2S1 / "reference" / "A2S1.py")]}]
    query121 = 100 * key[0:1]
except OSError:
    query121 = None""")}, {"1.2.1"}, {"1.2.1": "still None"}, {}),
    "huge_answer": ({"A2S1.py": edit("query131 = torch.zeros(1, 3)", "query131 = torch.zeros(1 << 22, 3)")},
                    {"1.3.1"}, {"1.3.1": "shape (4194304, 3)"}, {}),
    "template": ({"A2S1.py": (A2S1 / "template" / "A2S1.py").read_text()}, ALL,
                 {"1.2.1": "cell 2 (line 26) is still the template's placeholder"}, {}),
    "missing": ({"README.md": "nothing"}, ALL, {"1.2.1": "A2S1.py or A2S1.ipynb missing"}, {}),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("a2s1")
    zips = [write_zip(folder / f"{name}.zip", files) for name, (files, *_) in VARIANTS.items()]
    return grade_all(zips, folder / "out", extra=LIMITS)


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_loses_exactly_its_items(graded, name):
    _, expected, words, diagnoses = VARIANTS[name]
    r = graded[name]
    assert lost(r) == expected, {i: messages(r, i) for i in lost(r)}
    assert r["score"] == r["max_score"] - sum(items(r)[i]["max_score"] for i in expected)
    for item, text in words.items():
        assert text in messages(r, item), messages(r, item)
    for item in ALL:
        found = {c["diagnosis"]["id"] for c in items(r)[item]["checks"] if c.get("diagnosis")}
        assert found == ({diagnoses[item]} if item in diagnoses else set()), (item, found)


def test_reference_full_marks_and_no_training_section(graded, tmp_path):
    r = graded["reference"]
    assert r["score"] == r["max_score"] == 12 and not r["problems"] and not r["warnings"]
    assert r["assignment"] == "a2s1" and r["submission"]["files"] == ["A2S1.py"]
    assert graded["ipynb_with_magics"]["submission"]["files"] == ["A2S1.ipynb"]


def test_grader_data_is_the_notebooks(tmp_path):
    """The checks' key and value are the ones the notebook's own first cell makes."""
    import a2s1_checklib  # noqa: F401  (on sys.path through the fixture below)

    p = load_spec(spec_path("a2s1")).params
    key, value = a2s1_checklib.notebook_data(p["seed"], p["rows"], p["dim"], p["decimals"])
    ns: dict = {}
    exec(read_cells(A2S1 / "reference" / "A2S1.py")[0].source, ns)  # our own reference, trusted
    assert torch.equal(ns["key"].double(), key) and torch.equal(ns["value"].double(), value)


def test_tolerance_separates_every_target():
    """The spec's justification holds: every target is further than the tolerance from any other
    mean of value rows, and two means are more than twice the diagnosis radius apart."""
    import a2s1_checklib

    p = load_spec(spec_path("a2s1")).params
    _, value = a2s1_checklib.notebook_data(p["seed"], p["rows"], p["dim"], p["decimals"])
    means = {rows: value[list(rows)].mean(0) for rows in [(0,), (1,), (2,), (3,), (0, 1), (0, 2), (0, 3), (1, 2),
                                                          (1, 3), (2, 3), (0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3),
                                                          (0, 1, 2, 3)]}
    gaps = {(a, b): float((ma - mb).abs().max()) for a, ma in means.items() for b, mb in means.items() if a < b}
    assert min(gaps.values()) > 2 * p["diagnosis_radius"]
    for target in [(0,), (1,), (2,), (3,), (0, 1, 2, 3), (0, 1), (0, 1, 2)]:
        assert min(g for pair, g in gaps.items() if target in pair) > p["tolerance"]


@pytest.fixture(autouse=True)
def _checklib_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(A2S1 / "checks"))


def test_cells_of_each_format(tmp_path):
    py = tmp_path / "A2S1.py"
    py.write_text("import x\n# %% [markdown]\n# text\n# %%\n!ls\n%time y = 1\n# %%time\nz = 2\n")
    cells = read_cells(py)
    assert [(c.number, c.first_line) for c in cells] == [(1, 1), (2, 5)]
    assert cells[1].source == "pass\ny = 1\n# %%time\nz = 2\n" and cells[1].assigns() == {"y", "z"}
    nb = tmp_path / "A2S1.ipynb"
    nb.write_text(ipynb("# %%\nq = 1\n", [("code", "%%bash\nls\n"), ("markdown", "# hi")]))
    cells = read_cells(nb)
    assert [c.skipped is not None for c in cells] == [True, False] and cells[1].assigns() == {"q"}


def test_report_shows_the_diagnosis_and_no_training_section(graded):
    from graders.reports.html import render
    from graders.scoring.results import Results

    page = render(Results.model_validate(graded["selects_value_1"]))
    assert 'data-diagnosis="output_is_1"' in page and "Your output is value[1], not value[0]" in page
    assert "Training run" not in page
