"""`grade`: the command course staff run. Only dispatch: `grade SUBCOMMAND ...` goes to that
subcommand, anything else is `grade SUBMISSION...` (graders/commands/ parse their own options)."""

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from graders.execution.quick_exit import exit_now

# Each imported only when it runs: `grade report` needs neither torch nor the checks.
SUBCOMMANDS = {
    "report": "graders.commands.report",
    "batch": "graders.commands.batch",
    "similarity": "graders.commands.similarity",
    "gradescope-bundle": "graders.commands.bundle",
    "check-key": "graders.written.keycheck",
    "check-answers": "graders.commands.check_answers",
    "hand": "graders.commands.hand",
}


def _command(name: str) -> Callable[[list[str]], int]:
    return importlib.import_module(SUBCOMMANDS[name]).main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SUBCOMMANDS and not Path(argv[0]).exists():
        return _command(argv[0])(argv[1:])
    from graders.commands.grade import main as grade

    return grade(argv)


def run() -> None:
    """The `grade` command: main(), then out at once (quick_exit.py)."""
    exit_now(main())


if __name__ == "__main__":
    run()
