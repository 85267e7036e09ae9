"""`grade similarity` against copydetect and Dolos on the same class: planted, disguised copies of
the corpus among independent solutions (bench/similarity_corpus.py), every tool scoring every pair.

    .venv/bin/pip install -e '.[bench]'        # copydetect, pinned
    npm ci --prefix bench/dolos                # Dolos (@dodona/dolos-lib, pinned by the lockfile)
    .venv/bin/python bench/similarity_vs_tools.py [--keep DIR]

Two classes, each of the 27 corpus students and 11 planted copies (one copy per disguise of seven
students, two splices of two students each, so 11 planted pairs):
- "template": the corpus as it is, built on this repository's student_template/; each tool is
  given the starter (ours: the assignment's template, as by default; copydetect: boilerplate_dirs;
  Dolos: its ignored file).
- "course": the same students on a course's own starter (COURSE_STARTER) with two untouched copies
  of it and one barely touched, and no starter given to anyone: the issue's case of a TA who
  forgot --starter (ours falls back to student_template/, which is not what these students got).

copydetect and Dolos compare files, not submissions: each gets one file per student, its required
files one after another. Each is scored at the threshold it suggests: copydetect's display_t (0.33),
Dolos's web interface's guess (guess_dolos_threshold, from the distribution of pair scores), ours
the page's --min-score (0.3). A planted pair is a (source, copy) pair; every other pair flagged is
a false pair. The rank of a planted pair is its place in the tool's order, ties counted against it.
"""

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from benchlib import REPO

sys.path.insert(0, str(REPO))
import similarity_corpus as sc  # noqa: E402

from graders.similarity.run import Options, run_similarity  # noqa: E402
from graders.spec import load_spec, spec_path  # noqa: E402

DOLOS = REPO / "bench" / "dolos"
ORDER = ("utils.py", "model_solution.py", "train.py")  # the spec's order, for the one-file tools
DISGUISED = ("rename", "reorder", "reformat", "comments", "dead_code", "loop", "all")
OURS_T, COPYDETECT_T = 0.3, 0.33
STARTERS = frozenset(("starter_1", "starter_2", "barely_touched"))
Pairs = dict[frozenset[str], float]


@dataclass
class Class:
    name: str
    submissions: dict[str, dict[str, str]]
    planted: set[frozenset[str]]
    starter: dict[str, str] | None  # given to the tools (None: nobody is told)


def make_class(name: str, real: dict[str, dict[str, str]], starter: dict[str, str]) -> Class:
    students = sorted(real)
    subs = dict(real)
    planted: set[frozenset[str]] = set()
    for i, how in enumerate(DISGUISED):
        source = students[3 * i]
        subs[f"copy_{how}"] = sc.disguised(real[source], how, seed=i)
        planted.add(frozenset((source, f"copy_{how}")))
    for k, (a, b) in enumerate(((students[1], students[2]), (students[4], students[5]))):
        subs[f"splice_{k}"] = sc.splice(real[a], real[b], random.Random(100 + k))
        planted |= {frozenset((a, f"splice_{k}")), frozenset((b, f"splice_{k}"))}
    return Class(name, subs, planted, starter)


def classes() -> list[Class]:
    students = sc.corpus_students()
    template = {f: (REPO / "student_template" / f).read_text() for f in sc.FILES}
    first = make_class("template", {s: sc.corpus_files(s) for s in students}, template)
    second = make_class("course", {s: sc.filled(s) for s in students}, sc.COURSE_STARTER)
    second.submissions |= {"starter_1": sc.COURSE_STARTER, "starter_2": sc.COURSE_STARTER}
    second.submissions["barely_touched"] = sc.barely_touched()
    second.starter = None
    return [first, second]


def write(c: Class, root: Path) -> tuple[Path, Path, Path | None]:
    """Zips for ours, one concatenated file per student for the others, the starter likewise."""
    zips, flat = root / c.name / "zips", root / c.name / "flat"
    zips.mkdir(parents=True)
    flat.mkdir()
    for student, files in c.submissions.items():
        with zipfile.ZipFile(zips / f"{student}.zip", "w") as z:
            for f, text in files.items():
                z.writestr(f, text)
        (flat / f"{student}.py").write_text("\n".join(files[f] for f in ORDER))
    starter = None
    if c.starter:
        starter = root / c.name / "starter"
        starter.mkdir()
        (starter / "starter.py").write_text("\n".join(c.starter[f] for f in ORDER))
    return zips, flat, starter


def ours(zips: Path, root: Path) -> Pairs:
    """`grade similarity` as a TA runs it: no option but the scores of every pair (its starter is
    the assignment's template, right for the class "template", wrong for "course")."""
    spec = load_spec(spec_path("a3"))
    students = {p.stem: p for p in sorted(zips.glob("*.zip"))}
    result = run_similarity(students, spec, root / "ours", Options(min_score=0.0, limit=0))
    return {frozenset((p.a, p.b)): p.score for p in result.pairs}


def copydetect_pairs(flat: Path, starter: Path | None) -> Pairs:
    from copydetect import CopyDetector

    d = CopyDetector(
        test_dirs=[str(flat)],
        ref_dirs=[str(flat)],
        boilerplate_dirs=[str(starter)] if starter else [],
        extensions=["py"],
        autoopen=False,
        silent=True,
        out_file=str(flat.parent / "copydetect.html"),
    )
    d.run()
    names = [Path(f).stem for f in d.test_files]
    out: Pairs = {}
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i < j:  # a pair is reported when either side is mostly copied: the larger of the two
                out[frozenset((a, b))] = float(max(d.similarity_matrix[i, j, 0], d.similarity_matrix[j, i, 0], 0))
    return out


def dolos_pairs(flat: Path, starter: Path | None) -> Pairs:
    if not (DOLOS / "node_modules" / "@dodona" / "dolos-lib").is_dir():
        print("installing Dolos: npm ci --prefix bench/dolos", file=sys.stderr)
        subprocess.run(["npm", "ci", "--prefix", str(DOLOS), "--no-audit", "--no-fund"], check=True)
    listing = flat.parent / "dolos.json"
    files = sorted(str(p) for p in flat.glob("*.py"))
    listing.write_text(json.dumps({"files": files, "ignore": str(starter / "starter.py") if starter else None}))
    p = subprocess.run(["node", str(DOLOS / "pairs.mjs"), str(listing)], capture_output=True, text=True, check=True)
    out: Pairs = {}
    for line in p.stdout.splitlines():
        row = json.loads(line)
        out[frozenset((Path(row["a"]).stem, Path(row["b"]).stem))] = float(row["similarity"])
    return out


def guess_dolos_threshold(scores: list[float], step: float = 0.03) -> float:
    """Dolos's suggested threshold (its web interface's guess, web/src/api/utils/cutoff.ts),
    rewritten here: pair counts in overlapping bins of `step`, the local minima of those counts,
    each weighted by sqrt(count) + 1 times a parabola that is least at 0.8, the least weighted
    minimum's similarity, and never below the mean of all pairs."""
    values = sorted(scores)
    bins, lower, upper, edge = [], 0, 0, step
    for v in values:
        while v >= edge:
            bins.append(upper + lower)
            lower, upper, edge = upper, 0, edge + step
        upper += 1
    bins.append(upper + lower)
    minima, rising = [], bins[0] < bins[1] if len(bins) > 1 else False
    for i in range(len(bins) - 1):
        now = bins[i] < bins[i + 1]
        if now != rising:
            if not rising:
                minima.append(i)
            rising = now
    top = 0.8
    a = 0.9 / (1 / 3 - top + top * top)
    b, c = -2 * top * a, top * top * a + 0.1  # least (0.1) at x = top

    def weight(i: int) -> float:
        x = i * step
        return (math.sqrt(bins[i]) + 1) * round((a * x * x + b * x + c) * 1000) / 1000

    mean = sum(values) / len(values)
    if not minima:
        return mean
    best = min(range(len(minima)), key=lambda k: (weight(minima[k]), -k))
    return max(mean, minima[best] * step + step / 2)


@dataclass
class Row:
    tool: str
    threshold: float
    flagged: int
    found: int
    false: int
    ranks: list[int]
    best_false: float
    best_starter: float | None  # the best pair with an untouched or barely touched starter in it
    seconds: float


def score(tool: str, pairs: Pairs, c: Class, threshold: float, seconds: float) -> Row:
    everyone = sorted(c.submissions)
    all_pairs = {
        frozenset((a, b)): pairs.get(frozenset((a, b)), 0.0) for i, a in enumerate(everyone) for b in everyone[i + 1 :]
    }
    flagged = {p for p, s in all_pairs.items() if s >= threshold}
    ranks = sorted(sum(1 for s in all_pairs.values() if s >= all_pairs[p]) for p in c.planted)
    false = [s for p, s in all_pairs.items() if p not in c.planted and not p & STARTERS]
    starters = [s for p, s in all_pairs.items() if p & STARTERS]
    return Row(
        tool,
        threshold,
        len(flagged),
        len(flagged & c.planted),
        len(flagged - c.planted),
        ranks,
        max(false),
        max(starters) if starters else None,
        seconds,
    )


def run_class(c: Class, root: Path) -> list[Row]:
    zips, flat, starter = write(c, root)
    rows = []
    started = time.perf_counter()
    found = ours(zips, root / c.name)
    rows.append(score("ours (grade similarity)", found, c, OURS_T, time.perf_counter() - started))
    started = time.perf_counter()
    found = copydetect_pairs(flat, starter)
    rows.append(score("copydetect 0.5.0", found, c, COPYDETECT_T, time.perf_counter() - started))
    started = time.perf_counter()
    found = dolos_pairs(flat, starter)
    threshold = guess_dolos_threshold(list(found.values()))
    rows.append(score("Dolos 3.5.1 (dolos-lib)", found, c, threshold, time.perf_counter() - started))
    return rows


def table(c: Class, rows: list[Row]) -> str:
    n = len(c.submissions)
    head = (
        f"class {c.name!r}: {n} submissions, {n * (n - 1) // 2} pairs, {len(c.planted)} planted "
        f"({'starter given' if c.starter else 'no starter given'})\n"
        "| tool | threshold | flagged | planted found | false pairs | precision | recall | ranks of the planted pairs "
        "| best other pair | best starter pair | seconds |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        precision = r.found / r.flagged if r.flagged else 1.0
        lines.append(
            f"| {r.tool} | {r.threshold:.2f} | {r.flagged} | {r.found}/{len(c.planted)} | {r.false} | {precision:.2f} "
            f"| {r.found / len(c.planted):.2f} | {' '.join(map(str, r.ranks))} | {r.best_false:.2f} "
            f"| {'-' if r.best_starter is None else f'{r.best_starter:.2f}'} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def verdict(rows: list[Row]) -> str:
    """Ours against the better of the others (the most planted pairs found, then the fewest false)."""
    mine, others = rows[0], rows[1:]
    best = max(others, key=lambda r: (r.found, -r.false))
    ok = mine.found >= best.found and mine.false <= min(r.false for r in others if r.found == best.found)
    return (
        f"ours {mine.found} found, {mine.false} false; the better other ({best.tool}) {best.found} found, "
        f"{best.false} false: {'PASS' if ok else 'FAIL'} (as many found, no more false pairs)"
    )


def _header() -> str:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True)
    return (
        f"{time.strftime('%Y-%m-%d')}, commit {commit.stdout.strip() or '?'}, {platform.node()} "
        f"({os.cpu_count()} cores), Python {platform.python_version()}, Node {node.stdout.strip() or '?'}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", type=Path, help="write the classes and the tools' outputs here")
    args = parser.parse_args()
    print(_header())
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        verdicts = []
        for c in classes():
            rows = run_class(c, root)
            print(table(c, rows) + "\n")
            verdicts.append(f"{c.name}: {verdict(rows)}")
        print("\n".join(verdicts))


if __name__ == "__main__":
    main()
