"""Notebook answers as students leave them (graders/checks/notebook_answers.py): whole A2S1 and A2S2
notebooks edited the way students edit them (in place, out of order, a cell deleted or duplicated,
a definition after its use, comments stripped), graded end to end by real `grade` processes.
An answer is the value its name holds at the end of its own cell; a missing one says "not
answered" and names the cell."""

import json
import re

import pytest
from conftest import REPO, grade_all, items, lost, messages, write_zip

from graders.checks.notebook import read_cells
from graders.checks.notebook_answers import align

A2S1 = REPO / "assignment" / "a2s1"
A2S2 = REPO / "assignment" / "a2s2"
REF1 = (A2S1 / "reference" / "A2S1.py").read_text()
REF2 = (A2S2 / "reference" / "A2S2.py").read_text()
LIMITS1 = ["--assignment", "a2s1", "--limit", "call_timeout_s=10"]
LIMITS2 = ["--assignment", "a2s2", "--limit", "call_timeout_s=8", "--limit", "train_timeout_s=30"]

MK1 = "m_key = key.clone()\nm_key[2] = key[0]\n"  # the reference's first m_key
MK2 = "m_key = key.clone()\nm_key[2] = 10 * key[0]\n"  # and its second
MK2_TODO = "# TODO: m_key such that the output is value[2]\n"


def blocks(text: str) -> list[str]:
    """The percent-format notebook's cells (markdown too), each from its `# %%` line."""
    return [b for b in re.split(r"(?m)^(?=# %%)", text) if b]


def code_index(cells: list[str], needle: str) -> int:
    found = [i for i, b in enumerate(cells) if needle in b and not b.startswith("# %% [markdown]")]
    assert len(found) == 1, (needle, found)
    return found[0]


def edit(text: str, *pairs: str) -> str:
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def moved(text: str, needle: str, after: str) -> str:
    """The cell holding `needle` moved to just after the cell holding `after`."""
    cells = blocks(text)
    cell = cells.pop(code_index(cells, needle))
    cells.insert(code_index(cells, after) + 1, cell)
    return "".join(cells)


def without(text: str, needle: str) -> str:
    cells = blocks(text)
    del cells[code_index(cells, needle)]
    return "".join(cells)


def duplicated(text: str, needle: str, first_copy: str | None = None) -> str:
    """The cell holding `needle` twice in a row (Jupyter's copy and paste); the first copy edited by
    `first_copy` (an earlier try), if given."""
    cells = blocks(text)
    i = code_index(cells, needle)
    copy = cells[i] if first_copy is None else cells[i].replace(needle, first_copy)
    cells.insert(i, copy)
    return "".join(cells)


def no_comments(text: str) -> str:
    """Every `# ...` line of the code cells gone (the TODOs among them), markdown kept."""
    out = []
    for cell in blocks(text):
        header, _, body = cell.partition("\n")
        if "[markdown]" not in header:
            body = "".join(line for line in body.splitlines(True) if not line.lstrip().startswith("#"))
        out.append(header + "\n" + body)
    return "".join(out)


def ipynb(text: str, counts: dict[str, int] | None = None) -> str:
    """The notebook as .ipynb; `counts`: the execution count saved with the code cell holding each
    text (the order the student ran them in), the others never run."""
    cells = []
    for cell in blocks(text):
        header, _, body = cell.partition("\n")
        if "[markdown]" in header:
            lines = [line.removeprefix("# ").removeprefix("#") + "\n" for line in body.splitlines()]
            cells.append({"cell_type": "markdown", "metadata": {}, "source": lines})
            continue
        count = next((n for needle, n in (counts or {}).items() if needle in body), None)
        cells.append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": count,
                      "source": body.strip("\n").splitlines(True)})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


A2S1_IN_PLACE = edit(
    REF1,
    MK1, "m_key = key.clone()\nm_key[2].fill_(0)\nm_key[2] += key[0]\n",
    # the issue's notebook: "same m_key, only row 2 changes again"
    MK2, "m_key[2] = 20 * query132[0]\n",
)

# name -> (files, items lost, {item: words its message has})
A2S1_VARIANTS: dict[str, tuple[dict[str, str], set[str], dict[str, str]]] = {
    "in_place": ({"A2S1.py": A2S1_IN_PLACE}, set(), {}),
    "index_put": ({"A2S1.py": edit(REF1, MK2, "m_key.index_put_((torch.tensor([2]),), 10 * key[0])\n")}, set(), {}),
    "copy_into_row": ({"A2S1.py": edit(REF1, MK2, "m_key[2].copy_(10 * key[0])\n")}, set(), {}),
    "times_equals": ({"A2S1.py": edit(REF1, MK2, "m_key[2] *= 10\n")}, set(), {}),
    "helper_mutates": ({"A2S1.py": edit(REF1, MK1, "def replace_row(k, i, row):\n    k[i] = row\n\n\n"
                                                   "m_key = key.clone()\nreplace_row(m_key, 2, key[0])\n",
                                        MK2, "replace_row(m_key, 2, 10 * key[0])\n")}, set(), {}),
    "cloned_first": ({"A2S1.py": edit(REF1, MK2, "m_key = m_key.clone()\nm_key[2] = 10 * key[0]\n")}, set(), {}),
    # a later cell edits earlier answers in place: each was copied at the end of its own cell
    "later_cell_edits_answers": ({"A2S1.py": edit(REF1, "plt.show()\n", "plt.show()\nm_key.zero_()\nquery121 *= 0\n"
                                                  "query122.fill_(1)\nquery132[0] = 0\n")}, set(), {}),
    "comments_stripped": ({"A2S1.py": no_comments(A2S1_IN_PLACE)}, set(), {}),
    # an earlier try left above the fixed copy of the cell: the later one is the answer
    "cell_duplicated": ({"A2S1.py": duplicated(duplicated(REF1, "query121 = 100 * key[0:1]", "query121 = key[0:1]"),
                                               MK1)}, set(), {}),
    # the answer in a cell added below the template's, which still has its placeholder
    "answer_in_added_cell": ({"A2S1.py": edit(REF1, "query131 = torch.zeros(1, 3)\n",
                                              "query131 = None\n\n# %%\nquery131 = torch.zeros(1, 3)\n")}, set(), {}),
    "second_m_key_deleted": ({"A2S1.py": without(A2S1_IN_PLACE, MK2_TODO)}, {"1.3.3b"},
                             {"1.3.3b": "the second m_key is not answered (A2S1.py): no cell sets m_key where the "
                                        "template has its cell ('# TODO: m_key such that the output is value[2]')"}),
    "second_m_key_deleted_no_comments": ({"A2S1.py": no_comments(without(A2S1_IN_PLACE, MK2_TODO))}, {"1.3.3b"},
                                         {"1.3.3b": "the second m_key is not answered (A2S1.py): no cell sets m_key"}),
    "second_m_key_emptied": ({"A2S1.py": edit(A2S1_IN_PLACE, "m_key[2] = 20 * query132[0]\n", "")}, {"1.3.3b"},
                             {"1.3.3b": "its cell, cell 7 (line 67), does not set m_key"}),
    "second_m_key_placeholder": ({"A2S1.py": edit(A2S1_IN_PLACE, "m_key[2] = 20 * query132[0]\n", "m_key = None\n")},
                                 {"1.3.3b"}, {"1.3.3b": "cell 7 (line 67) is still the template's placeholder"}),
    "first_m_key_deleted": ({"A2S1.py": without(REF1, "# TODO: m_key such that the output is the mean")}, {"1.3.3a"},
                            {"1.3.3a": "the first m_key is not answered (A2S1.py): no cell sets m_key"}),
    # query132's cell moved below its use, run first (the saved counts): the m_key cells' prints
    # fail, after they set m_key; every answer is still right
    "definition_after_use": ({"A2S1.ipynb": ipynb(
        moved(REF1, "query132 = (100", after=MK2),
        {"torch.manual_seed(447)": 1, "query121 = 1": 2, "query122 = 1": 3, "query131 = t": 4, "query132 = (": 5,
         MK1: 6, MK2: 7})}, set(), {}),
    # the in-place second m_key cell above the first, though the counts show the first ran first
    "in_place_above_its_base": ({"A2S1.ipynb": ipynb(
        moved(A2S1_IN_PLACE, "m_key[2] = 20", after="query132 = (100"),
        {"torch.manual_seed(447)": 1, "m_key[2].fill_(0)": 6, "m_key[2] = 20": 7})}, {"1.3.3b"},
        {"1.3.3b": "the second m_key is not answered (A2S1.ipynb): cell 6 failed before it set m_key: NameError, "
                   "line 2 (m_key[2] = 20 * query132[0]): name 'm_key' is not defined (m_key is set in cell 7, below "
                   "it; the saved notebook ran that cell first, In [6] before In [7]; the grader runs the cells top "
                   "to bottom, as Restart & Run All does)"}),
}


@pytest.fixture(scope="module")
def graded1(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("a2s1_left")
    zips = [write_zip(folder / f"{name}.zip", files) for name, (files, *_) in A2S1_VARIANTS.items()]
    return grade_all(zips, folder / "out", extra=LIMITS1)


@pytest.mark.parametrize("name", A2S1_VARIANTS)
def test_a2s1_notebook_as_left(graded1, name):
    _, expected, words = A2S1_VARIANTS[name]
    r = graded1[name]
    assert lost(r) == expected, {i: messages(r, i) for i in lost(r)}
    assert r["score"] == r["max_score"] - 2 * len(expected)
    for item, text in words.items():
        assert text in messages(r, item), messages(r, item)


def test_a_cell_that_failed_is_said_even_when_no_answer_lost(graded1):
    """The definition after its use costs nothing, but the student is told what Run All would show."""
    r = graded1["definition_after_use"]
    said = " ".join(r["warnings"])
    assert "A2S1.ipynb: 2 cells failed when run top to bottom" in said, r["warnings"]
    assert "cell 5 failed: NameError, line 4 (print(attention(query132, m_key, value), value[:3].mean(0))): name " \
           "'query132' is not defined (query132 is set in cell 7, below it; the saved notebook ran that cell first, " \
           "In [5] before In [6]" in said, said


def test_the_issue_notebook_loses_nothing_and_says_where(graded1):
    """The issue's notebook (the second m_key edits the first in place) gets 12/12, and the same
    notebook with that cell's code removed says which cell does not answer."""
    assert graded1["in_place"]["score"] == 12
    msg = messages(graded1["second_m_key_emptied"], "1.3.3b")
    assert "not answered" in msg and "differs" not in msg and "value[0], value[1] and value[2]" not in msg


def test_alignment_follows_what_the_cells_kept(tmp_path):
    """Template cells matched by a TODO kept, a given cell unchanged, or nothing (comments stripped):
    then only the given cells anchor, and the answers go by order. A moved cell still matches."""
    template = read_cells(A2S1 / "template" / "A2S1.py")

    def pairs(text: str) -> dict[int, int]:
        path = tmp_path / "A2S1.py"
        path.write_text(text)
        return align(template, read_cells(path))

    assert pairs(REF1) == {i: i for i in range(8)}
    assert pairs(no_comments(REF1)) == {0: 0, 7: 7}  # the data cell and the plot cell
    swapped = pairs(moved(REF1, "query131 = torch.zeros", after="query132 = (100"))
    assert swapped == {0: 0, 1: 1, 2: 2, 3: 4, 4: 3, 5: 5, 6: 6, 7: 7}, swapped


# -- A2S2 ----------------------------------------------------------------------------------------
UNSCALED = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


torch.manual_seed(0)
m = MiniTransformer(len(chars), d_model=32, n_heads=2, n_layers=1, context_length=16)
print("unscaled attention:", train(m, train_rows, steps=5, lr=3e-3)[-1])
'''
MASKED = '''    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        # step 2: a query never attends where mask is False
        scores = scores.masked_fill(~mask.bool(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''
UNMASKED = '''    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v
'''
STEP2 = "    return torch.tril(torch.ones(T, T, dtype=torch.bool))\n"

A2S2_VARIANTS: dict[str, tuple[str, set[str], dict[str, str]]] = {
    # the experiment (step 6) redefines attention: steps 1-5 are graded on their own cells
    "experiment_redefines_attention": (edit(REF2, "results = {}\n", UNSCALED + "\nresults = {}\n"), set(), {}),
    # step 1 left without the mask; step 2's cell defines attention again, with it
    "mask_added_in_step2_cell": (edit(REF2, MASKED, UNMASKED, STEP2, STEP2 + "\n\ndef scaled_dot_product_attention("
                                      "q, k, v, mask=None):\n" + MASKED), set(), {}),
    # the template's step 2 cell left as given, the answer in a cell added below it
    "step2_in_added_cell": (edit(REF2, STEP2, '    # TODO (step 2): (T, T) bool, True where query i may attend to key '
                                 'j\n    raise NotImplementedError("step 2")\n\n\n# %%\ndef causal_mask(T):\n' + STEP2),
                            set(), {}),
    "step3_cell_deleted": (without(REF2, "def split_heads(x, n_heads):"), {"3"},
                           {"3": "split_heads is not answered (A2S2.py): no cell sets split_heads where the template "
                                 "has its cell ('# TODO (step 3):"}),
}


@pytest.fixture(scope="module")
def graded2(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("a2s2_left")
    zips = [write_zip(folder / f"{name}.zip", {"A2S2.py": text}) for name, (text, *_) in A2S2_VARIANTS.items()]
    return grade_all(zips, folder / "out", extra=LIMITS2, seconds={z.stem: 6.0 for z in zips})


@pytest.mark.parametrize("name", A2S2_VARIANTS)
def test_a2s2_notebook_as_left(graded2, name):
    _, expected, words = A2S2_VARIANTS[name]
    r = graded2[name]
    assert lost(r) - {"6"} == expected, {i: messages(r, i) for i in lost(r)}
    for item, text in words.items():
        assert text in messages(r, item), messages(r, item)
    for item in {"1", "2", "3", "4", "5"} - expected:
        assert items(r)[item]["score"] == 4, messages(r, item)


def test_worker_state_copies_each_version_and_pins_a_cell():
    """The worker's record of a notebook (run here on our own code): an in-place edit is a new
    version, an earlier version keeps its numbers, and a request pinned at a cell sees them."""
    import torch

    from graders.execution.worker.nbstate import NotebookState
    from graders.execution.worker.ops import _answer_to_wire

    state = NotebookState({}, _answer_to_wire)
    ns = state.namespace
    exec("import torch\nm = torch.zeros(2)\ndef f():\n    return m.sum()\n", ns)  # noqa: S102  our own text
    assert set(state.record(1, ["m", "f"])) == {"m", "f"}
    ns["m"][0] = 5  # the next cell edits m in place: a new version; f is the same object, none
    changed = state.record(2, ["m", "f"])
    assert list(changed) == ["m"] and changed["m"]["array"].tolist() == [5.0, 0.0]
    ns["m"].fill_(7)
    assert state.record(3, ["m", "f"])["m"]["array"].tolist() == [7.0, 7.0]
    assert state.record(4, ["m", "f"]) == {}  # nothing changed
    assert [v.wire["array"].tolist() for v in state.versions["m"]] == [[0.0, 0.0], [5.0, 0.0], [7.0, 7.0]]
    with state.pinned(2):
        assert float(ns["f"]()) == 5.0  # f reads m as it was at the end of cell 2
    assert float(ns["f"]()) == 14.0 and torch.equal(ns["m"], torch.full((2,), 7.0))


def test_execution_counts_are_read_from_both_formats(tmp_path):
    script = tmp_path / "A2S1.py"
    script.write_text("# In[3]:\nx = 1\n\n\n# In[ ]:\ny = 2\n\n\n# In[ 12]:\nz = 3\n")
    assert [c.count for c in read_cells(script)] == [3, None, 12]
    notebook = tmp_path / "A2S1.ipynb"
    notebook.write_text(ipynb("# %%\nx = 1\n# %%\ny = 2\n# %% [markdown]\n# hi\n# %%\nz = 3\n", {"x = 1": 7, "z = 3": 2}))
    assert [c.count for c in read_cells(notebook)] == [7, None, 2]
