"""What the worker's lazy stand-ins for transformers / huggingface_hub / datasets save.

    .venv/bin/python bench/lazy_imports.py [--runs 5]

Times a fresh `python -I -S` importing torch and the reference's three files (as a worker does),
with the stand-ins and with the real packages, median of N runs each.
"""

import argparse
import site
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = """
import sys
sys.path += {site!r}
if {lazy}:
    sys.path.insert(0, {graders!r})
    from worker import lazy
    lazy.install()
sys.path.insert(0, {reference!r})
import torch, utils, model_solution, train
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    for lazy in (True, False):
        code = CODE.format(site=site.getsitepackages(), lazy=lazy, graders=str(REPO / "graders"),
                           reference=str(REPO / "reference" / "a3"))
        times = []
        for _ in range(runs):
            start = time.monotonic()
            subprocess.run([sys.executable, "-I", "-S", "-c", code], check=True, cwd=REPO / "reference" / "a3")
            times.append(time.monotonic() - start)
        label = "lazy stand-ins" if lazy else "real packages"
        print(f"{label:<15} median {statistics.median(times):.2f} s  (min {min(times):.2f}, max {max(times):.2f})")


if __name__ == "__main__":
    main()
