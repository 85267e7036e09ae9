"""Points each planted bug of the corpus costs under the two scoring policies: "charge_once" (the
default: a check that also runs another item's failing code is excused) and "cascade".

    .venv/bin/python bench/charge_policy.py [--jobs 2]

Each bug is graded once, under cascade; charge_once is then applied to the same check outcomes
with the grader's own graders.scoring.upstream.charge_once and graders.scoring.score.score_item (so the two
columns come from the same run). Prints a markdown table: bug, its own item, points lost under
each policy, and the items charged under each.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from benchlib import REPO
from sensitivity import _grade, _zip

sys.path.insert(0, str(REPO / "tests"))
from corpus.variants import VARIANTS  # noqa: E402

from graders.scoring.results import CheckResult  # noqa: E402
from graders.scoring.score import score_item  # noqa: E402
from graders.spec import load_spec, spec_path  # noqa: E402
from graders.scoring.upstream import charge_once  # noqa: E402


def lost_points(results: dict, rescore: bool) -> tuple[float, list[str]]:
    """Points lost (bonus aside) and the items that lost them; `rescore` applies charge_once."""
    spec = load_spec(spec_path("a3"))
    checked = {c["name"]: CheckResult.model_validate(c) for i in results["items"] for c in i["checks"]}
    if rescore:
        checked = charge_once(spec, checked, results.get("problems", {}))
    lost, where = 0.0, []
    for item in spec.items:
        if item.bonus or item.points == 0:
            continue
        scored = score_item(item, [checked[c.name] for c in item.checks])
        if scored.score < item.points:
            lost += item.points - scored.score
            where.append(item.id)
    return round(lost, 2), where


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-charge-"))
    bugs = [v for v in VARIANTS if v.kind == "bug"]
    extra = ["--quiet", "--limit", "workers=1", "--set", "scoring.policy=cascade"]
    graded = _grade([_zip(tmp, v) for v in bugs], tmp / "out", args.jobs, extra)
    print("| bug | its item | lost, charge once | lost, cascade | items charged (charge once / cascade) |")
    print("| --- | --- | --- | --- | --- |")
    totals = [0.0, 0.0]
    for v in bugs:
        once, once_items = lost_points(graded[v.name], rescore=True)
        cascade, cascade_items = lost_points(graded[v.name], rescore=False)
        totals[0] += once
        totals[1] += cascade
        print(f"| {v.name} | {', '.join(v.loses)} | {once:g} | {cascade:g} | "
              f"{', '.join(once_items) or '-'} / {', '.join(cascade_items) or '-'} |")
    print(f"| all {len(bugs)} bugs | | {totals[0]:.2f} | {totals[1]:.2f} | |")


if __name__ == "__main__":
    main()
