"""A grade that refused to run for its sandbox (exit status 3, graders/execution/policy.py) in a
batch's grade process, container or Dask task: never a score-0 report, but the end of the batch,
with the refusal's own words (what is missing where, and the fix)."""

from graders.execution.policy import REFUSED_STATUS

PREFIX = "sandbox refused"


def refused(returncode: int | None, log: bytes) -> str | None:
    """The outcome of a grade that refused for its sandbox, from its exit status and log; else None."""
    if returncode != REFUSED_STATUS:
        return None
    text = log.decode("utf-8", errors="replace")
    start = text.find("refusing to grade")
    return f"{PREFIX}: {text[start:].strip() if start >= 0 else text.strip()[-2000:]}"


def is_refusal(outcome: str) -> bool:
    return outcome.startswith(PREFIX + ":")


class BatchRefused(Exception):
    """A grade of the batch refused: nothing more is graded, nothing of it is counted."""
