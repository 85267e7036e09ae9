"""`grade SUBMISSION... --out OUT`: each submission graded in this process, its results.json,
report.html (and Gradescope's file, with --gradescope) written, a table or a total printed.

A grade process of `grade batch` runs this too (deploy/forked_grades.py): one submission each."""

import argparse
import sys
import traceback
from pathlib import Path

from graders.commands import options, sandbox_gate
from graders.commands.overrides import with_limits, with_settings
from graders.execution.policy import REFUSED_STATUS, SandboxRefused
from graders.reports.console import table
from graders.reports.gradescope import write_gradescope
from graders.reports.html import write_report
from graders.reports.results_file import write_results
from graders.scoring.fallback import fallback_results
from graders.scoring.results import Results
from graders.spec import Spec, SpecError, load_spec, spec_path


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade",
        description="Grade submission zips (or folders). "
        "`grade report results.json` re-renders a report without regrading.",
    )
    parser.add_argument("submissions", nargs="+", type=Path, help="submission.zip files or folders")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("grade-out"),
        help="where results.json goes (one sub-folder per submission when there are several)",
    )
    options.add_assignment(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the totals")
    options.add_limit(parser, "the grade")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.NAME=VALUE",
        dest="settings",
        help="override any other setting of the spec, e.g. --set hypothesis.max_examples=3 (for "
        "experiments: the report then says the spec was changed)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ITEM",
        help="grade only this item (repeatable), e.g. --only '3(b)iii'; the report then covers "
        "just those items and says so",
    )
    sandbox_gate.add_option(parser)
    parser.add_argument(
        "--gradescope",
        type=Path,
        metavar="PATH",
        help="also write PATH in Gradescope's results.json format (one submission only)",
    )
    return parser


def main(argv: list[str]) -> int:
    command = parser()
    args = command.parse_args(argv)
    if args.gradescope and len(args.submissions) != 1:
        command.error("--gradescope takes exactly one submission")
    try:
        limits = sandbox_gate.as_limits(args)
        spec = with_settings(with_limits(load_spec(spec_path(args.assignment)), limits), args.settings)
        if args.only:
            spec = spec.only(args.only)
    except (SpecError, ValueError) as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    refused = sandbox_gate.check(spec, "grade")
    if refused is not None:
        return refused
    status = 0
    try:
        for source in args.submissions:
            out = args.out if len(args.submissions) == 1 else args.out / source.stem
            status = max(status, _grade_one(source, spec, out, args))
    except SandboxRefused as e:  # the worker's own wall (client.Worker): nothing of this one is reported
        print(f"grade: {e}", file=sys.stderr)
        return REFUSED_STATUS
    return status


def _grade_one(source: Path, spec: Spec, out: Path, args: argparse.Namespace) -> int:
    """Grade `source` into `out` and say so; 1 when the grader itself failed (a report still written)."""
    from graders.runner import grade  # torch and the checks: only once the options are known to be good

    status = 0
    try:
        results = grade(source, spec, out_dir=out)
    except SandboxRefused:
        raise
    except Exception as e:  # the grader's own failure: still a report, with score 0 and why
        results = fallback_results(source, spec, f"{type(e).__name__}: {e}")
        traceback.print_exc()
        status = 1
    _note_changes(results, args)
    path = write_results(results, out)
    if args.gradescope:
        write_gradescope(results, args.gradescope, spec.stdout_visibility)
    try:
        html = write_report(results, out)
    except Exception:  # the HTML is a view of results.json, which is already written
        traceback.print_exc()
        html, status = None, 1
    _print(source, results, path, html, args.quiet)
    return status


def _note_changes(results: Results, args: argparse.Namespace) -> None:
    """A grade under changed settings, or of some items only, says so first among its warnings."""
    if args.settings:
        results.warnings.insert(
            0,
            f"the spec was changed for this grade (--set {', '.join(args.settings)}): "
            "not the assignment's own settings",
        )
    if args.only:
        results.warnings.insert(
            0, f"partial grade: only {', '.join(args.only)} graded (grade --only); the score covers those items alone"
        )


def _print(source: Path, results: Results, path: Path, html: Path | None, quiet: bool) -> None:
    if quiet:
        print(f"{source}: {results.score:g}/{results.max_score:g}")
    else:
        print(f"\n{source.name}  (sha256 {results.submission.sha256[:12]})")
        print(table(results))
        for w in results.warnings:
            print(f"warning: {w}")
        print(f"report: {path}" + (f" and {html}" if html else ""))
    if results.sandbox_warning:  # quiet or not: a grade under fewer layers is never silent
        print(f"WARNING: {results.sandbox_warning}")
    if results.grader_error:
        print(f"grader error: {results.grader_error}", file=sys.stderr)
