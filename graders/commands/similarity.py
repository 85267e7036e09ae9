"""`grade similarity INPUT --out OUT`: pairwise similarity of a class's code (graders/similarity/).
INPUT is a folder of submissions (zips or folders, as `grade batch` takes) or a batch's OUT folder
(its sources.json says where each submission came from, and for which assignment)."""

import argparse
import sys
from pathlib import Path

from graders.deploy.batch import find_submissions
from graders.deploy.sources import SOURCES_FILE, read_sources
from graders.spec import SpecError, load_spec, spec_path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade similarity",
        description="Similar code across a class: every pair of submissions scored, starter code removed. "
        "Nothing is run; nothing is accused: the page shows the evidence for staff to judge.",
    )
    parser.add_argument("input", type=Path, help="a folder of submissions (zips or folders), or a grade batch OUT")
    parser.add_argument("--out", type=Path, required=True, help="OUT/similarity.html, similarity.csv, similarity.json")
    parser.add_argument("--assignment", help="default: the batch's (from its sources.json), else a3")
    parser.add_argument("--min-score", type=float, default=0.3, help="pairs listed from this score on (0 to 1)")
    parser.add_argument("--show", type=int, default=50, help="pairs shown side by side in the page")
    parser.add_argument("--starter", type=Path, help="the starter code's folder (default: the assignment's template)")
    return parser


def _inputs(args: argparse.Namespace) -> tuple[str, dict[str, Path]]:
    """The assignment and each student's submission; ValueError when INPUT has none."""
    if not args.input.is_dir():
        raise ValueError(f"{args.input}: not a folder")
    if (args.input / SOURCES_FILE).is_file():
        assignment, students = read_sources(args.input)
    else:
        assignment, students = "a3", find_submissions(args.input)
    if not students:
        raise ValueError(f"{args.input}: no submissions (zips or folders) in it")
    if not 0 <= args.min_score <= 1 or args.show < 0:
        raise ValueError("--min-score must be between 0 and 1 and --show at least 0")
    if args.starter and not args.starter.is_dir():
        raise ValueError(f"--starter {args.starter}: not a folder")
    return args.assignment or assignment, students


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from graders.similarity.run import Options, comparable, run_similarity  # numpy: only once the options hold

    try:
        assignment, students = _inputs(args)
        spec = load_spec(spec_path(assignment))
        comparable(spec)
    except (SpecError, ValueError) as e:
        print(f"grade similarity: {e}", file=sys.stderr)
        return 2
    result = run_similarity(students, spec, args.out, Options(args.min_score, args.show, args.starter))
    seconds = ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in result.timings.items())
    print(
        f"{result.compared} submissions compared ({result.pairs_total} pairs), {result.pairs_over} scored "
        f"{args.min_score} or more; {args.out / 'similarity.html'}, {args.out / 'similarity.csv'} ({seconds})"
    )
    for student, why in sorted(result.not_compared.items()):
        print(f"not compared: {student}: {why}", file=sys.stderr)
    return 0
