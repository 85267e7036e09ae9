"""`grade batch ... --only ITEM`: some items of every submission graded again (a check fixed, a
training run measured again) and merged into each stored results.json: the other items, their
points and the by-hand marks (kept in OUT's store, never in results.json) stay as they were.

Each submission's partial grade (`grade --only`) is written into a side folder, then merged: its
items replace the stored ones of the same id, the totals are summed again, and the report says
which items were graded again and when. A partial grade that fails leaves the stored one whole."""

import shutil
import sys
from pathlib import Path

from graders.deploy.batch import GradeOne
from graders.reports.html import write_report
from graders.reports.results_file import write_results
from graders.scoring.results import Results

SIDE = ".regrade"  # OUT/<student>/.regrade/: the partial grade, removed once merged


def merge(stored: Results, partial: Results, only: tuple[str, ...]) -> Results:
    """`stored` with the items of `only` (and the training run, where the partial grade measured
    one) from `partial`; its own note on a partial grade replaced by what was graded again."""
    fresh = {i.id: i for i in partial.items if i.id in only}
    items = [fresh.get(i.id, i) for i in stored.items]
    # No time in it: the same regrade gives the same report (grade.log and the store's history say when).
    note = f"items {', '.join(only)} graded again (grade batch --only); the others are from the earlier grade"
    kept = [w for w in stored.warnings if not w.startswith(("partial grade:", "items "))]
    new = [w for w in partial.warnings if not w.startswith("partial grade:") and w not in kept]
    return stored.model_copy(
        update={
            "items": items,
            "score": round(sum(i.score for i in items if not i.bonus), 2),
            "bonus_score": round(sum(i.score for i in items if i.bonus), 2),
            "training": partial.training if partial.training is not None else stored.training,
            "warnings": [note, *kept, *new],
            "timings": {**stored.timings, "regrade_total_s": partial.timings.get("total_s", 0.0)},
            "sandbox": partial.sandbox,
            "sandbox_notes": partial.sandbox_notes,
            "sandbox_level": partial.sandbox_level,
            "sandbox_missing": sorted(set(stored.sandbox_missing) | set(partial.sandbox_missing)),
        }
    )


def _merge_into(out: Path, side: Path, only: tuple[str, ...]) -> bool:
    """Whether the partial grade in `side` was merged into out/results.json."""
    try:
        stored = Results.model_validate_json((out / "results.json").read_bytes())
        partial = Results.model_validate_json((side / "results.json").read_bytes())
    except (OSError, ValueError):
        return False
    if partial.grader_error:
        return False
    merged = merge(stored, partial, only)
    if partial.training is not None and partial.training.plot and (side / partial.training.plot).is_file():
        shutil.copyfile(side / partial.training.plot, out / partial.training.plot)
    write_results(merged, out)
    write_report(merged, out)  # grade batch then writes it again with the marks, where there are any
    return True


def regrading(grade_one: GradeOne, only: tuple[str, ...]) -> GradeOne:
    """`grade_one` (batch.GradeOne) grading only the items `only`, merged into what is stored."""

    def one(source: Path, out: Path, grade_args: list[str], timeout: float) -> str:
        side = out / SIDE
        args = [*grade_args, *(f"--only={item}" for item in only)]
        try:
            outcome = grade_one(source, side, grade_args=args, timeout=timeout)
            if (side / "grade.log").is_file():
                shutil.copyfile(side / "grade.log", out / "regrade.log")
            if outcome in ("graded", "grader error") and _merge_into(out, side, only):
                return outcome
            print(f"{out.name}: the new grade of {', '.join(only)} failed ({outcome}): kept as it was", file=sys.stderr)
            return "grader error"  # never "no report": the stored results.json stays, whole
        finally:
            shutil.rmtree(side, ignore_errors=True)

    return one
