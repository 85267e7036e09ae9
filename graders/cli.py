"""`grade`: the command course staff run."""

import argparse
import json
import sys
import traceback
from pathlib import Path

from . import __version__
from .results import Results, Submission
from .runner import grade
from .spec import Spec, SpecError, load_spec, spec_path


def _table(results: Results) -> str:
    rows = [("item", "points", "max", "")]
    for item in results.items:
        if item.max_score == 0 and item.status == "passed":
            reason = "ok"
        else:
            reason = "" if item.status == "passed" else item.feedback
        rows.append((item.id, f"{item.score:g}" if not item.status == "manual" else "-", f"{item.max_score:g}",
                     (reason[:110] + "…") if len(reason) > 111 else reason))
    rows.append(("total", f"{results.score:g}", f"{results.max_score:g}",
                 f"bonus {results.bonus_score:g}/{results.bonus_max:g} (graded by hand)"))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]:>{width[2]}}  {r[3]}" for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _fallback(source: Path, spec: Spec, reason: str) -> Results:
    return Results(assignment=spec.assignment, grader_version=__version__,
                   submission=Submission(name=source.name, sha256="", files=[]), score=0,
                   max_score=spec.points(), bonus_score=0, bonus_max=spec.points(bonus=True), items=[],
                   grader_error=reason)


def _write(results: Results, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(results.model_dump_json(indent=2) + "\n")
    return path


def _with_limits(spec: Spec, overrides: list[str]) -> Spec:
    limits = spec.limits.model_dump()
    for text in overrides:
        name, _, value = text.partition("=")
        if name not in limits or not value:
            raise ValueError(f"--limit {text}: expected NAME=VALUE with NAME one of {', '.join(limits)}")
        limits[name] = value
    return spec.model_copy(update={"limits": type(spec.limits).model_validate(limits)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grade", description="Grade submission zips (or folders).")
    parser.add_argument("submissions", nargs="+", type=Path, help="submission.zip files or folders")
    parser.add_argument("--out", type=Path, default=Path("grade-out"),
                        help="where results.json goes (one sub-folder per submission when there are several)")
    parser.add_argument("--assignment", default="a3")
    parser.add_argument("--quiet", action="store_true", help="print only the totals")
    parser.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                        help="override one of the spec's [limits], e.g. --limit call_timeout_s=2")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(spec_path(args.assignment))
        spec = _with_limits(spec, args.limit)
    except (SpecError, ValueError) as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    status = 0
    for source in args.submissions:
        out = args.out if len(args.submissions) == 1 else args.out / source.stem
        try:
            results = grade(source, spec, out_dir=out)
        except Exception as e:  # the grader's own failure: still a report, with score 0 and why
            results = _fallback(source, spec, f"{type(e).__name__}: {e}")
            traceback.print_exc()
            status = 1
        path = _write(results, out)
        if args.quiet:
            print(f"{source}: {results.score:g}/{results.max_score:g}")
        else:
            print(f"\n{source.name}  (sha256 {results.submission.sha256[:12]})")
            print(_table(results))
            for w in results.warnings:
                print(f"warning: {w}")
            print(f"report: {path}")
        if results.grader_error:
            print(f"grader error: {results.grader_error}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
