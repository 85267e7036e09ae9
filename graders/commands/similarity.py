"""`grade similarity INPUT [--out OUT]`: pairwise similarity of a class's code (graders/similarity/).
INPUT is a folder of submissions (zips or folders, as `grade batch` takes) or a batch's OUT folder
(its sources.json says where each submission came from, and for which assignment; OUT defaults to
it, and its summary.html's "Similar code" section is rendered again)."""

import argparse
import sys
from pathlib import Path

from graders.deploy.batch import find_submissions
from graders.deploy.sources import SOURCES_FILE, read_sources
from graders.spec import SpecError, load_spec, spec_path


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade similarity",
        description="Similar code across a class: every pair of submissions scored, starter code removed. "
        "Nothing is run; nothing is accused: the page shows the evidence for staff to judge.",
    )
    parser.add_argument("input", type=Path, help="a folder of submissions (zips or folders), or a grade batch OUT")
    parser.add_argument(
        "--out", type=Path, help="OUT/similarity.html, similarity.csv, similarity.json (default for a batch OUT: it)"
    )
    parser.add_argument("--assignment", help="default: the batch's (from its sources.json), else a3")
    parser.add_argument("--min-score", type=float, default=0.3, help="pairs listed from this score on (0 to 1)")
    parser.add_argument("--show", type=int, default=50, help="pairs shown side by side in the page")
    parser.add_argument(
        "--starter",
        type=Path,
        help="the starter code students received, a folder or a zip (default: the spec's starter, else the "
        "assignment's template)",
    )
    parser.add_argument(
        "--common-fraction",
        type=float,
        default=0.1,
        help="code found in more than this share of the submissions (and more than --common-count) is removed "
        "as common to the class; 1 removes nothing",
    )
    parser.add_argument("--common-count", type=int, default=2, help="see --common-fraction")
    parser.add_argument(
        "--limit", type=int, default=1000, help="pairs of similarity.csv given their matched lines (the rest: scores)"
    )
    return parser


def _check(args: argparse.Namespace) -> None:
    if not 0 <= args.min_score <= 1 or args.show < 0 or args.limit < 0:
        raise ValueError("--min-score must be between 0 and 1, --show and --limit at least 0")
    if not 0 < args.common_fraction <= 1 or args.common_count < 1:
        raise ValueError("--common-fraction must be above 0 and at most 1, --common-count at least 1")


def _inputs(args: argparse.Namespace) -> tuple[str, dict[str, Path], Path]:
    """The assignment, each student's submission and OUT; ValueError when INPUT has none."""
    if not args.input.is_dir():
        raise ValueError(f"{args.input}: not a folder")
    batch = (args.input / SOURCES_FILE).is_file()
    if batch:
        assignment, students = read_sources(args.input)
    else:
        assignment, students = "a3", find_submissions(args.input)
    if not students:
        raise ValueError(f"{args.input}: no submissions (zips or folders) in it")
    if args.out is None and not batch:
        raise ValueError("--out is needed (only a batch's OUT is written into by default)")
    _check(args)
    return args.assignment or assignment, students, args.out or args.input


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from graders.similarity.index import Common  # numpy: only once the options hold
    from graders.similarity.run import Options, comparable, run_similarity
    from graders.similarity.sources import choose_starter

    try:
        assignment, students, out = _inputs(args)
        spec = load_spec(spec_path(assignment))
        comparable(spec)
        choose_starter(spec, args.starter)  # a missing starter is said before any work
        common = Common(args.common_fraction, args.common_count)
        options = Options(args.min_score, args.show, args.starter, args.limit, common)
        result = run_similarity(students, spec, out, options)
    except (SpecError, ValueError) as e:
        print(f"grade similarity: {e}", file=sys.stderr)
        return 2
    seconds = ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in result.timings.items())
    print(
        f"{result.compared} submissions compared ({result.pairs_total} pairs), {result.pairs_over} scored "
        f"{args.min_score} or more; starter removed: {result.starter}; and as common: passages in more than "
        f"{result.common_limit} submissions; {out / 'similarity.html'}, {out / 'similarity.csv'} ({seconds})"
    )
    for student, why in sorted(result.not_compared.items()):
        print(f"not compared: {student}: {why}", file=sys.stderr)
    return 0
