"""`grade hand OUT`: mark a graded batch's by-hand parts in the browser (graders/handgrading/), or
headless: `--export sheet.csv`, `--import sheet.csv`, `--write` (the views from the marks)."""

import argparse
import getpass
import secrets
import sys
from pathlib import Path

from graders.handgrading.classroom import Classroom, load_classroom
from graders.handgrading.sheet import SheetProblem, export_sheet, import_sheet
from graders.handgrading.store import STORE_FILE, Store
from graders.handgrading.writer import ViewWriter
from graders.spec import SpecError


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade hand",
        description="Grade a batch's by-hand parts: a web app on this machine, or a sheet. The marks are kept "
        f"in OUT/{STORE_FILE}; grades.csv, report.html and summary.html show them.",
    )
    parser.add_argument("out", type=Path, help="a batch's OUT folder (grade batch ... --out OUT)")
    parser.add_argument("--assignment", help="the batch's assignment (default: the one OUT/sources.json names)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)"
    )
    parser.add_argument("--port", type=int, default=8765, help="the port (0: any free one)")
    parser.add_argument("--token", help="the access token in the printed link (default: a new random one)")
    parser.add_argument("--grader", default="", help="the name recorded with --import's marks (default: your login)")
    headless = parser.add_mutually_exclusive_group()
    headless.add_argument(
        "--export", type=Path, metavar="SHEET.csv", help="write the by-hand parts as a sheet, then stop"
    )
    headless.add_argument(
        "--import",
        dest="import_",
        type=Path,
        metavar="SHEET.csv",
        help="enter a sheet's marks (all or nothing), then stop",
    )
    headless.add_argument(
        "--write", action="store_true", help="rewrite grades.csv, report.html and summary.html, then stop"
    )
    return parser


def _grader(given: str) -> str:
    if given.strip():
        return " ".join(given.split())[:60]
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "staff"


def _headless(args: argparse.Namespace, room: Classroom, store: Store) -> int:
    if args.export:
        rows = export_sheet(room, store, args.export)
        print(f"grade hand: {rows} rows ({len(room.questions)} parts x {len(room.students)} students) in {args.export}")
        return 0
    if args.import_:
        try:
            changed = import_sheet(room, store, args.import_, _grader(args.grader))
        except SheetProblem as e:
            print(f"grade hand --import: refused, nothing was written:\n{e}", file=sys.stderr)
            return 2
        print(f"grade hand: {changed} marks entered from {args.import_}")
    ViewWriter(room, background=False).flush()
    print(f"grade hand: {room.out / 'grades.csv'}, {room.out / 'summary.html'} and the marked reports written")
    return 0


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    headless = bool(args.export or args.import_ or args.write)
    try:
        # An import needs no answers (a sheet has them); an export shows them beside each row.
        room = load_classroom(args.out, args.assignment, answers=not (args.import_ or args.write))
        if not room.questions:
            raise ValueError(f"{room.spec.assignment} has no part graded by hand")
    except (ValueError, SpecError) as e:
        print(f"grade hand: {e}", file=sys.stderr)
        return 2
    store = Store(args.out / STORE_FILE)
    store.sync_questions(room.questions, _grader(args.grader))
    if headless:
        return _headless(args, room, store)
    from graders.handgrading.serve import serve  # flask and waitress: only for the app

    return serve(room, store, args.token or secrets.token_urlsafe(18), args.host, args.port)
