"""What a broken submission costs: every case of tests/hostile/ (and the reference, for a normal
grade) graded one at a time, each `--runs` times; prints each case's median wall time against its
bound, 2x a normal grade plus one call_timeout_s per request that hung or crashed (the grader's own
count, `broken_requests`) and the import budget where an import timed out.

    .venv/bin/python bench/hostile_cost.py [--runs 3] [--only NAME ...] [--spec-limits]

By default the tests' limits (call_timeout_s 2, import 30, train 20); --spec-limits grades under
the spec's own (call_timeout_s 10). Exits 1 if a case is over its bound.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO

sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "hostile")]
from attacks import Target, attacks  # noqa: E402
from conftest import TEST_LIMITS, reference_files, write_zip  # noqa: E402

from graders.spec import load_spec, spec_path  # noqa: E402


def grade(zip_path: Path, out: Path, extra: list[str]) -> tuple[float, dict]:
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "graders.cli", str(zip_path), "--out", str(out), "--quiet",
                    "--limit", "workers=1", *extra], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - began, json.loads((out / "results.json").read_text())


def limits(spec_limits: bool) -> tuple[list[str], float, float]:
    """The --limit flags, call_timeout_s and import_timeout_s in force."""
    if spec_limits:
        spec = load_spec(spec_path("a3")).limits
        return [], spec.call_timeout_s, spec.import_timeout_s
    values = dict(flag.split("=") for flag in TEST_LIMITS[1::2])
    return TEST_LIMITS, float(values["call_timeout_s"]), float(values["import_timeout_s"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--spec-limits", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    target = Target(port=9, out=str(tmp / "out"), marker=str(tmp / "marker"), secret="bench", token="0" * 16)
    cases = {"reference": reference_files(), **{n: a.files for n, a in sorted(attacks(target).items())
                                                 if not args.only or n in args.only}}
    extra, call_s, import_s = limits(args.spec_limits)
    print(f"limits: call_timeout_s {call_s:g}, import_timeout_s {import_s:g}; median of {args.runs}")
    times: dict[str, float] = {}
    worst: dict[str, dict] = {}
    for name, files in cases.items():
        z = write_zip(tmp / f"{name}.zip", files)
        runs = [grade(z, tmp / f"{name}-{i}", extra) for i in range(args.runs)]
        times[name] = statistics.median(t for t, _ in runs)
        worst[name] = max(runs, key=lambda r: r[0])[1]
    normal, over = times["reference"], []
    print(f"{'case':<32} {'wall s':>7} {'bound s':>8} {'broken':>6} {'fast':>5} {'lost s':>7}  ok")
    for name, seconds in times.items():
        t = worst[name].get("timings", {})
        imports = sum("timed out" in p and "import" in p for p in worst[name].get("problems", {}).values())
        bound = 2 * normal + call_s * t.get("broken_requests", 0) + import_s * imports
        ok = seconds <= bound
        over += [] if ok else [name]
        print(f"{name:<32} {seconds:7.1f} {bound:8.1f} {t.get('broken_requests', 0):6g} {t.get('failed_fast', 0):5g} "
              f"{t.get('lost_to_failures_s', 0):7.1f}  {'ok' if ok else 'OVER'}")
    print(f"\n{len(times) - len(over)}/{len(times)} within bound" + (f"; over: {', '.join(over)}" if over else ""))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
