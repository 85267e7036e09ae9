"""Student files run as their authors ran them (graders/execution/worker/asrun.py): the settings the
worker reads for that, and the trusted side's words for what it took: a warning for each stand-in
the worker put in the student's environment's place, and a message for what stops a file anyway
(a download, a parser with required arguments, a GPU, a path on the student's own machine) that
names the line and the fix. Worker data is only read here: clipped, never executed."""

import json
import re
from pathlib import Path
from typing import Any

from graders.execution.client import StudentError, Worker, WorkerError
from graders.execution.worker.asrun import SETTINGS_FILE
from graders.spec import Spec

MAIN = '`if __name__ == "__main__":`'


def write_settings(folder: Path, spec: Spec) -> None:
    """Before the worker starts: what asrun.prepare reads from the submission's folder."""
    (folder / SETTINGS_FILE).write_text(json.dumps({"inert_packages": list(spec.inert_packages)}))


def _text(value: Any, cap: int = 200) -> str:
    return str(value)[:cap] if isinstance(value, (str, int)) and not isinstance(value, bool) else ""


def _where(note: dict) -> str:
    file, line = _text(note.get("file"), 100), note.get("line")
    if not file:
        return "your code"
    return f"{file}, line {line}" if isinstance(line, int) and not isinstance(line, bool) else file


_NOTE_WORDS = {
    "stand_in": "{subject} is left out of grading (trackers and notebook helpers need an account, the network or "
    "a notebook, which a grade has not): it was imported as an inert stand-in, its calls did nothing and nothing "
    "was logged or sent; the rest was graded as written",
    "one_process": "{subject} with worker processes: a grade loads batches in the training process itself "
    "(num_workers=0), the same batches in the same order",
    "plain_bars": "tqdm.notebook draws its bars as Jupyter widgets, which a grade has not: they were drawn as "
    "plain text (tqdm's own) instead, nothing else changed",
    "no_compile": "torch.compile was skipped: the model ran uncompiled (compiling it takes longer than the "
    "whole run, and gives the same results)",
    "notebook_command": "{subject} is a notebook's command (the file was exported from Jupyter): it did nothing here",
    "served": "{subject}({asked}) would download its data, and a grade has no network: it was given the "
    "grader's own training data instead (what train() finds in its data file), nothing else changed",
}


def note_warnings(notes: Any) -> list[str]:
    """The warnings for a worker's notes (notes.py), in order, each once."""
    found: list[str] = []
    for note in notes if isinstance(notes, list) else []:
        words = _NOTE_WORDS.get(_text(note.get("kind"))) if isinstance(note, dict) else None
        if words is None:
            continue
        text = f"{_where(note)}: " + words.format(
            subject=_text(note.get("subject")), asked=_text(note.get("asked"), 40)
        )
        if text not in found:
            found.append(text)
    return found


def import_notes(worker: Worker) -> list[str]:
    """The warnings for what the worker's imports of the submission needed (none if it cannot say)."""
    try:
        return note_warnings(worker.request("notes", "reading what the submission's imports needed").get("notes"))
    except (StudentError, WorkerError):
        return []


def _route(frames: list, called: str, package: str) -> str:
    """'line 95 calls get_chunked_tinystories, which at line 27 calls load_dataset (datasets)'."""
    steps = [f for f in frames if isinstance(f, list) and len(f) == 3][-6:]
    if not steps:
        return f"it calls {called or 'something'} ({package})"
    parts, file = [], _text(steps[0][0], 100)
    for i, (f, line, _) in enumerate(steps):
        callee = _text(steps[i + 1][2], 100) if i + 1 < len(steps) else f"{called or 'a function'} ({package})"
        where = f"line {_text(line)}" if _text(f, 100) == file else f"{_text(f, 100)} line {_text(line)}"
        parts.append(f"{where} calls {callee}" if i == 0 else f"which at {where} calls {callee}")
    return ", ".join(parts)


def network_message(info: dict, during: str, data_path: str | None = None) -> str | None:
    """The worker found a network call (offline.describe): what, where, and what to move where.
    `during`: "import" (of a file) or "train()"."""
    net = info.get("network")
    if not isinstance(net, dict):
        return None
    frames: list = net["frames"] if isinstance(net.get("frames"), list) else []
    route = _route(frames, _text(net.get("called")), _text(net.get("package"), 100))
    if during == "import":
        first = frames[0] if frames and isinstance(frames[0], list) and len(frames[0]) == 3 else ["", "?", ""]
        return (
            f"needs the network at import: {route}, and a grade has no network. The grader imports the file and "
            f"calls what it grades itself, so nothing may download when the file is imported: move line "
            f"{_text(first[1])} (and what uses its result) under {MAIN}"
        )
    data = f" ({data_path})" if data_path else ""
    return (
        f"train() needs the network: {route}, and a grade has no network. train() is to train on the data file the "
        f"grader gives it{data}, downloading nothing: move that call out of train(), e.g. under {MAIN}"
    )


def argparse_message(info: dict, file: str) -> str | None:
    """A parser that exited at import (its arguments are required, or a default does not parse)."""
    said = info.get("argparse")
    if not isinstance(said, str):
        return None
    return (
        f"argparse stopped it at import ({_text(said, 300) or 'sys.exit(2)'}). The grader runs {file} as "
        f"`python {file}`, with no arguments: give every argument a default, or parse the command line only "
        f"under {MAIN}"
    )


_ABSOLUTE = re.compile(r"'(/[^']*)'")


def with_hint(text: str, info: dict) -> str:
    """`text` (a failure's message) followed by hint(info), if there is one."""
    more = hint(info)
    if not more:
        return text
    return f"{text.rstrip()}{'' if text.rstrip().endswith('.') else '.'}{more}"


def hint(info: dict) -> str:
    """A sentence on a failure that comes from the grading machine not being the student's: no
    GPU, a path or folder that exists only on the student's computer (or Colab's Drive)."""
    message, kind = _text(info.get("message"), 2000), _text(info.get("type"), 100)
    if "CUDA" in message or "NVIDIA" in message:
        return (
            " A grade runs on a CPU: pick the device as the handout does "
            '(`torch.device("cuda" if torch.cuda.is_available() else "cpu")`)'
        )
    if "headless" in message:
        return (
            " A grade has no screen: matplotlib draws into files there (its Agg backend), and plt.show() does "
            'nothing. Leave the backend to matplotlib (no matplotlib.use) or use "Agg"'
        )
    folder = kind == "RuntimeError" and "directory" in message and "does not exist" in message  # torch.save's
    if folder or kind in ("FileNotFoundError", "PermissionError", "NotADirectoryError", "OSError", "IsADirectoryError"):
        outside = _ABSOLUTE.search(message)
        place = (
            f" {outside.group(1)!r} is a path on your own machine (or Colab's Drive), which a grade does not have."
            if outside
            else ""
        )
        return (
            f"{place} Your code runs in a fresh folder that holds only your files and the grader's data: use paths "
            "relative to it, and make a folder before writing into it (os.makedirs(folder, exist_ok=True))"
        )
    return ""
