"""`grade batch` of a class with --jobs 1 and --jobs 2 in the same run: the speed-up, and the peak
resident memory of the largest worker of any grade.

    .venv/bin/python bench/batch_scaling.py [--count 40]
    .venv/bin/python bench/batch_scaling.py --engine dask [--count 40]

With --engine dask: the class time on a LocalCluster of 1 and of 2 worker processes, today's batch
(local engine, --jobs 2) on the same class for the engine's overhead per submission (target, issue
20: at most 0.5 s), and a projection for 500 submissions on 4 nodes x 8 cores (printed with how it
is made).

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


def run_batch(folder: Path, out: Path, jobs: int, engine: str = "local") -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "graders.cli", "batch", str(folder), "--jobs", str(jobs), "--out", str(out),
                    "--engine", engine], cwd=REPO, check=True, capture_output=True)
    return time.monotonic() - start


def engine_start_s() -> float:
    """Seconds to start and close the engine (a LocalCluster of one worker): the class's fixed cost."""
    sys.path.insert(0, str(REPO))
    from graders.deploy.dask_engine import DaskEngine, DaskOptions

    start = time.monotonic()
    DaskEngine.start(1, DaskOptions()).close()
    return time.monotonic() - start


def dask_report(folder: Path, tmp: Path, count: int) -> None:
    """Dask at --jobs 1 and 2 against today's batch on the same class, and the projection."""
    seconds = {jobs: run_batch(folder, tmp / f"dask{jobs}", jobs, "dask") for jobs in (1, 2)}
    local = run_batch(folder, tmp / "local2", 2, "local")  # today's batch, same class, same --jobs
    print(f"grade batch --engine dask of {count} submissions (seconds, wall)")
    for jobs, s in seconds.items():
        print(f"  --jobs {jobs}   {s:8.1f}   ({s / count:.2f} per submission)")
    print(f"  today's batch (--engine local) --jobs 2: {local:.1f}; the engine's overhead per submission "
          f"(dask - local) / count: {(seconds[2] - local) / count:+.2f} s (target <= 0.5)")
    fixed = engine_start_s()
    per_sub = (seconds[1] - fixed) / count  # one worker's wall time per submission, overhead included
    grade_s = statistics.fmean(json.loads(p.read_text())["timings"]["total_s"] for p in (tmp / "dask1").glob("*/results.json"))
    workers, total = 4 * 8, 500
    projected = fixed + -(-total // workers) * per_sub
    print(f"  one grade's total_s (dask, --jobs 1): mean {grade_s:.1f}; wall per submission {per_sub:.2f}; "
          f"engine start and close {fixed:.1f}")
    print(f"  projected, {total} submissions on 4 nodes x 8 cores ({workers} one-thread workers): {projected:.0f} s "
          f"= start + ceil({total}/{workers}) rounds x {per_sub:.2f} s (assumes a grade per core runs as fast as "
          "here at --jobs 1, the nodes' Slurm jobs already running, and the class's bytes not the bottleneck)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--engine", choices=("local", "dask"), default="local")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    make_class(tmp / "class", args.count)
    if args.engine == "dask":
        dask_report(tmp / "class", tmp, args.count)
        return
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
