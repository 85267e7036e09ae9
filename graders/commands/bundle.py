"""`grade gradescope-bundle --out ZIP`: Gradescope's autograder zip (deploy/bundle.py); a written
assignment's key is bundled only when every claim of it holds."""

import argparse
import sys
from pathlib import Path

from graders.commands import options
from graders.execution.policy import REFUSED_STATUS, SandboxRefused
from graders.spec import SpecError, assignment_dir, load_spec, spec_path


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="grade gradescope-bundle",
        description="Write the Gradescope autograder zip (setup.sh, run_autograder, the grader).",
    )
    command.add_argument("--out", type=Path, required=True, help="the zip to write, e.g. autograder.zip")
    options.add_assignment(command)
    command.add_argument("--dir", type=Path, help="also unpack it into this folder (the Docker build context)")
    command.add_argument(
        "--sandbox",
        choices=("full", "container", "minimal"),
        default="container",
        help="the sandbox level run_autograder grades at (default container: Gradescope's containers allow no "
        "bwrap); a container that cannot give it refuses to grade, and Gradescope shows no score",
    )
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from graders.deploy.bundle import write_bundle, write_folder

    try:
        spec = load_spec(spec_path(args.assignment))
        if spec.engine == "written" and spec.key:  # a key with a false claim must not reach the students
            key = assignment_dir(spec) / spec.key
            refused = _refused_claims(key)
            if refused:
                print(
                    f"grade gradescope-bundle: not bundled: claims of the key not true: {', '.join(refused)} "
                    f"(grade check-key {key} says why)",
                    file=sys.stderr,
                )
                return 1
        path = write_bundle(spec, args.out, args.sandbox)
        if args.dir:
            write_folder(spec, args.dir, args.sandbox)
    except (SpecError, ValueError, OSError) as e:
        print(f"grade gradescope-bundle: {e}", file=sys.stderr)
        return 2
    except SandboxRefused as e:  # the key's claims run in the sandbox, as check-key runs them
        print(f"grade gradescope-bundle: {e}", file=sys.stderr)
        return REFUSED_STATUS
    print(
        f"bundle: {path}" + (f", unpacked in {args.dir}" if args.dir else "") + f"; grades at --sandbox {args.sandbox}"
    )
    return 0


def _refused_claims(key_path: Path) -> list[str]:
    from graders.written.key import KeyProblem
    from graders.written.keycheck import check_key_file  # sympy and the worker client: only when bundling a key

    try:
        return [o.claim.id for o in check_key_file(key_path) if not o.true]
    except KeyProblem as e:
        raise ValueError(str(e)) from None
