"""The test corpus (tests/corpus/variants.py) graded under a setting: kill rate of the planted bugs
and false-fail rate of the correct-but-different variants, to choose the spec's knobs by data.

    .venv/bin/python bench/sensitivity.py [--set hypothesis.max_examples=3 ...] [--jobs 2]

A bug is killed when every item it names in `loses` loses points (or, for 0-point items, fails a
check); a correct variant fails falsely when it scores under full marks. Prints the misses by name,
the two rates and the wall time.
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
from corpus.variants import VARIANTS, apply  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=[], dest="settings")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sensitivity-"))
    zips = []
    for v in VARIANTS:
        path = tmp / f"{v.name}.zip"
        with zipfile.ZipFile(path, "w") as z:
            for name, text in sorted(apply(v, REPO / "reference" / "a3").items()):
                z.writestr(name, text)
        zips.append(path)
    extra = ["--quiet", "--limit", "workers=1", *(a for s in args.settings for a in ("--set", s))]
    start = time.monotonic()
    chunks = [zips[i::args.jobs] for i in range(args.jobs)]
    procs = [subprocess.Popen([sys.executable, "-m", "graders.cli", *map(str, c), "--out", str(tmp / f"out{i}"), *extra],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, c in enumerate(chunks)]
    for p in procs:
        p.wait()
    wall = time.monotonic() - start
    killed, missed, false_fail = 0, [], []
    for i, chunk in enumerate(chunks):
        for z in chunk:
            r = json.loads((tmp / f"out{i}" / z.stem / "results.json").read_text())
            v = next(v for v in VARIANTS if v.name == z.stem)
            by_id = {item["id"]: item for item in r["items"]}
            if v.kind == "correct":
                if r["score"] < r["max_score"]:
                    false_fail.append(f"{v.name} ({r['score']:g})")
                continue
            caught = all(by_id[i]["status"] != "passed" if by_id[i]["max_score"] == 0
                         else by_id[i]["score"] < by_id[i]["max_score"] for i in v.loses)
            killed += caught
            if not caught:
                missed.append(v.name)
    bugs = sum(v.kind == "bug" for v in VARIANTS)
    correct = len(VARIANTS) - bugs
    print(f"corpus under {' '.join(args.settings) or 'the spec as is'}: {len(VARIANTS)} grades in {wall:.0f} s")
    print(f"  kill rate        {killed}/{bugs} = {killed / bugs:.0%}   missed: {', '.join(missed) or '-'}")
    print(f"  false-fail rate  {len(false_fail)}/{correct} = {len(false_fail) / correct:.0%}   {', '.join(false_fail)}")


if __name__ == "__main__":
    main()
