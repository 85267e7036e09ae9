"""`grade similarity` on a class of 500 (124,750 pairs): seconds to read the zips, build the index
and score every pair, find the matching regions of the listed pairs, and write the page.

    .venv/bin/python bench/similarity_scale.py [--count 500] [--keep DIR]

The class is synthetic, built from the 27 student solutions of tests/corpus/students/: each
submission takes every class of model_solution.py, and train.py, from a corpus student drawn at
random, then renames local names, reorders methods and reformats (ast.unparse). Pairs thus share
anything from nothing to every file, as in a class where some copy a part and a few copy all;
every submission is one of millions of combinations, so the index sees realistic overlap rather
than 500 copies of one file. Target (issue 21): under a minute for 500.
"""

import argparse
import ast
import random
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from benchlib import REPO

sys.path.insert(0, str(REPO))
from graders.similarity.run import Options, run_similarity  # noqa: E402
from graders.spec import load_spec, spec_path  # noqa: E402

CORPUS = REPO / "tests" / "corpus" / "students"
UTILS = REPO / "reference" / "a3" / "utils.py"


def _classes(path: Path) -> tuple[list[ast.stmt], dict[str, ast.ClassDef]]:
    tree = ast.parse(path.read_text())
    return tree.body, {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


class _Rename(ast.NodeTransformer):
    """Local names and parameters get a per-submission suffix (never `self` or attributes)."""

    def __init__(self, suffix: str):
        self.suffix = suffix

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id.islower() and node.id not in ("torch", "nn", "F", "math", "self", "einops"):
            node.id += self.suffix
        return node


def _variant(parsed: list, rng: random.Random, suffix: str) -> str:
    """model_solution.py: the first donor's module, each class taken from a random donor."""
    body, _ = rng.choice(parsed)
    out = []
    for node in body:
        if isinstance(node, ast.ClassDef):
            donors = [c[node.name] for _, c in parsed if node.name in c]
            node = ast.parse(ast.unparse(rng.choice(donors))).body[0]  # a copy: the donor stays as it is
            methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
            rng.shuffle(methods)
            node.body = [n for n in node.body if not isinstance(n, ast.FunctionDef)] + methods
        out.append(node)
    return ast.unparse(_Rename(suffix).visit(ast.Module(body=out, type_ignores=[])))


def make_class(folder: Path, count: int, seed: int = 21) -> None:
    rng = random.Random(seed)
    students = sorted(p for p in CORPUS.iterdir() if (p / "model_solution.py").exists())
    parsed = [_classes(p / "model_solution.py") for p in students]
    trains = [(p / "train.py").read_text() for p in students]
    for n in range(count):
        suffix = f"_{rng.randrange(10**6)}" if rng.random() < 0.8 else ""
        train = ast.unparse(_Rename(suffix).visit(ast.parse(rng.choice(trains))))
        with zipfile.ZipFile(folder / f"s{n:04d}.zip", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("model_solution.py", _variant(parsed, rng, suffix))
            z.writestr("train.py", train)
            z.writestr("utils.py", UTILS.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--keep", type=Path, help="write the class and the page here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        folder = root / "class"
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        make_class(folder, args.count)
        print(f"class of {args.count} written in {time.perf_counter() - started:.1f} s (not counted)")
        spec = load_spec(spec_path("a3"))
        students = {p.stem: p for p in sorted(folder.glob("*.zip"))}
        started = time.perf_counter()
        result = run_similarity(students, spec, root / "out", Options())
        total = time.perf_counter() - started
    for name, seconds in result.timings.items():
        print(f"{name.removesuffix('_s'):>8}: {seconds:6.2f} s")
    print(f"   total: {total:6.2f} s for {result.compared} submissions, {result.pairs_total} pairs "
          f"({result.pairs_sharing} sharing a fingerprint, {result.pairs_over} scored 0.3 or more, {len(result.pairs)} listed; target < 60 s)")
    print("pair scores:", ", ".join(f"{label} {n}" for label, n in result.histogram))


if __name__ == "__main__":
    main()
