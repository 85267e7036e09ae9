"""The grader measured on its own corpus (tests/corpus/variants.py), under the spec or a changed
setting: sensitivity, diagnosis, fairness and stability.

    .venv/bin/python bench/sensitivity.py [--set hypothesis.max_examples=3 ...] [--jobs 2] [--repeat 5]

- kill rate: a bug is killed when every item it names in `loses` loses points (or, for 0-point
  items, fails a check);
- exact diagnosis rate: of the bugs that are a known mistake (`DIAGNOSES`), those named exactly
  (that diagnosis on an item the bug loses, and no other anywhere);
- wrong diagnoses: any variant told of a mistake it did not make (must be 0);
- false-fail rate: correct-but-different variants scoring under full marks (must be 0);
- stability (--repeat N): a few zips graded N more times each, results.json compared without
  timings and captured output.

Prints the misses by name, the rates and the wall time.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from benchlib import REPO

sys.path.insert(0, str(REPO / "tests"))
from corpus.variants import VARIANTS, apply, diagnosed_exactly, diagnoses, expected_diagnoses  # noqa: E402

STABILITY = ("attn_no_scaling", "generate_samples", "loss_detached", "student_full_rewrite")


def _zip(folder: Path, variant, suffix: str = "") -> Path:
    path = folder / f"{variant.name}{suffix}.zip"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in sorted(apply(variant, REPO / "reference" / "a3").items()):
            z.writestr(name, text)
    return path


def _grade(zips: list[Path], out: Path, jobs: int, extra: list[str]) -> dict[str, dict]:
    chunks = [zips[i::jobs] for i in range(jobs) if zips[i::jobs]]
    procs = [subprocess.Popen([sys.executable, "-m", "graders.cli", *map(str, c), "--out", str(out / f"out{i}"), *extra],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, c in enumerate(chunks)]
    for p in procs:
        p.wait()
    results = {}
    for i, chunk in enumerate(chunks):
        for z in chunk:
            folder = out / f"out{i}" / z.stem if len(chunk) > 1 else out / f"out{i}"
            results[z.stem] = json.loads((folder / "results.json").read_text())
    return results


def _stable_part(results: dict) -> dict:
    """What must not change between grades: all but the timings, the zip's name and bytes (its
    entries' timestamps), and the captured output (tqdm prints its own rates)."""
    return {k: v for k, v in results.items() if k not in ("timings", "submission", "output")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=[], dest="settings")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=0, help="also grade a few zips this many times each")
    parser.add_argument("--table", action="store_true", help="print a markdown table: bug, items lost, diagnosis")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sensitivity-"))
    extra = ["--quiet", "--limit", "workers=1", *(a for s in args.settings for a in ("--set", s))]
    start = time.monotonic()
    graded = _grade([_zip(tmp, v) for v in VARIANTS], tmp / "corpus", args.jobs, extra)
    wall = time.monotonic() - start
    killed, missed, false_fail, wrong = 0, [], [], []
    known, exact, inexact = 0, 0, []
    for v in VARIANTS:
        r = graded[v.name]
        got = diagnoses(r)
        want = expected_diagnoses(v.name)
        if {d for _, d in got} - set(want):
            wrong.append(f"{v.name} ({', '.join(sorted(d for _, d in got))})")
        if v.kind == "correct":
            if r["score"] < r["max_score"]:
                false_fail.append(f"{v.name} ({r['score']:g})")
            continue
        by_id = {item["id"]: item for item in r["items"]}
        caught = all(by_id[i]["status"] != "passed" if by_id[i]["max_score"] == 0
                     else by_id[i]["score"] < by_id[i]["max_score"] for i in v.loses)
        killed += caught
        if not caught:
            missed.append(v.name)
        if want:
            known += 1
            ok = diagnosed_exactly(v, r)
            exact += ok
            if not ok:
                inexact.append(f"{v.name} (got {', '.join(sorted(d for _, d in got)) or 'none'})")
    bugs = sum(v.kind == "bug" for v in VARIANTS)
    correct = len(VARIANTS) - bugs
    print(f"corpus under {' '.join(args.settings) or 'the spec as is'}: {len(VARIANTS)} grades in {wall:.0f} s")
    print(f"  kill rate        {killed}/{bugs} = {killed / bugs:.0%}   missed: {', '.join(missed) or '-'}")
    print(f"  exact diagnosis  {exact}/{known} = {exact / known:.0%} of the bugs that are a known mistake   "
          f"not exact: {', '.join(inexact) or '-'}")
    print(f"  wrong diagnoses  {len(wrong)}/{len(VARIANTS)}   {', '.join(wrong) or '-'}")
    print(f"  false-fail rate  {len(false_fail)}/{correct} = {len(false_fail) / correct:.0%}   {', '.join(false_fail) or '-'}")
    if args.table:
        print("\n| bug | score | items lost | diagnosis |\n| --- | --- | --- | --- |")
        for v in VARIANTS:
            if v.kind == "bug":
                r = graded[v.name]
                lost = [i["id"] for i in r["items"] if i["max_score"] and not i["bonus"] and i["score"] < i["max_score"]]
                named = ", ".join(sorted({d for _, d in diagnoses(r)})) or "-"
                print(f"| {v.name} | {r['score']:g}/{r['max_score']:g} | {', '.join(lost) or '-'} | {named} |")
    if args.repeat:
        chosen = [v for v in VARIANTS if v.name in STABILITY]
        zips = [_zip(tmp, v, f"-{n}") for v in chosen for n in range(args.repeat)]
        again = _grade(zips, tmp / "repeat", args.jobs, extra)
        unstable = [v.name for v in chosen
                    if any(_stable_part(again[f"{v.name}-{n}"]) != _stable_part(graded[v.name]) for n in range(args.repeat))]
        print(f"  stability        {len(chosen) - len(unstable)}/{len(chosen)} zips gave identical results.json "
              f"(timings aside) over {args.repeat + 1} grades each   unstable: {', '.join(unstable) or '-'}")


if __name__ == "__main__":
    main()
