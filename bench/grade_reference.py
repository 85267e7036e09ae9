"""Wall time of `grade` on the reference zip, and its split, median of N runs.

    .venv/bin/python bench/grade_reference.py [--runs 5]

Each run is a fresh `grade` process, as a TA would start it; "start-up" is the process's wall
time not spent inside grading (interpreter, torch and pytest imports, writing the report).
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-"))
    zip_path = zip_folder(REPO / "reference" / "a3", tmp / "reference.zip")
    rows: dict[str, list[float]] = {}
    for i in range(args.runs):
        out = tmp / f"out{i}"
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "graders.cli", str(zip_path), "--out", str(out), "--quiet"],
                       cwd=REPO, check=True, capture_output=True)
        wall = time.monotonic() - start
        results = json.loads((out / "results.json").read_text())
        assert results["score"] == results["max_score"], results["score"]
        timings = results["timings"]
        rows.setdefault("wall (whole process)", []).append(wall)
        rows.setdefault("start-up and report", []).append(wall - timings["total_s"])
        for key, value in timings.items():
            rows.setdefault(key, []).append(value)
    print(f"grade reference.zip, median of {args.runs} runs (seconds)")
    for key, values in rows.items():
        print(f"  {key:<24} {statistics.median(values):7.3f}   (min {min(values):.3f}, max {max(values):.3f})")


if __name__ == "__main__":
    main()
