"""Notebooks: a submitted notebook (Jupyter's percent-format `.py` export, nbconvert's `# In[ ]:`
script, or an `.ipynb`) as numbered code cells, and running them one by one in the worker.

Parsing happens here, on the trusted side, on text only; the cells' code runs in the worker. Cells
run in order in one namespace, as "Run all" does, but a failing cell costs only what it defines:
the cells after it still run (after a hang or a crash, in a fresh worker that first replays the
cells that had worked)."""

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graders.execution.client import StudentError, Worker, WorkerError

# `# %%`, `# %% [markdown]`, `#%% title`; `# %%time` is a commented-out cell magic, not a marker.
_PERCENT = re.compile(r"^#\s?%%(?:\s|$)(.*)$")
_NBCONVERT = re.compile(r"^# In\[[ 0-9]*\]:\s*$")
_NOT_CODE = re.compile(r"^\s*\[(markdown|md|raw)\]", re.IGNORECASE)
# Cell magics whose body is Python, run without the magic line; every other one (%%bash,
# %%writefile, %%html, ...) is not Python and its cell is skipped.
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}
MAX_CELLS = 500
MAX_REPLAYS = 3  # fresh workers after hangs or crashes; past that the rest is not run


class NotebookError(Exception):
    """The file is not a notebook that can be read; the message names it."""


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based, among the code cells, in order
    source: str  # shell and line magics replaced by `pass`
    first_line: int  # the cell's first line in the file (.py), or 1 (.ipynb: lines count within the cell)
    skipped: str | None = None  # why the cell is not run

    def where(self) -> str:
        return f"cell {self.number}" + (f" (line {self.first_line})" if self.first_line > 1 else "")

    def assigns(self) -> set[str]:
        """Top-level names this cell binds or changes (`x = ...`, `x[2] = ...`, `x += ...`)."""
        try:
            tree = ast.parse(self.source)
        except (SyntaxError, ValueError):
            return set()
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
                while isinstance(node, (ast.Subscript, ast.Attribute)):
                    node = node.value
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
        return names


def _without_magics(lines: list[str]) -> tuple[str, str | None]:
    """The cell's Python, and why it is skipped if it is no Python at all."""
    body = list(lines)
    first = next((i for i, line in enumerate(body) if line.strip()), None)
    if first is not None and body[first].lstrip().startswith("%%"):
        magic = body[first].strip()[2:].split(maxsplit=1)[0] if body[first].strip()[2:] else ""
        if magic not in _PYTHON_CELL_MAGICS:
            return "", f"a %%{magic} cell: not Python, so not run"
        body[first] = ""
    out = []
    for line in body:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        timed = re.match(r"%(time|timeit|prun)\s+(\S.*)$", stripped)
        if timed:  # `%time x = f()` runs `x = f()`
            out.append(indent + timed.group(2))
        elif stripped.startswith(("!", "%")):  # a shell command or another line magic: nothing to run offline
            out.append(indent + "pass")
        else:
            out.append(line)
    return "\n".join(out) + "\n", None


def _percent_cells(text: str) -> list[tuple[list[str], int, bool]]:
    """(lines, first line, is code) per cell of a percent-format or nbconvert script."""
    cells: list[tuple[list[str], int, bool]] = [([], 1, True)]
    for number, line in enumerate(text.splitlines(), start=1):
        marker = _PERCENT.match(line)
        if marker or _NBCONVERT.match(line):
            code = not (marker and _NOT_CODE.match(marker.group(1)))
            cells.append(([], number + 1, code))
        else:
            cells[-1][0].append(line)
    return [c for c in cells if any(line.strip() for line in c[0])]


def _ipynb_cells(text: str, name: str) -> list[tuple[list[str], int, bool]]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise NotebookError(f"{name} is not a Jupyter notebook (not valid JSON: {str(e)[:200]})") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise NotebookError(f"{name} is not a Jupyter notebook (no list of cells)")
    out = []
    for i, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise NotebookError(f"{name}: cell {i} is not a notebook cell")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"{name}: cell {i} has no text source")
        out.append((source.splitlines(), 1, cell["cell_type"] == "code"))
    return out


def read_cells(path: Path) -> list[Cell]:
    """The notebook's code cells, numbered from 1 in order."""
    text = path.read_text(encoding="utf-8")
    raw = _ipynb_cells(text, path.name) if path.suffix == ".ipynb" else _percent_cells(text)
    code = [(lines, first) for lines, first, is_code in raw if is_code]
    if len(code) > MAX_CELLS:
        raise NotebookError(f"{path.name} has {len(code)} code cells; at most {MAX_CELLS} are run")
    cells = []
    for number, (lines, first) in enumerate(code, start=1):
        source, skipped = _without_magics(lines)
        cells.append(Cell(number, source, first, skipped))
    return cells


@dataclass
class CellOutcome:
    cell: Cell
    status: str  # "ok", "skipped", "failed"
    message: str = ""


@dataclass
class NotebookRun:
    """What running the notebook gave: per cell, and per watched name the wire value of each
    cell that assigned it, in order (a name the notebook reuses has several)."""

    filename: str
    outcomes: list[CellOutcome] = field(default_factory=list)
    values: dict[str, list[tuple[Cell, dict]]] = field(default_factory=dict)
    problem: str | None = None  # the notebook could not be read or run at all

    def failures(self) -> list[CellOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def before(self, cell: Cell | None = None) -> str:
        """Why an answer may be missing: the failed cells (before `cell`, if given)."""
        failed = [o for o in self.failures() if cell is None or o.cell.number < cell.number]
        return "; ".join(f"{o.cell.where()} failed: {o.message}" for o in failed[:3])


def _error_text(e: Exception, cell: Cell, filename: str) -> str:
    if isinstance(e, StudentError):
        info = e.info
        line = f", line {info['line']}" if info.get("line") else ""
        code = f" ({info['code']})" if info.get("code") else ""
        return f"{info.get('type')}{line}{code}: {info.get('message', '')}"[:500]
    return str(e)[:500]


def run_notebook(worker: Worker, path: Path, watch: list[str], timeout: float) -> NotebookRun:
    """Run every code cell of `path` in `worker`, capturing the `watch` names each cell assigns."""
    run = NotebookRun(path.name)
    try:
        cells = read_cells(path)
    except (NotebookError, UnicodeDecodeError) as e:
        run.problem = str(e)
        return run
    runner = _CellRunner(worker, path, timeout, run)
    for cell in cells:
        runner.run_cell(cell, watch)
    runner.collect_missing(watch, after=len(cells))
    # A check that calls what the cells defined may meet a fresh worker: it runs them again first.
    worker.replay = [("cell", *runner.request(cell, [])) for cell in runner.good]
    return run


@dataclass
class _CellRunner:
    """The cells of one notebook, sent one at a time; the good ones replayed after a hang or crash."""

    worker: Worker
    path: Path
    timeout: float
    run: NotebookRun
    good: list[Cell] = field(default_factory=list)
    replays: int = 0

    def request(self, cell: Cell, capture: list[str]) -> tuple[str, dict]:
        """Where a cell's request runs (for messages) and its fields."""
        fields = dict(source=cell.source, filename=self.path.name, first_line=cell.first_line, capture=capture)
        return f"{cell.where()} of {self.path.name}", fields

    def send(self, cell: Cell, capture: list[str]) -> dict:
        where, fields = self.request(cell, capture)
        return self.worker.request("cell", where, self.timeout, keep_state=True, **fields)

    def run_cell(self, cell: Cell, watch: list[str]) -> None:
        refused = self._not_run(cell)
        if refused:
            self.run.outcomes.append(refused)
            return
        capture = sorted(set(watch) & cell.assigns())
        try:
            reply = self.send(cell, capture)
        except StudentError as e:
            self.run.outcomes.append(CellOutcome(cell, "failed", _error_text(e, cell, self.path.name)))
            return
        except WorkerError as e:
            self.run.outcomes.append(CellOutcome(cell, "failed", _error_text(e, cell, self.path.name)))
            self._replay()
            return
        self.good.append(cell)
        self.run.outcomes.append(CellOutcome(cell, "ok"))
        values = reply.get("values")
        for name in capture:
            if isinstance(values, dict) and isinstance(values.get(name), dict):
                self.run.values.setdefault(name, []).append((cell, values[name]))

    def _not_run(self, cell: Cell) -> CellOutcome | None:
        """Why `cell` is not sent at all: past the replays, skipped, or not valid Python."""
        if self.replays > MAX_REPLAYS:
            return CellOutcome(cell, "failed", "not run: too many cells hung or crashed the worker")
        if cell.skipped:
            return CellOutcome(cell, "skipped", cell.skipped)
        try:
            compile(cell.source, self.path.name, "exec")
        except (SyntaxError, ValueError) as e:
            line = getattr(e, "lineno", None)
            shown = (line + cell.first_line - 1) if line else None
            at = f", line {shown}" if shown else ""
            return CellOutcome(cell, "failed", f"SyntaxError{at}: {getattr(e, 'msg', e)}")
        return None

    def _replay(self) -> None:
        """A fresh worker, back in the state the good cells left."""
        self.replays += 1
        self.worker.begin_check()  # the client fails the rest of a check after a hang; a notebook goes on
        try:
            for earlier in self.good:
                self.send(earlier, [])
        except (StudentError, WorkerError):
            self.replays = MAX_REPLAYS + 1

    def collect_missing(self, watch: list[str], after: int) -> None:
        """Names bound some other way (a loop, globals()): their values as the notebook ends."""
        missing = [n for n in watch if n not in self.run.values]
        if not (missing and self.good and self.replays <= MAX_REPLAYS):
            return
        try:
            values = self.send(Cell(after + 1, "", 1), missing).get("values")
        except (StudentError, WorkerError):
            values = None
        for name in missing:
            if isinstance(values, dict) and isinstance(values.get(name), dict):
                self.run.values[name] = [(self.good[-1], values[name])]


def wire_value(run: NotebookRun, name: str, which: int = 0) -> tuple[Cell | None, Any]:
    """The `which`-th definition of `name` (0 the first, -1 the last), or (None, None)."""
    defs = run.values.get(name, [])
    if not defs:
        return None, None
    return defs[which]
