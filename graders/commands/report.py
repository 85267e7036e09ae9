"""`grade report RESULTS`: report.html re-rendered from a stored results.json, without regrading."""

import argparse
import sys
from pathlib import Path

from graders.handgrading.store import load_marks
from graders.reports.html import write_report
from graders.scoring.results import Results


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="grade report", description="Re-render report.html from a stored results.json."
    )
    command.add_argument("results", type=Path, help="a results.json that grade wrote")
    command.add_argument("--out", type=Path, help="the HTML file to write (default: report.html beside results.json)")
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        results = Results.model_validate_json(args.results.read_bytes())
    except (OSError, ValueError) as e:
        print(f"grade report: {args.results}: {e}", file=sys.stderr)
        return 2
    # In a batch's OUT/<student>/, the by-hand marks of OUT's store (`grade hand`) are shown too.
    folder = args.results.resolve().parent
    marks = load_marks(folder.parent).get(folder.name, {})
    print(f"report: {write_report(results, args.results.parent, args.out, hand=marks)}")
    return 0
