"""How the cost of one grade grows with the spec's two knobs: Hypothesis examples per property
check, and steps of the training run.

    .venv/bin/python bench/cost_scaling.py [--runs 2] [--examples 2 4 6 12] [--steps 25 50 100 200]

Each point is a fresh `grade` process on the reference zip with `--set hypothesis.max_examples=N`
or `--set training.max_steps=N` (the other knob at the spec's value) and one worker
(`--limit workers=1`), so item times add up instead of overlapping. Prints the median total, the
checks' share, the training item and the number of student calls.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import REPO, zip_folder


def grade(zip_path: Path, out: Path, settings: list[str]) -> dict:
    subprocess.run([sys.executable, "-m", "graders.cli", str(zip_path), "--out", str(out), "--quiet",
                    "--limit", "workers=1", *(a for s in settings for a in ("--set", s))],
                   cwd=REPO, check=True, capture_output=True)
    return json.loads((out / "results.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--examples", type=int, nargs="+", default=[2, 4, 6, 12])
    parser.add_argument("--steps", type=int, nargs="+", default=[25, 50, 100, 200])
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    zip_path = zip_folder(REPO / "reference" / "a3", tmp / "reference.zip")
    print(f"grade reference.zip, one worker, median of {args.runs} runs (seconds)")
    print(f"  {'setting':<32} {'total':>7} {'checks':>7} {'3(b)iii':>8} {'calls':>6} {'score':>6}")
    points = [f"hypothesis.max_examples={n}" for n in args.examples] + [f"training.max_steps={n}" for n in args.steps]
    for n, setting in enumerate(points):
        rows = [grade(zip_path, tmp / f"out{n}-{i}", [setting]) for i in range(args.runs)]
        med = lambda key: statistics.median(r["timings"].get(key, 0.0) for r in rows)  # noqa: E731
        print(f"  {setting:<32} {med('total_s'):7.2f} {med('checks_s'):7.2f} {med('item 3(b)iii s'):8.2f} "
              f"{med('student_calls'):6.0f} {rows[0]['score']:>4g}/{rows[0]['max_score']:g}")


if __name__ == "__main__":
    main()
