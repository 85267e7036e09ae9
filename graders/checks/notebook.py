"""Notebooks: a submitted notebook (Jupyter's percent-format `.py` export, nbconvert's `# In[ ]:`
script, or an `.ipynb`) as numbered code cells, and running them one by one in the worker.

Parsing happens here, on the trusted side, on text only; the cells' code runs in the worker. Cells
run in order in one namespace, as "Run all" does, but a failing cell costs only what it defines:
the cells after it still run (after a hang or a crash, in a fresh worker that first replays the
cells that had run). After each cell the worker says which watched names it changed, by rebinding
or in place, and their values then; graders/checks/notebook_answers.py decides which cell holds
each answer."""

import ast
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from graders.execution.client import StudentError, Worker, WorkerError

# `# %%`, `# %% [markdown]`, `#%% title`; `# %%time` is a commented-out cell magic, not a marker.
_PERCENT = re.compile(r"^#\s?%%(?:\s|$)(.*)$")
_NBCONVERT = re.compile(r"^# In\[ *([0-9]*) *\]:\s*$")
_NOT_CODE = re.compile(r"^\s*\[(markdown|md|raw)\]", re.IGNORECASE)
# Cell magics whose body is Python, run without the magic line; every other one (%%bash,
# %%writefile, %%html, ...) is not Python and its cell is skipped.
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}
MAX_CELLS = 500
MAX_REPLAYS = 3  # fresh workers after hangs or crashes; past that the rest is not run


class NotebookError(Exception):
    """The file is not a notebook that can be read; the message names it."""


# Methods that change their object in place: torch's `x.add_()`, `x.index_put_()`, and a list's own.
_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "setdefault"}


def _base_name(node: ast.AST) -> str | None:
    """`m_key` of `m_key[2].data`, `m_key.T[0]`, `m_key.fill_`."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Binds(ast.NodeVisitor):
    """Names a statement binds or changes at the notebook's top level (not inside a def or a class)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.names.add(node.name)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}

    visit_ImportFrom = visit_Import

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.names.add(node.id)

    def visit_Subscript(self, node: ast.Subscript | ast.Attribute) -> None:
        base = _base_name(node) if isinstance(node.ctx, (ast.Store, ast.Del)) else None
        if base:
            self.names.add(base)
        self.generic_visit(node)

    visit_Attribute = visit_Subscript

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and (
            (func.attr.endswith("_") and not func.attr.startswith("__")) or func.attr in _MUTATORS
        ):
            base = _base_name(func.value)
            if base:
                self.names.add(base)
        self.generic_visit(node)


def bound_names(nodes: list[ast.stmt]) -> set[str]:
    """What these statements bind or change, as far as their text says: assignment (`x = `, `x[2] = `,
    `x += `), def, class, import, and in-place methods (`x.fill_(0)`, `x.append(1)`)."""
    visitor = _Binds()
    for node in nodes:
        visitor.visit(node)
    return visitor.names


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based, among the code cells, in order
    source: str  # shell and line magics replaced by `pass`
    first_line: int  # the cell's first line in the file (.py), or 1 (.ipynb: lines count within the cell)
    skipped: str | None = None  # why the cell is not run
    count: int | None = None  # its execution count as saved (`In [5]`), if the file has one

    def where(self) -> str:
        return f"cell {self.number}" + (f" (line {self.first_line})" if self.first_line > 1 else "")

    def assigns(self) -> set[str]:
        """Top-level names this cell's text binds or changes (`bound_names`)."""
        return set(_assigned(self.source))


@functools.lru_cache(maxsize=4096)
def _assigned(source: str) -> frozenset[str]:
    try:
        return frozenset(bound_names(ast.parse(source).body))
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()


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


_Raw = tuple[list[str], int, bool, int | None]  # lines, first line, is code, execution count


def _percent_cells(text: str) -> list[_Raw]:
    """(lines, first line, is code, count) per cell of a percent-format or nbconvert script."""
    cells: list[_Raw] = [([], 1, True, None)]
    for number, line in enumerate(text.splitlines(), start=1):
        marker = _PERCENT.match(line)
        converted = _NBCONVERT.match(line)
        if marker or converted:
            code = not (marker and _NOT_CODE.match(marker.group(1)))
            count = converted.group(1) if converted else None
            cells.append(([], number + 1, code, int(count) if count else None))
        else:
            cells[-1][0].append(line)
    return [c for c in cells if any(line.strip() for line in c[0])]


def _ipynb_cells(text: str, name: str) -> list[_Raw]:
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
        count = cell.get("execution_count")
        count = count if isinstance(count, int) and not isinstance(count, bool) else None
        out.append((source.splitlines(), 1, cell["cell_type"] == "code", count))
    return out


def read_cells(path: Path) -> list[Cell]:
    """The notebook's code cells, numbered from 1 in order."""
    text = path.read_text(encoding="utf-8")
    raw = _ipynb_cells(text, path.name) if path.suffix == ".ipynb" else _percent_cells(text)
    code = [(lines, first, count) for lines, first, is_code, count in raw if is_code]
    if len(code) > MAX_CELLS:
        raise NotebookError(f"{path.name} has {len(code)} code cells; at most {MAX_CELLS} are run")
    cells = []
    for number, (lines, first, count) in enumerate(code, start=1):
        source, skipped = _without_magics(lines)
        cells.append(Cell(number, source, first, skipped, count))
    return cells


@dataclass
class CellOutcome:
    cell: Cell
    status: str  # "ok", "skipped", "failed" (raised, or did not run to the end)
    message: str = ""
    ran: bool = False  # the worker ran it and answered: what it left is known, even if it raised
    values: dict[str, dict] = field(default_factory=dict)  # watched names it changed -> wire value at its end

    def sets(self, name: str) -> bool:
        """The cell changed `name` as it ran, or its text says it would (a cell that never ran)."""
        return name in self.values or name in self.cell.assigns()


@dataclass
class NotebookRun:
    """What running the notebook gave: per cell, its outcome and the watched names it changed;
    per watched name, the wire value of each cell that changed it, in order."""

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


def _error_text(info: dict) -> str:
    line = f", line {info['line']}" if info.get("line") else ""
    code = f" ({info['code']})" if info.get("code") else ""
    return f"{info.get('type')}{line}{code}: {info.get('message', '')}"[:500]


def run_notebook(worker: Worker, path: Path, watch: list[str], timeout: float) -> NotebookRun:
    """Run every code cell of `path` in `worker`, recording the `watch` names each cell changes."""
    run = NotebookRun(path.name)
    try:
        cells = read_cells(path)
    except (NotebookError, UnicodeDecodeError) as e:
        run.problem = str(e)
        return run
    runner = _CellRunner(worker, path, timeout, run, sorted(set(watch)))
    for cell in cells:
        runner.run_cell(cell)
    _explain_name_errors(run)
    # A check that calls what the cells defined may meet a fresh worker: it runs them again first.
    worker.replay = [("cell", *runner.request(cell)) for cell in runner.good]
    return run


@dataclass
class _CellRunner:
    """The cells of one notebook, sent one at a time; the ones that ran replayed after a hang or crash."""

    worker: Worker
    path: Path
    timeout: float
    run: NotebookRun
    watch: list[str]
    good: list[Cell] = field(default_factory=list)
    replays: int = 0

    def request(self, cell: Cell) -> tuple[str, dict]:
        """Where a cell's request runs (for messages) and its fields."""
        fields = dict(
            source=cell.source,
            filename=self.path.name,
            first_line=cell.first_line,
            capture=self.watch,
            cell=cell.number,
        )
        return f"{cell.where()} of {self.path.name}", fields

    def send(self, cell: Cell) -> dict:
        where, fields = self.request(cell)
        return self.worker.request("cell", where, self.timeout, keep_state=True, **fields)

    def run_cell(self, cell: Cell) -> None:
        refused = self._not_run(cell)
        if refused:
            self.run.outcomes.append(refused)
            return
        try:
            reply = self.send(cell)
        except StudentError as e:  # not the cell's code: the worker refused the request itself
            self.run.outcomes.append(CellOutcome(cell, "failed", _error_text(e.info)))
            return
        except WorkerError as e:
            self.run.outcomes.append(CellOutcome(cell, "failed", str(e)[:500]))
            self._replay()
            return
        self.good.append(cell)
        values = reply.get("values")
        values = (
            {n: v for n, v in values.items() if n in self.watch and isinstance(v, dict)}
            if isinstance(values, dict)
            else {}
        )
        error = reply.get("error")
        outcome = CellOutcome(cell, "ok", ran=True, values=values)
        if isinstance(error, dict):
            outcome.status, outcome.message = "failed", _error_text(error)
        self.run.outcomes.append(outcome)
        for name, wire in values.items():
            self.run.values.setdefault(name, []).append((cell, wire))

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
        """A fresh worker, back in the state the cells that ran left."""
        self.replays += 1
        self.worker.begin_check()  # the client fails the rest of a check after a hang; a notebook goes on
        try:
            for earlier in self.good:
                self.send(earlier)
        except (StudentError, WorkerError):
            self.replays = MAX_REPLAYS + 1


_UNDEFINED = re.compile(r"^NameError.*name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")


def _explain_name_errors(run: NotebookRun) -> None:
    """A cell that used a name a later cell sets: say so, and whether the saved execution counts
    show the notebook was run in another order than top to bottom."""
    for i, outcome in enumerate(run.outcomes):
        match = _UNDEFINED.match(outcome.message) if outcome.status == "failed" else None
        later = next((o for o in run.outcomes[i + 1 :] if match and o.sets(match.group(1))), None)
        if match is None or later is None:
            continue
        note = f"{match.group(1)} is set in {later.cell.where()}, below it"
        ran, here = later.cell.count, outcome.cell.count
        if ran is not None and here is not None and ran < here:
            note += f"; the saved notebook ran that cell first, In [{ran}] before In [{here}]"
        outcome.message += f" ({note}; the grader runs the cells top to bottom, as Restart & Run All does)"
