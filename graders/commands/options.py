"""Options several `grade` commands share, defined once."""

import argparse

from graders.spec import assignments


def add_assignment(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--assignment",
        default="a3",
        help=f"the assignment, a folder of assignment/: {', '.join(assignments())}",
    )


def add_limit(parser: argparse.ArgumentParser, what: str = "the grade") -> None:
    parser.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"one of the spec's [limits] for {what}, e.g. --limit call_timeout_s=2 (repeatable)",
    )
