"""`grade batch` of a class with --jobs 1 and --jobs 2 in the same run: the speed-up, and the peak
resident memory of the largest worker of any grade.

    .venv/bin/python bench/batch_scaling.py [--count 40]

The class: the reference and two planted bugs, repeated to `count` submissions, each made unique
by a comment (a different zip, a different sha256). Targets (issue 7): jobs 2 at least 1.7 times
faster than jobs 1; a worker's peak at most 1.5 GiB.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, zip_folder

BUGS = {"no_scale": ("model_solution.py", " / math.sqrt(self.d_attention)", ""),
        "no_step": ("train.py", "        optimizer.step()\n", "")}


def make_class(folder: Path, count: int) -> None:
    kinds = ["reference", *BUGS]
    for n in range(count):
        kind = kinds[n % len(kinds)]
        work = folder / f".work{n}"
        work.mkdir(parents=True)
        for f in (REPO / "reference" / "a3").glob("*.py"):
            text = f.read_text()
            if kind in BUGS and BUGS[kind][0] == f.name:
                assert text.count(BUGS[kind][1]) == 1, kind
                text = text.replace(BUGS[kind][1], BUGS[kind][2])
            (work / f.name).write_text(f"# student {n}\n{text}")
        zip_folder(work, folder / f"student{n:03d}_{kind}.zip")
        for f in work.iterdir():
            f.unlink()
        work.rmdir()


def run_batch(folder: Path, out: Path, jobs: int) -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "graders.cli", "batch", str(folder), "--jobs", str(jobs), "--out", str(out)],
                   cwd=REPO, check=True, capture_output=True)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=40)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    make_class(tmp / "class", args.count)
    seconds = {jobs: run_batch(tmp / "class", tmp / f"out{jobs}", jobs) for jobs in (1, 2)}
    peaks, totals = [], []
    for results in (tmp / "out2").glob("*/results.json"):
        r = json.loads(results.read_text())
        peaks.append(r["timings"].get("worker_peak_rss_mb", 0.0))
        totals.append(r["timings"]["total_s"])
    print(f"grade batch of {args.count} submissions (seconds)")
    for jobs, s in seconds.items():
        print(f"  --jobs {jobs}   {s:8.1f}   ({s / args.count:.2f} per submission)")
    print(f"  speed-up   {seconds[1] / seconds[2]:8.2f}   (target >= 1.7)")
    print(f"  worker peak RSS, MiB: median {statistics.median(peaks):.0f}, max {max(peaks):.0f}   (target <= 1536)")
    print(f"  one grade's total_s under --jobs 2: median {statistics.median(totals):.1f}")


if __name__ == "__main__":
    main()
