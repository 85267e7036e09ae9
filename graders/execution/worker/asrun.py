"""Student code runs as its author ran it: `python train.py` in the submission's folder, offline.

Before each import of a submission's module and each train() run: `sys.argv` is `[<file>.py]` (a
parser at module level sees no arguments and takes its defaults), the working directory is the
submission's, `input()` says at once that a grade has no keyboard. Once per worker, before any
student code: the spec's inert packages import as stand-ins (inert.py), internet use raises
NoNetwork (offline.py), `get_ipython()` exists for a script exported from Jupyter, and
torch.compile hands back what it is given (compiling the tiny model takes far longer than training
it, and gives the same results), and a DataLoader loads its batches in the training process.

The trusted side writes the spec's settings for this into the submission's folder (SETTINGS_FILE:
a dotted name, which no submitted file can have; read-only inside the sandbox) before the worker
starts; the worker reads it once."""

import builtins
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from . import inert, notes, offline

SETTINGS_FILE = ".grading-settings.json"
_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ready: list[Path] = []


def settings(scratch: Path) -> dict:
    """The trusted side's settings, checked: only well-formed package names are kept."""
    try:
        data = json.loads((scratch / SETTINGS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    listed = data.get("inert_packages") if isinstance(data, dict) else None
    names = [p for p in listed if isinstance(p, str) and _PACKAGE.match(p)] if isinstance(listed, list) else []
    return {"inert_packages": names[:200]}


def install(scratch: Path) -> None:
    """Once per worker, before any student code (main.py: before warm.arm, which keeps the zygote's
    matplotlib only while sys.meta_path is as it was armed)."""
    if _ready:
        return
    _ready.append(scratch)
    notes.set_scratch(scratch)
    inert.install(settings(scratch).get("inert_packages", ()))
    offline.guard()
    builtins.input = _no_keyboard
    builtins.get_ipython = _get_ipython  # type: ignore[attr-defined]
    _skip_compile()
    _one_process_loading()


def prepare(scratch: Path, module: str) -> None:
    """Before student code of `module` runs: as `python <module>.py` would see the process."""
    install(scratch)
    sys.argv = [f"{module}.py"]
    os.chdir(scratch)


def _no_keyboard(prompt: Any = "") -> str:
    shown = f"{str(prompt)[:100]!r}" if prompt else ""
    raise EOFError(
        f"input({shown}) was called, but a grade runs without a keyboard (stdin is empty): give the value a "
        'default, or ask for it only under `if __name__ == "__main__":`'
    )


class _NotebookShell:
    """What `get_ipython()` gives a script exported from Jupyter (`get_ipython().system("pip install
    wandb")`, `.run_line_magic("matplotlib", "inline")`): every command does nothing, noted."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)

        def command(*args: Any, **kwargs: Any) -> None:
            notes.record("notebook_command", f"get_ipython().{name}({', '.join(map(repr, args))[:120]})")

        return command


def _get_ipython() -> _NotebookShell:
    return _NotebookShell()


def _skip_compile() -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return

    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        notes.record("no_compile", "torch.compile")
        if model is None:  # @torch.compile(mode=...), or torch.compile(mode=...)(model)
            return lambda fn: fn
        return model

    setattr(torch, "compile", compile)


def _one_process_loading() -> None:
    """A DataLoader's worker processes need shared memory a sandbox does not give: batches are
    loaded in the training process instead (num_workers=0), the same batches in the same order."""
    data = sys.modules.get("torch.utils.data")
    if data is None:
        return
    real_init = data.DataLoader.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("num_workers"), int) and kwargs["num_workers"] > 0:
            notes.record("one_process", "DataLoader")
            kwargs.update(num_workers=0, persistent_workers=False, prefetch_factor=None, multiprocessing_context=None)
        real_init(self, *args, **kwargs)

    data.DataLoader.__init__ = __init__
