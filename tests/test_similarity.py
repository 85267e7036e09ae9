"""`grade similarity` and `grade batch --similarity` on real zips, through real `grade` processes,
the page opened in real headless Chromium: a disguised copy (names renamed, reformatted, functions
reordered, comments and docstrings changed) scores near-identical, independent correct solutions
(tests/corpus/students/) score low, and two unfilled starters share nothing once the starter is
removed. Without the course's starter (a class built on another starter than the assignment's
template: bench/similarity_corpus.py), code common to the class is removed instead, in a folder of
5 as in one of 500, and untouched starters stay low. Nothing a submission holds is ever run."""

import ast
import csv
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GRADE, REFERENCE, REPO, write_zip
from graders.similarity.compare import compare
from graders.similarity.normalise import Unit, ast_stream
from graders.similarity.run import Options, run_similarity
from graders.similarity.sources import SourceFile, Submission, read_starter
from graders.spec import load_spec, spec_path
from graders.intake.submission import MAX_FILE_BYTES
from test_a2s1 import REFERENCE as A2S1_REFERENCE
from test_a2s1 import ipynb
from test_html_report import CONSOLE, by_id, chromium, parse

sys.path.insert(0, str(REPO / "bench"))
import similarity_corpus as course  # noqa: E402  (bench/: the course's starter, the disguises)

CORPUS = REPO / "tests" / "corpus" / "students"
STARTER = REPO / "student_template"
A2S1_STARTER = REPO / "assignment" / "a2s1" / "template" / "A2S1.py"
FILES = ("model_solution.py", "train.py", "utils.py")
ORIGINAL = "abe_block_mask"
HOSTILE = "<b onmouseover=x>&amp"  # a student named like markup: text in the page, never markup


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.names.get(node.name, node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body[0].value.value = "My own implementation, written from scratch."
        self.generic_visit(node)
        return node


def _renamable(tree: ast.Module) -> dict[str, str]:
    """Local variables and parameters of every function, and the module's own functions: what a
    student hiding a copy renames. Never `self`, never a name a call passes by keyword."""
    keywords = {k.arg for k in ast.walk(tree) if isinstance(k, ast.keyword)}
    found: set[str] = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        found |= {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        found |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    found -= keywords | {"self", "cls"}
    return {name: f"v{i}_{name[::-1].strip('_')}" for i, name in enumerate(sorted(found))}


def _reordered(body: list[ast.stmt]) -> list[ast.stmt]:
    """The functions of a body in reverse order, every other statement where it was."""
    defs = [n for n in body if isinstance(n, ast.FunctionDef)]
    flipped = iter(reversed(defs))
    return [next(flipped) if isinstance(n, ast.FunctionDef) else n for n in body]


def disguise(text: str, seed: int = 0) -> str:
    """A copy dressed up: identifiers renamed, reformatted (ast.unparse: other quotes, wrapping,
    blank lines, no comments), docstrings rewritten, functions and methods reordered, comments added."""
    tree = ast.parse(text)
    tree = _Rename(_renamable(tree)).visit(tree)
    tree.body = _reordered(tree.body)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        cls.body = _reordered(cls.body)
    rng = random.Random(seed)
    lines = []
    for line in ast.unparse(tree).splitlines():
        if line.strip().startswith("def ") and rng.random() < 0.7:
            lines.append(line[: len(line) - len(line.lstrip())] + "# helper, see the lecture notes")
        lines.append(line)
    out = "\n".join(lines) + "\n"
    ast.parse(out)  # still Python
    return out


def student_files(name: str) -> dict[str, str]:
    folder = CORPUS / name
    return {f: ((folder / f) if (folder / f).exists() else REFERENCE / f).read_text() for f in FILES}


def starter_files() -> dict[str, str]:
    return {f: (STARTER / f).read_text() for f in FILES}


def _run(*args: str | Path) -> subprocess.CompletedProcess:
    p = subprocess.run([*GRADE, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return p


def _pairs(out: Path) -> dict[frozenset, dict[str, dict]]:
    """similarity.csv as {pair: {file: row}}."""
    found: dict[frozenset, dict[str, dict]] = {}
    with open(out / "similarity.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            found.setdefault(frozenset((row["student_a"], row["student_b"])), {})[row["file"]] = row
    return found


def score(pairs: dict[frozenset, dict[str, dict]], a: str, b: str) -> float:
    rows = pairs.get(frozenset((a, b)))
    return float(next(iter(rows.values()))["pair_score"]) if rows else 0.0


@pytest.fixture(scope="module")
def a3_class(tmp_path_factory) -> dict:
    """The corpus (27 independent correct solutions), a disguised copy of one, a copy that does not
    parse, two unfilled starters, one over the size cap, one whose code would write a file if run."""
    root = tmp_path_factory.mktemp("similarity")
    folder = root / "in"
    folder.mkdir()
    for student in sorted(p.name for p in CORPUS.iterdir() if p.is_dir()):
        write_zip(folder / f"{student}.zip", student_files(student))
    original = student_files(ORIGINAL)
    write_zip(folder / "copycat.zip", {f: disguise(t, seed=i) for i, (f, t) in enumerate(original.items())})
    broken = dict(original, **{"model_solution.py": original["model_solution.py"] + "\ndef oops(:\n"})
    write_zip(folder / "broken_copy.zip", broken, folder="a3/")
    write_zip(folder / "starter_one.zip", starter_files())
    write_zip(folder / f"{HOSTILE}.zip", starter_files())
    big = dict(starter_files(), **{"train.py": "# pad\n" * (MAX_FILE_BYTES // 6 + 10)})
    write_zip(folder / "too_big.zip", big)
    marker = root / "ran.txt"
    runs = dict(starter_files(), **{"utils.py": f"open({str(marker)!r}, 'w').write('ran')\n"})
    write_zip(folder / "would_run.zip", runs)
    out = root / "out"
    p = _run("similarity", folder, "--out", out, "--min-score", "0", "--show", "20")
    return {"out": out, "pairs": _pairs(out), "stdout": p.stdout, "stderr": p.stderr, "marker": marker}


def test_a_disguised_copy_scores_near_identical(a3_class):
    pairs = a3_class["pairs"]
    assert score(pairs, ORIGINAL, "copycat") >= 0.95, pairs.get(frozenset((ORIGINAL, "copycat")))
    row = pairs[frozenset((ORIGINAL, "copycat"))]["model_solution.py"]
    assert float(row["file_score"]) >= 0.95 and row["compared_as"] == "ast"
    assert row["a_matched_lines"] and row["b_matched_lines"]
    top = json.loads((a3_class["out"] / "similarity.json").read_text())["top"]
    assert {top[0]["a"], top[0]["b"]} in ({ORIGINAL, "copycat"}, {ORIGINAL, "broken_copy"}, {"copycat", "broken_copy"})


def test_independent_solutions_score_low(a3_class):
    pairs = a3_class["pairs"]
    corpus = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
    scores = {(a, b): score(pairs, a, b) for i, a in enumerate(corpus) for b in corpus[i + 1:]}
    assert len(scores) == 27 * 26 // 2
    worst = max(scores.items(), key=lambda kv: kv[1])
    assert worst[1] < 0.35, worst
    assert sum(scores.values()) / len(scores) < 0.15


def test_unfilled_starters_share_nothing(a3_class):
    """The starter is removed: two students who left the same given code are not a pair at all."""
    pairs = a3_class["pairs"]
    assert score(pairs, "starter_one", HOSTILE) == 0.0
    assert not [p for p in pairs if "starter_one" in p or HOSTILE in p]


def test_a_file_that_does_not_parse_is_compared_token_by_token(a3_class):
    pairs = a3_class["pairs"]
    row = pairs[frozenset((ORIGINAL, "broken_copy"))]["model_solution.py"]
    assert row["compared_as"] == "tokens" and float(row["file_score"]) >= 0.9


def test_size_caps_and_nothing_run(a3_class):
    page = (a3_class["out"] / "similarity.html").read_text()
    assert "too_big" in page and f"at most {MAX_FILE_BYTES} are accepted" in page
    assert not a3_class["marker"].exists()  # would_run's utils.py was read, never run


def test_the_page_opens_in_chromium_and_shows_the_highlighted_pair(a3_class, tmp_path):
    page = a3_class["out"] / "similarity.html"
    p = chromium(page, tmp_path, "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    assert not CONSOLE.findall(p.stderr), [line for line in p.stderr.splitlines() if CONSOLE.search(line)]
    root = parse(p.stdout)
    assert not [n for n in root.walk() if n.tag in ("script", "b")]
    assert "similar" in by_id(root, "not-an-accusation").text()
    first = by_id(root, "pair-1")
    assert first.tag == "details" and "open" in first.attrs
    sides = [n for n in first.walk() if "code" in (n.attrs.get("class") or "").split()]
    hits = [[n for n in side.walk() if "hit" in (n.attrs.get("class") or "").split()] for side in sides]
    assert len(sides) >= 2 and all(hits[:2]), "both files of the first pair have highlighted lines"
    assert "def " in "".join(n.text() for n in hits[0])
    rows = [n for n in by_id(root, "pairs").walk() if n.tag == "tr" and n.attrs.get("data-rank")]
    assert len(rows) == 20 and float(rows[0].attrs["data-score"]) >= 0.9
    shot = tmp_path / "similarity.png"
    p = chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1400,2400", "--hide-scrollbars")
    assert p.returncode == 0 and shot.stat().st_size > 10_000, p.stderr[-2000:]


def test_a_written_assignment_is_refused(tmp_path):
    write_zip(tmp_path / "one.zip", {"answers.yaml": "1a: 2\n"})
    p = subprocess.run([*GRADE, "similarity", str(tmp_path), "--out", str(tmp_path / "o"), "--assignment",
                        "written"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "not Python source" in p.stderr


def test_batch_with_similarity_for_notebooks(tmp_path):
    """A2S1 per notebook: the staff notebook, a disguised .ipynb of it, and the unfilled template,
    graded by `grade batch --similarity`; summary.html links the page; `grade similarity BATCH_OUT`
    finds the sources again through OUT/sources.json."""
    folder = tmp_path / "in"
    folder.mkdir()
    write_zip(folder / "ref.zip", {"A2S1.py": A2S1_REFERENCE})
    cells = A2S1_REFERENCE.split("# %%")
    renamed = "# %%".join(c.replace("u, d", "a1, b1").replace("(u ", "(a1 ").replace("@ d)", "@ b1)")
                          .replace("(d @ d) * d", "(b1 @ b1) * b1") for c in cells)
    write_zip(folder / "nb_copy.zip", {"A2S1.ipynb": ipynb(renamed, [("markdown", "my notebook\n")])})
    write_zip(folder / "blank.zip", {"A2S1.py": A2S1_STARTER.read_text()})
    out = tmp_path / "out"
    _run("batch", folder, "--out", out, "--assignment", "a2s1", "--jobs", "2", "--similarity",
         "--limit", "call_timeout_s=5")
    sources = json.loads((out / "sources.json").read_text())
    assert sources["assignment"] == "a2s1" and set(sources["students"]) == {"ref", "nb_copy", "blank"}
    pairs = _pairs(out)
    assert score(pairs, "ref", "nb_copy") >= 0.9
    assert score(pairs, "ref", "blank") == 0.0 and score(pairs, "nb_copy", "blank") == 0.0
    summary = parse((out / "summary.html").read_text())
    section = by_id(summary, "similar-code")
    assert "similarity.html" in [n.attrs.get("href") for n in section.walk() if n.tag == "a"]
    again = tmp_path / "again"
    _run("similarity", out, "--out", again)
    assert _pairs(again).keys() == {k for k, v in pairs.items() if score(pairs, *k) >= 0.3}
    # Into the batch's own OUT (the default for one): summary.html's section is the new pass's.
    before = (out / "summary.html").read_text()
    _run("similarity", out, "--min-score", "0.95", "--starter", A2S1_STARTER.parent)
    after = (out / "summary.html").read_text()
    section = by_id(parse(after), "similar-code").text()
    assert "scored 0.95 or more" in section and "(--starter)" in section
    assert after.split("<!-- similar-code -->")[0] == before.split("<!-- similar-code -->")[0]
    assert after.split("<!-- /similar-code -->")[1] == before.split("<!-- /similar-code -->")[1]


def test_the_similarity_package_never_imports_torch():
    code = ("import sys; import graders.similarity.run, graders.commands.similarity; "
            "print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "False", p.stderr[-2000:]


# --- without the course's starter -------------------------------------------------------------


def _starter_pairs(pairs: dict[frozenset, dict[str, dict]], names: set[str]) -> list[float]:
    return [score(pairs, *sorted(p)) for p in pairs if p & names]


def test_a_folder_of_five_on_another_starter_with_none_named(tmp_path):
    """Two untouched course starters, a student, a disguised copy of them and another student; the
    assignment's template is not what they started from and no --starter is given: the copy is the
    top pair, the starters pair with nobody, and the page says what was removed and why."""
    folder = tmp_path / "in"
    folder.mkdir()
    students = course.corpus_students()
    a, b = course.filled(students[0]), course.filled(students[5])
    for name, files in {"ana": a, "bo": b, "copy_of_ana": course.disguised(a, "all", 3),
                        "starter_1": course.COURSE_STARTER, "starter_2": course.COURSE_STARTER}.items():
        write_zip(folder / f"{name}.zip", files)
    out = tmp_path / "out"
    p = _run("similarity", folder, "--out", out, "--min-score", "0")
    pairs = _pairs(out)
    assert score(pairs, "ana", "copy_of_ana") >= 0.9
    top = json.loads((out / "similarity.json").read_text())["top"][0]
    assert {top["a"], top["b"]} == {"ana", "copy_of_ana"}
    starters = _starter_pairs(pairs, {"starter_1", "starter_2"})
    assert max(starters, default=0) < 0.3, starters
    assert "starter removed: student_template (the assignment's template)" in p.stdout
    assert "passages in more than 2 submissions" in p.stdout
    page = parse((out / "similarity.html").read_text())
    rule = by_id(page, "common-rule").text()
    assert "more than 2 of the 5 submissions" in rule and "treated as starter code" in rule
    assert "student_template" in by_id(page, "starter-used").text()
    assert {"starter_1", "starter_2"} <= {n.text() for n in by_id(page, "near-empty").walk() if n.tag == "strong"}
    removed = [n for n in page.walk() if n.tag == "details" and "common" in (n.attrs.get("class") or "")]
    shown = "".join(n.text() for n in removed)
    assert "load_dataset(" in shown and "in at least 5 of 5 submissions" in shown, shown


def test_a_class_of_500_on_another_starter_with_none_named():
    """497 real-style submissions of the 27 corpus students (renamed or reordered, 54 versions:
    copies of each other by the score's own measure), two untouched starters and a barely touched
    one, read in memory: no pair with a starter in it is listed, while the copies score near 1."""
    students = course.corpus_students()
    spec = load_spec(spec_path("a3"))
    starters, _ = read_starter(spec)  # the assignment's template: not what this class started from
    filled = [course.filled(s) for s in students]
    dressed = [course.disguised(filled[i % 27], ("rename", "reorder")[i % 2], i) for i in range(54)]

    def submission(name: str, files: dict[str, str]) -> Submission:
        return Submission(name, {f: SourceFile(f, f, t, [Unit(t)]) for f, t in files.items()})

    subs = [submission(f"s{i:03d}", dressed[i % 54]) for i in range(497)]
    subs += [submission("starter_1", course.COURSE_STARTER), submission("starter_2", course.COURSE_STARTER),
             submission("barely", course.barely_touched())]
    result = compare(subs, starters, spec.required_files, min_score=0.3, limit=0)
    assert result.common_limit == 50
    with_starter = [p for p in result.pairs if {p.a, p.b} & {"starter_1", "starter_2", "barely"}]
    assert not with_starter, [(p.a, p.b, p.score) for p in with_starter[:5]]
    assert result.pairs[0].score >= 0.95 and result.pairs_over > 4000  # the ~18 copies of each student
    assert {"starter_1", "starter_2", "barely"} <= set(result.near_empty)


def test_the_spec_names_the_starter_as_a_zip(tmp_path):
    """The course's starter named once in the spec (a zip here, with a top folder): it is removed
    whole, so the two untouched copies of it share nothing, and the page and CSV name it."""
    zip_path = write_zip(tmp_path / "course-a3-starter.zip", course.COURSE_STARTER, folder="a3-starter/")
    spec = load_spec(spec_path("a3")).model_copy(update={"starter": str(zip_path)})
    folder = tmp_path / "in"
    folder.mkdir()
    real = {s: course.filled(s) for s in course.corpus_students()[:6]}
    for name, files in real.items():
        write_zip(folder / f"{name}.zip", files)
    write_zip(folder / "copy.zip", course.disguised(real["abe_block_mask"], "dead_code", 1))
    write_zip(folder / "starter_1.zip", course.COURSE_STARTER)
    write_zip(folder / "starter_2.zip", course.COURSE_STARTER)
    out = tmp_path / "out"
    result = run_similarity({p.stem: p for p in folder.glob("*.zip")}, spec, out, Options(min_score=0.0))
    assert (result.pairs[0].a, result.pairs[0].b) == ("abe_block_mask", "copy")
    assert not [p for p in result.pairs if "starter_1" in (p.a, p.b) or "starter_2" in (p.a, p.b)]
    page = parse((out / "similarity.html").read_text())
    assert "course-a3-starter.zip" in by_id(page, "starter-used").text()
    assert "the spec's starter" in by_id(page, "starter-used").text()
    with open(out / "similarity.csv", newline="", encoding="utf-8") as fh:
        assert {row["starter"] for row in csv.DictReader(fh)} == {str(zip_path)}
    assert json.loads((out / "similarity.json").read_text())["starter"]["path"] == str(zip_path)


def test_a_starter_that_is_not_there_is_refused(tmp_path):
    write_zip(tmp_path / "one.zip", starter_files())
    p = subprocess.run([*GRADE, "similarity", str(tmp_path), "--out", str(tmp_path / "o"), "--starter",
                        str(tmp_path / "nope.zip")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--starter" in p.stderr and "nope.zip is not a folder or a zip" in p.stderr


def test_every_pair_over_the_threshold_is_in_the_csv(a3_class, tmp_path):
    """--limit bounds the pairs given their matched lines, never the CSV's rows: the rest say so,
    and so does the page."""
    out = tmp_path / "out"
    _run("similarity", a3_class["out"].parent / "in", "--out", out, "--min-score", "0", "--limit", "3", "--show", "5")
    with open(out / "similarity.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {frozenset((r["student_a"], r["student_b"])) for r in rows} == set(a3_class["pairs"])
    assert {r["a_matched_lines"] for r in rows if int(r["rank"]) > 3} == {"(not listed: past the top 3)"}
    assert all(r["a_matched_lines"] and "not listed" not in r["a_matched_lines"] for r in rows if int(r["rank"]) <= 3)
    counts = by_id(parse((out / "similarity.html").read_text()), "counts").text()
    assert "every one in similarity.csv" in counts and "matched lines for the top 3" in counts


def test_an_unfilled_stub_gives_no_tokens():
    """A stub (`pass`, `...`, `raise NotImplementedError`, a docstring) is no one's code: it gives
    no token, and a method given in part is compared on its given lines, the placeholder left out."""
    stubs = ('def f(self, x):\n    """Doc."""\n    raise NotImplementedError("f")\n\n'
             "def g(x):\n    pass\n\ndef h(x):\n    ...\n")
    assert ast_stream([Unit(stubs)]).ids.size == 0
    given = "def f(x):\n    y = x.shape\n    return y\n"
    stub = "def f(x):\n    y = x.shape\n    # YOUR CODE HERE\n    raise NotImplementedError\n    return y\n"
    assert ast_stream([Unit(stub)]).ids.tolist() == ast_stream([Unit(given)]).ids.tolist()
