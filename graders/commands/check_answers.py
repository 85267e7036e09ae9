"""`grade check-answers ANSWERS --assignment NAME`: how the grader reads each answer of a written
assignment's answers file, and which it cannot read and why, without saying whether any is right
(graders/written/preview.py; the templates' `make selfcheck` prints the same)."""

import argparse
import sys
from pathlib import Path

from graders.spec import SpecError, assignment_dir, load_spec, spec_path


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="grade check-answers",
        description="Show how the grader reads each answer (not whether it is right); exit 0 when every "
        "answer given can be read, 1 when one cannot, 2 when the file or the assignment cannot be read.",
    )
    command.add_argument("answers", type=Path, help="the answers file, e.g. answers.yaml")
    command.add_argument("--assignment", default="written", help="a written assignment (default: written)")
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from graders.written.key import KeyProblem, key_forms, load_key
    from graders.written.preview import run

    try:
        spec = load_spec(spec_path(args.assignment))
        if spec.key is None:
            raise SpecError(f"{args.assignment} has no answer key: it is not a written assignment")
        forms = key_forms(load_key(assignment_dir(spec) / spec.key))
    except (SpecError, KeyProblem) as e:
        print(f"grade check-answers: {e}", file=sys.stderr)
        return 2
    return run(forms, args.answers, spec.code_file(), "grade check-answers")
