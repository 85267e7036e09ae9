"""What the worker did in place of the student's own environment while their code ran (a stand-in
imported for a package, a download answered with the grader's data, torch.compile skipped, a
notebook's shell command ignored), each with the submission's line that asked for it. The trusted
side reads them (op_notes, op_train's reply) and words them as warnings; here they are plain data."""

import os
import sys
from pathlib import Path
from types import FrameType

MAX_NOTES = 100  # a loop that imports in every step notes one line, once; this bounds the rest

_notes: list[dict] = []
_scratch: list[Path] = []  # the submission's folder, once known


def set_scratch(scratch: Path) -> None:
    _scratch[:] = [scratch.resolve()]


def _inside(frame: FrameType) -> bool:
    if not _scratch:
        return False
    name = frame.f_code.co_filename
    try:  # "<frozen importlib._bootstrap>" would resolve inside the working directory
        return os.path.isabs(name) and Path(name).resolve().is_relative_to(_scratch[0])
    except (OSError, ValueError):
        return False


def student_line() -> dict:
    """The innermost line of the submission on the current stack: {"file", "line"}, or {}."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if _inside(frame):
            return {"file": Path(frame.f_code.co_filename).name, "line": frame.f_lineno}
        frame = frame.f_back
    return {}


def record(kind: str, subject: str, **detail: str | int) -> None:
    """Note that `kind` happened for `subject` at the submission's current line (once per line)."""
    note = {"kind": kind, "subject": subject, **student_line(), **detail}
    if note not in _notes and len(_notes) < MAX_NOTES:
        _notes.append(note)


def mark() -> int:
    return len(_notes)


def since(start: int = 0) -> list[dict]:
    """The notes recorded after `mark()` returned `start`."""
    return [dict(n) for n in _notes[start:]]
