"""Start-up cost of the sandbox against a plain subprocess, median of N, same run.

    .venv/bin/python bench/sandbox_overhead.py [--runs 5]

Two numbers per mode: spawning `/bin/true` through the sandbox's command and pre-exec hook
(the cost of bwrap, cgroups, rlimits and the uid slot alone), and starting a real worker up to
its hello (interpreter, `import torch`, Landlock). GRADER_SANDBOX=plain is the baseline.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _inner(runs: int) -> dict:
    from graders.execution.client import Worker
    from graders.execution.sandbox import Sandbox
    from graders.spec import load_spec, spec_path

    # The baseline (GRADER_SANDBOX=plain) runs at --sandbox minimal: the level a benchmark opts into.
    limits = load_spec(spec_path("a3")).limits.model_copy(update={"sandbox": "minimal"})
    spawn, start, layers = [], [], ""
    for _ in range(runs):
        scratch = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
        box = Sandbox(scratch, scratch, limits)
        t = time.perf_counter()
        subprocess.run(box.command(["/bin/true"]), cwd=scratch, preexec_fn=box.preexec(), check=True)
        spawn.append(time.perf_counter() - t)
        box.close()
        worker = Worker(scratch, limits, [])
        t = time.perf_counter()
        worker.start()
        start.append(time.perf_counter() - t)
        layers = worker.layers
        worker.close()
    return {"layers": layers, "spawn_ms": 1000 * statistics.median(spawn), "worker_start_s": statistics.median(start)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(_inner(args.runs)))
        return
    rows = {}
    for mode in ("plain", "auto"):
        env = {**os.environ, "GRADER_SANDBOX": mode}
        out = subprocess.run([sys.executable, __file__, "--inner", "--runs", str(args.runs)], cwd=REPO, env=env,
                             check=True, capture_output=True, text=True).stdout
        rows[mode] = json.loads(out.splitlines()[-1])
    print(f"{'mode':<6} {'layers':<38} {'spawn /bin/true':>16} {'worker start':>13}   (median of {args.runs})")
    for mode, r in rows.items():
        print(f"{mode:<6} {r['layers']:<38} {r['spawn_ms']:>13.1f} ms {r['worker_start_s']:>11.2f} s")
    print(f"overhead: spawn {rows['auto']['spawn_ms'] - rows['plain']['spawn_ms']:+.1f} ms, "
          f"worker start {rows['auto']['worker_start_s'] - rows['plain']['worker_start_s']:+.2f} s")


if __name__ == "__main__":
    main()
