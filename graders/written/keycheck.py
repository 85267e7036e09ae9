"""`grade check-key KEY`: every claim of an answer key, run in the sandboxed worker.

A claim is code a TA wrote, but it runs where student code runs: in the worker, under the same
sandbox and limits, one request per claim with its own timeout. A claim that raises, kills its
worker or hangs costs that claim only; the client starts a fresh worker for the next one.
"""

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from graders.execution.client import StudentError, Worker, WorkerError
from graders.execution.policy import REFUSED_STATUS, REQUIRED, SandboxRefused
from graders.spec import Limits, SpecError, load_spec
from graders.written.expressions import ExpressionError, number_value, parse_expression, same
from graders.written.key import AnswerKey, Claim, KeyProblem, Part, load_key

CLAIM_TIMEOUT_S = 30.0  # sympy.stats and trigsimp claims take ~1 s; a loaded machine, several times that
Status = Literal["true", "false", "crashed", "timed_out"]
SHOWN = {"true": "true", "false": "FALSE", "crashed": "CRASHED", "timed_out": "TIMED OUT"}


@dataclass(frozen=True)
class ClaimOutcome:
    claim: Claim
    status: Status
    detail: str = ""  # why it is not true: the value, the exception and its line, the timeout

    @property
    def true(self) -> bool:
        return self.status == "true"


def _crash(claim: Claim, info: dict) -> str:
    where = ""
    if info.get("line"):
        code = claim.code.splitlines()[info["line"] - 1].strip() if info["line"] <= len(claim.code.splitlines()) else ""
        where = f" at line {info['line']} of its code" + (f" ({code})" if code else "")
    return f"raised {info.get('type', 'an error')}{where}: {info.get('message', '')}".rstrip(": ")


def _agrees(part: Part, reply: dict) -> tuple[bool, str]:
    """Whether a claim's value (worker data: a number, or text our own parser reads) is the part's
    key answer; else what it evaluated to, beside the key's."""
    number, text = reply.get("number"), reply.get("text")
    key_answer = f"{part.number!r}" if part.number is not None else part.expression
    try:
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            value = float(number)
        elif isinstance(text, str):
            expr = parse_expression(text, part.symbols)
            if part.expression is not None:
                ok = same(part.expected(), expr)
                return ok, "" if ok else f"not the key's answer: it evaluated to {text}, the key says {key_answer}"
            value = number_value(expr)
        else:
            return False, f"not the key's answer: it evaluated to {reply.get('value')}, not a number or expression"
    except (ExpressionError, OverflowError) as e:
        return False, f"not the key's answer: its value {str(text)[:100]} {e}"
    if part.number is None:
        return (
            False,
            f"not the key's answer: it evaluated to the number {value:g}, the key has the expression {key_answer}",
        )
    abs_tol, rel_tol = part.tolerance()
    if abs(value - part.number) <= max(abs_tol, rel_tol * abs(part.number)):
        return True, ""
    return False, f"not the key's answer: it evaluated to {value:g}, the key says {key_answer}"


def _run_claim(worker: Worker, claim: Claim, timeout_s: float, key: AnswerKey) -> ClaimOutcome:
    worker.begin_check()  # the last claim's failure must not short-circuit this one
    try:
        reply = worker.request("claim", f"claim {claim.id}", timeout=timeout_s, code=claim.code)
    except StudentError as e:
        return ClaimOutcome(claim, "crashed", _crash(claim, e.info))
    except WorkerError as e:
        timed_out = str(e).startswith("timed out")
        return ClaimOutcome(
            claim,
            "timed_out" if timed_out else "crashed",
            f"did not finish within {timeout_s:g} s" if timed_out else str(e),
        )
    if claim.part is not None:  # the key's answer must be what the claim computes
        agrees, why = _agrees(key.part(claim.part), reply)
        return ClaimOutcome(claim, "true" if agrees else "false", why)
    if reply["true"] is True:
        return ClaimOutcome(claim, "true")
    return ClaimOutcome(claim, "false", f"not true: it evaluated to {reply['value']}")


def check_key(key: AnswerKey, limits: Limits, timeout_s: float = CLAIM_TIMEOUT_S) -> list[ClaimOutcome]:
    """Every claim's outcome, in the key's order, from one worker (restarted after a crash or hang)."""
    if not key.claims:
        return []
    scratch = Path(tempfile.mkdtemp(prefix="grade-key-"))
    # sympy is imported at every (re)start, under import_timeout_s: a claim's own timeout then
    # measures the claim, not the second of importing sympy.
    worker = Worker(scratch, limits, modules=["sympy"])
    try:
        return [_run_claim(worker, claim, timeout_s, key) for claim in key.claims]
    finally:
        worker.close()
        shutil.rmtree(scratch, ignore_errors=True)


def check_key_file(path: Path, timeout_s: float = CLAIM_TIMEOUT_S, sandbox: str | None = None) -> list[ClaimOutcome]:
    """check_key on the key at `path`, under the limits of the assignment whose folder holds it
    (`sandbox`: another level); an invalid key or spec raises KeyProblem or SpecError before any
    claim runs, a machine that cannot give the level SandboxRefused."""
    key, limits = load_key(path), claim_limits(path)
    if sandbox:
        limits = limits.model_copy(update={"sandbox": sandbox})
    return check_key(key, limits, timeout_s)


def claim_limits(key_path: Path) -> Limits:
    """The limits of the assignment whose folder holds the key; a key elsewhere gets the defaults."""
    spec = key_path.resolve().parent / "spec.toml"
    return load_spec(spec).limits if spec.is_file() else Limits()


def report(outcomes: list[ClaimOutcome]) -> list[str]:
    width = max((len(o.claim.id) for o in outcomes), default=0)
    return [
        f"{o.claim.id:<{width}}  {SHOWN[o.status]:<9}  {o.claim.statement}" + (f" — {o.detail}" if o.detail else "")
        for o in outcomes
    ]


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="grade check-key",
        description="Run every claim of a written-answers key "
        "in the sandbox; exit 0 only if all are true (1: one is not, 2: invalid key, 3: sandbox refused).",
    )
    command.add_argument("key", type=Path, help="the key, e.g. assignment/written/key.yaml")
    command.add_argument("--timeout", type=float, default=CLAIM_TIMEOUT_S, help="seconds each claim may take")
    command.add_argument(
        "--sandbox",
        choices=tuple(REQUIRED),
        help="the sandbox the claims must run under (default: the assignment's limits.sandbox, full)",
    )
    return command


def main(argv: list[str]) -> int:
    command = parser()
    args = command.parse_args(argv)
    if args.timeout <= 0:
        command.error("--timeout must be positive")
    try:
        outcomes = check_key_file(args.key, args.timeout, args.sandbox)
    except (KeyProblem, SpecError) as e:
        print(f"grade check-key: {e}", file=sys.stderr)
        return 2
    except SandboxRefused as e:
        print(f"grade check-key: {e}", file=sys.stderr)
        return REFUSED_STATUS
    for line in report(outcomes):
        print(line)
    refused = [o.claim.id for o in outcomes if not o.true]
    if refused:
        print(f"key refused: {len(refused)} of {len(outcomes)} claims not true: {', '.join(refused)}")
        return 1
    print(f"key ok: all {len(outcomes)} claims true")
    return 0
