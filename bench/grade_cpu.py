"""CPU seconds a grade costs the machine: the trusted side, the worker and everything they start.

    .venv/bin/python bench/grade_cpu.py [--grades 4] [--runs 3] [--only ITEM ...]

One `grade` process grades N copies of the reference zip (as the tests' grade_all and a TA's
`grade a.zip b.zip` do); the machine's busy CPU time (from /proc/stat, so the sandboxed worker
under its own uid is counted too) is read before and after. A second process grades one copy,
and the difference gives the cost of each further grade without the process's own start-up.
The suite is CPU-bound on 2 cores, so this number, times the grades it runs, is its time. Run it
on a quiet machine: other load is counted too.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, zip_folder


def busy_cpu_s() -> float:
    """The machine's busy CPU seconds so far (user, nice, system, irq, softirq, steal)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / 100


def one_process(zips: list[Path], out: Path, only: list[str]) -> tuple[float, float]:
    """(busy CPU s, wall s) of one `grade` process grading `zips`."""
    cpu, start = busy_cpu_s(), time.monotonic()
    extra = [arg for item in only for arg in ("--only", item)]
    subprocess.run(
        [sys.executable, "-m", "graders.cli", *map(str, zips), "--out", str(out), "--quiet", *extra],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return busy_cpu_s() - cpu, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--grades", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    zips = [zip_folder(REPO / "reference" / "a3", tmp / f"reference{i}.zip") for i in range(args.grades)]
    single, many = [], []
    for run in range(args.runs):
        single.append(one_process(zips[:1], tmp / f"one{run}", args.only))
        many.append(one_process(zips, tmp / f"many{run}", args.only))
    one_cpu, one_wall = (statistics.median(x) for x in zip(*single, strict=True))
    many_cpu, many_wall = (statistics.median(x) for x in zip(*many, strict=True))
    further = (many_cpu - one_cpu) / (args.grades - 1)
    print(f"grade reference.zip{' --only ' + ' '.join(args.only) if args.only else ''}, median of {args.runs} runs")
    print(f"  one grade in its own process     {one_cpu:6.2f} CPU-s  ({one_wall:.2f} s wall)")
    print(f"  {args.grades} grades in one process        {many_cpu:6.2f} CPU-s  ({many_wall:.2f} s wall)")
    print(f"  each further grade               {further:6.2f} CPU-s")
    print(f"  the process's own start-up       {one_cpu - further:6.2f} CPU-s")


if __name__ == "__main__":
    main()
