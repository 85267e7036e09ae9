"""Fail closed: student code runs only under the sandbox level the TA asked for.

A level names the layers (graders/execution/sandbox.py) that must be in force before any student
code runs; a machine that cannot give them refuses to grade, naming what is missing and how to get
it, unless the TA asks for a lower level (`--sandbox`, or the spec's `limits.sandbox`). A grade
below `full` says so everywhere its results are shown. A layer this kernel or CPU cannot give at
all (Landlock before Linux 5.13, seccomp off x86_64 and aarch64) is no refusal, but it is shown
missing too.
"""

import os
from dataclasses import dataclass
from typing import Literal

from graders.execution.sandbox import Capabilities, capabilities

Level = Literal["full", "container", "minimal"]
# Each level's layers; "uid" is only asked of a grader that runs as root (anyone else's code runs
# without privileges anyway).
REQUIRED: dict[str, tuple[str, ...]] = {
    "full": ("bwrap", "uid", "landlock", "seccomp"),
    # The namespaces are left to the container the grade runs in (Gradescope, --backend docker).
    "container": ("uid", "landlock", "seccomp"),
    "minimal": (),
}
EXPLAINED = {
    "full": "every layer",
    "container": "no bwrap: the container this grade runs in isolates it (Gradescope, grade batch --backend docker)",
    "minimal": "whatever this machine gives, even student code as root: only on a machine you trust with this code",
}
INSTALL_BWRAP = "sudo apt-get install -y bubblewrap"
REFUSED_STATUS = 3  # the exit status of a grade that refused to run: no results, nothing graded


@dataclass(frozen=True)
class Missing:
    layer: str
    why: str
    fix: str | None  # what gives it here; None where this kernel or CPU cannot give it at all

    def __str__(self) -> str:
        return f"{self.layer}: {self.why}"


@dataclass(frozen=True)
class Verdict:
    level: str
    missing: tuple[Missing, ...]  # every layer of `full` not in force here
    refused: tuple[Missing, ...]  # of those, the ones the level needs and this machine could give

    @property
    def ok(self) -> bool:
        return not self.refused

    @property
    def weaker(self) -> bool:
        """Graded with fewer layers than `full`: every view of the results says so."""
        return bool(self.missing)


class SandboxRefused(Exception):
    """Grading refused before anything ran: the message names what is missing and the fix."""


def assess(level: str, caps: Capabilities | None = None, root: bool | None = None) -> Verdict:
    caps = capabilities() if caps is None else caps
    root = os.geteuid() == 0 if root is None else root
    missing = tuple(_missing(caps, root))
    refused = tuple(m for m in missing if m.layer in REQUIRED[level] and m.fix is not None)
    return Verdict(level, missing, refused)


def require(level: str) -> Verdict:
    """The verdict for `level` here, or SandboxRefused."""
    verdict = assess(level)
    if not verdict.ok:
        raise SandboxRefused(refusal(verdict))
    return verdict


def _missing(caps: Capabilities, root: bool) -> list[Missing]:
    found = []
    if caps.bwrap is None:
        found.append(_bwrap_missing(caps))
    if root and not caps.uid:
        why = caps.why.get("uid", "no sandbox uid")
        fix = _forced(why) or (
            f"install bubblewrap ({INSTALL_BWRAP}): it mounts this Python readable for the sandbox uid; "
            "or grade from a Python every uid can read (a venv outside /root)"
        )
        found.append(Missing("uid", f"student code would run as root (uid 0, its capabilities dropped): {why}", fix))
    if caps.landlock_abi < 1:
        why = caps.why.get("landlock", "not in this kernel")
        found.append(Missing("landlock", why, _forced(why)))
    if not caps.seccomp:
        why = caps.why.get("seccomp", "no seccomp filter for this CPU")
        found.append(Missing("seccomp", why, _forced(why)))
    return found


def _forced(why: str) -> str | None:
    """The fix of a layer left out by GRADER_SANDBOX (a test's or benchmark's setting), else None."""
    return "unset GRADER_SANDBOX" if why.startswith("GRADER_SANDBOX") else None


def _bwrap_missing(caps: Capabilities) -> Missing:
    why = caps.why.get("bwrap", "not installed")
    if _forced(why):
        return Missing("bwrap", why, _forced(why))
    if why.startswith("not installed"):
        return Missing(
            "bwrap", "bubblewrap is not installed", f"{INSTALL_BWRAP} (or, as root, scripts/system-packages)"
        )
    return Missing(
        "bwrap",
        why,
        "grade where bwrap can make namespaces: inside an unprivileged container use --sandbox container; "
        "elsewhere allow user namespaces (sysctl kernel.unprivileged_userns_clone=1) or grade as root",
    )


def refusal_here(level: str) -> str | None:
    """On a machine that grades for another (a Dask worker): the refusal for `level`, or None."""
    verdict = assess(level)
    return None if verdict.ok else refusal(verdict)


def refusal(verdict: Verdict) -> str:
    lines = [f"refusing to grade: this machine's sandbox lacks what --sandbox {verdict.level} requires."]
    for m in verdict.refused:
        lines += [f"  missing {m.layer}: {m.why}", f"    fix: {m.fix}"]
    lines.append("Nothing was graded.")
    lower = [lv for lv in REQUIRED if lv != verdict.level and assess(lv).ok and _below(lv, verdict.level)]
    if lower:
        lines.append(
            f"To grade anyway with these layers missing: --sandbox {lower[0]} ({EXPLAINED[lower[0]]}); "
            "every report then says which layers were missing."
        )
    return "\n".join(lines)


def _below(a: str, b: str) -> bool:
    order = list(REQUIRED)
    return order.index(a) > order.index(b)


def banner(verdict: Verdict) -> str:
    """What a command prints before grading under fewer layers than `full` (the TA asked for it)."""
    missing = "; ".join(str(m) for m in verdict.missing)
    return (
        f"WARNING: student code will run in a weaker sandbox: level {verdict.level} ({EXPLAINED[verdict.level]}). "
        f"Missing: {missing}. Every report says so."
    )
