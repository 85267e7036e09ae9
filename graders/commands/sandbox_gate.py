"""`--sandbox LEVEL` and the check every grading command makes before anything runs: refused
(exit status 3, nothing graded) where this machine cannot give the level's layers; a loud warning
where the TA asked for fewer than the full sandbox (graders/execution/policy.py)."""

import argparse
import sys

from graders.execution import policy
from graders.spec import Spec


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sandbox",
        choices=tuple(policy.REQUIRED),
        help="the sandbox student code must run under (default: the spec's limits.sandbox, full): "
        "full, every layer; container, no bwrap, inside a container that isolates the grade; minimal, "
        "whatever this machine gives. Grading is refused when the machine cannot give the level.",
    )


def as_limits(args: argparse.Namespace) -> list[str]:
    """--sandbox as the --limit it stands for, after the other --limit options (it wins)."""
    return [*args.limit, *([f"sandbox={args.sandbox}"] if args.sandbox else [])]


def check(spec: Spec, prog: str) -> int | None:
    """None when grading may go on (after a warning, where the level is below full); else the
    refusal printed and its exit status."""
    if not spec.runs_student_code():
        return None
    verdict = policy.assess(spec.limits.sandbox)
    if not verdict.ok:
        print(f"{prog}: {policy.refusal(verdict)}", file=sys.stderr)
        return policy.REFUSED_STATUS
    if verdict.weaker:
        print(policy.banner(verdict), file=sys.stderr, flush=True)
    return None
