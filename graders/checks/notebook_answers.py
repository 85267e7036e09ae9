"""Which cell of a submitted notebook holds each answer, and why an answer is not there. Trusted
side, on the cells' text and on what running them recorded; docs/notebook-answers.md says it for
students and TAs.

The template says what the answers are: each template cell that sets a watched name is the cell
of one answer of that name (A2S1's two m_key cells are two answers, in order). The submission's
cells are matched to the template's, in order, by what they kept of it (a TODO comment, a `def`
line, a given cell unchanged); a cell the student added belongs with the matched cell above it.
An answer is the value its name holds at the end of the last cell of that stretch that sets it,
however the cell changed it; a stretch whose template cell matched nothing is shared, in order,
by the answers that would lie in it."""

import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from graders.checks.notebook import Cell, CellOutcome, NotebookRun, bound_names, read_cells, run_notebook
from graders.paths import REPO

if TYPE_CHECKING:
    from graders.checks.session import GradeContext

_ORDINALS = ("first", "second", "third", "fourth", "fifth")
_EXACT = 1000  # a cell the student left as the template has it outweighs any number of shared lines
_MIN_LINE = 8  # shorter lines (`pass`, `x = 1`) say nothing about which cell this is


@dataclass(frozen=True)
class Slot:
    """One answer as the template has it: the `ordinal`-th of the `of` template cells that set `name`."""

    name: str
    ordinal: int
    of: int
    index: int  # of its cell among the template's code cells; -1 without a template
    cell: Cell | None
    given: bool = False  # the template's code for it is the reference's: no placeholder

    def label(self) -> str:
        """`query121`; `the second m_key` for a name the template sets in several cells."""
        if self.of == 1:
            return self.name
        nth = _ORDINALS[self.ordinal] if self.ordinal < len(_ORDINALS) else f"{self.ordinal + 1}th"
        return f"the {nth} {self.name}"


@dataclass(frozen=True)
class Answer:
    slot: Slot
    cell: Cell | None  # the submission's cell whose end holds the answer
    wire: dict | None  # the value then, as the worker sent it
    missing: str | None = None  # why it is not answered, naming the cell
    note: str = ""  # about the cell, e.g. that it raised after setting the answer

    def where(self, filename: str) -> str:
        """The answer's cell, for messages."""
        if self.cell is None:
            return filename
        return f"{filename} {self.cell.where()}" + (f", which {self.note}" if self.note else "")


def template_slots(template: list[Cell] | None, watch: list[str], reference: list[Cell] | None = None) -> list[Slot]:
    """The answers: each template cell that sets a watched name (one each, without a template).
    One whose statements the reference has too is given code, never a placeholder; without a
    reference, one whose cell has no TODO."""
    if template is None:
        return [Slot(name, 0, 1, -1, None) for name in watch]
    solved = {d for c in reference for d in _defining_all(c)} if reference is not None else None
    slots = []
    for name in watch:
        cells = [c for c in template if name in c.assigns()]
        for k, cell in enumerate(cells):
            own = set(_defining(cell, name) or ())
            given = own <= solved if solved is not None else "TODO" not in cell.source
            slots.append(Slot(name, k, len(cells), template.index(cell), cell, bool(own) and given))
    return slots


def _lines(source: str) -> list[str]:
    return [" ".join(line.split()) for line in source.splitlines() if line.strip()]


def _scores(template: list[Cell], cells: list[Cell]) -> list[list[int]]:
    """How much of template cell i cell j kept: _EXACT if all of it, else its lines no other
    template cell has."""
    kept = [{line for line in _lines(t.source) if len(line) >= _MIN_LINE} for t in template]
    seen = Counter(line for lines in kept for line in lines)
    distinct = [{line for line in lines if seen[line] == 1} for lines in kept]
    texts = [_lines(c.source) for c in cells]
    sets = [set(text) for text in texts]
    scores = []
    for t, own in zip(template, distinct, strict=True):
        whole = _lines(t.source)
        row = [_EXACT if text == whole and text else len(own & lines) for text, lines in zip(texts, sets, strict=True)]
        scores.append(row)
    return scores


def align(template: list[Cell], cells: list[Cell]) -> dict[int, int]:
    """Submission cell position -> template cell position: the best match that keeps both orders,
    then template cells left over matched to cells left over (a cell moved up or down)."""
    score = _scores(template, cells)
    m, n = len(template), len(cells)
    best = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(m):
        for j in range(n):
            paired = best[i][j] + score[i][j] if score[i][j] else 0
            best[i + 1][j + 1] = max(best[i][j + 1], best[i + 1][j], paired)
    pairs: dict[int, int] = {}
    i, j = m, n
    while i and j:
        if score[i - 1][j - 1] and best[i][j] == best[i - 1][j - 1] + score[i - 1][j - 1]:
            pairs[j - 1] = i - 1
            i, j = i - 1, j - 1
        elif best[i][j] == best[i - 1][j]:
            i -= 1
        else:
            j -= 1
    for i in sorted(set(range(m)) - set(pairs.values())):
        free = [j for j in range(n) if j not in pairs and score[i][j]]
        if free:
            pairs[max(free, key=lambda j: (score[i][j], -j))] = i
    return pairs


def resolve(slots: list[Slot], outcomes: list[CellOutcome], pairs: dict[int, int]) -> dict[tuple[str, int], Answer]:
    """Every slot's answer (see the module's docstring)."""
    section: list[int | None] = []
    for j in range(len(outcomes)):
        section.append(pairs[j] if j in pairs else (section[-1] if section else None))
    anchors = {t: j for j, t in pairs.items()}
    answers = {}
    for name in dict.fromkeys(s.name for s in slots):
        stretches: dict[int | None, list[Slot]] = {}
        for slot in (s for s in slots if s.name == name):
            key = slot.index if slot.index in anchors else max((t for t in anchors if t < slot.index), default=None)
            stretches.setdefault(key, []).append(slot)
        for key, sharing in stretches.items():
            setting = [j for j, o in enumerate(outcomes) if section[j] == key and o.sets(name)]
            for k, slot in enumerate(sharing):
                mine = setting[k:] if k == len(sharing) - 1 else setting[k : k + 1]
                answers[(name, slot.ordinal)] = _answer(slot, outcomes, mine, anchors.get(slot.index))
    return answers


def _answer(slot: Slot, outcomes: list[CellOutcome], setting: list[int], anchor: int | None) -> Answer:
    """The answer from the cells of its stretch that set its name (`setting`): the last one's end."""
    if not setting:
        return Answer(slot, None, None, _unset(slot, outcomes[anchor] if anchor is not None else None))
    last = outcomes[setting[-1]]
    where = last.cell.where()
    if not last.ran:
        return Answer(slot, last.cell, None, f"{where} did not run: {last.message}")
    if _placeholder(last.cell, slot):
        return Answer(slot, last.cell, None, f"{where} is still the template's placeholder")
    changed = [outcomes[j] for j in setting if slot.name in outcomes[j].values]
    if changed and changed[-1] is last:
        note = f"raised after setting it: {last.message}" if last.status == "failed" else ""
        return Answer(slot, last.cell, last.values[slot.name], note=note)
    if last.status == "failed":
        return Answer(slot, last.cell, None, f"{where} failed before it set {slot.name}: {last.message}")
    if changed:  # the last cell set it to what it already was: the answer is the cell before's
        return Answer(slot, changed[-1].cell, changed[-1].values[slot.name])
    return Answer(slot, last.cell, None, f"{where} leaves {slot.name} as the cells before it left it")


def _unset(slot: Slot, anchor: CellOutcome | None) -> str:
    """Why no cell sets the answer: its cell (the one matched to the template's) or its absence."""
    if anchor is not None:
        where = f"its cell, {anchor.cell.where()},"
        if anchor.status == "skipped" or not anchor.ran:
            return f"{where} did not run: {anchor.message}"
        if anchor.status == "failed":
            return f"{where} failed before it set {slot.name}: {anchor.message}"
        return f"{where} does not set {slot.name}"
    if slot.cell is None:
        return f"no cell sets {slot.name}"
    lines = _lines(slot.cell.source)
    first = next((line for line in lines if "TODO" in line), lines[0])
    return f"no cell sets {slot.name} where the template has its cell ({first[:100]!r}): was that cell deleted?"


def _defining(cell: Cell, name: str) -> list[str] | None:
    """The cell's top-level statements that set `name`, as syntax trees (comments and layout aside)."""
    try:
        body = ast.parse(cell.source).body
    except (SyntaxError, ValueError, RecursionError):
        return None
    return [ast.dump(node) for node in body if name in bound_names([node])]


def _defining_all(cell: Cell) -> list[str]:
    try:
        return [ast.dump(node) for node in ast.parse(cell.source).body]
    except (SyntaxError, ValueError, RecursionError):
        return []


def _placeholder(cell: Cell, slot: Slot) -> bool:
    """The cell sets the answer with the template's own statements (`m_key = None`, a def whose
    body still raises NotImplementedError), whatever else it does."""
    if slot.cell is None or slot.given:
        return False
    own, given = _defining(cell, slot.name), _defining(slot.cell, slot.name)
    return bool(own) and own == given


def _cells(path: Path | None) -> list[Cell] | None:
    return read_cells(path) if path is not None and path.is_file() else None


def answers_of(
    run: NotebookRun, template: Path | None, watch: list[str], reference: Path | None = None
) -> dict[tuple[str, int], Answer]:
    """Every answer of the notebook `run` ran, by (name, ordinal)."""
    template_cells = _cells(template)
    slots = template_slots(template_cells, watch, _cells(reference))
    pairs = align(template_cells, [o.cell for o in run.outcomes]) if template_cells else {}
    return resolve(slots, run.outcomes, pairs)


@dataclass
class Notebook:
    """A submitted notebook, run once per grade, and its answers."""

    run: NotebookRun
    answers: dict[tuple[str, int], Answer]

    def answer(self, name: str, ordinal: int = 0) -> Answer:
        return self.answers[(name, ordinal)]


def template_of(grade: "GradeContext", notebook: str) -> tuple[Path, Path | None]:
    """The notebook students were given (`assignment/NAME/template/`, under the required file's
    name) and the staff's (in the spec's reference_dir)."""
    reference = REPO / grade.spec.reference_dir / notebook if grade.spec.reference_dir else None
    return REPO / "assignment" / grade.spec.assignment / "template" / notebook, reference


def graded_notebook(grade: "GradeContext", notebook: str, watch: list[str]) -> Notebook:
    """The submission's `notebook` (a required file), run in the grade's worker once for all the
    checks, with the answers its template defines; a cell that failed is said in the warnings."""
    key = f"notebook {notebook}"
    if key not in grade.memo:
        path = grade.intake.files[notebook]
        run = run_notebook(grade.worker, path, watch, grade.spec.limits.call_timeout_s)
        template, reference = template_of(grade, notebook)
        grade.memo[key] = Notebook(run, {} if run.problem else answers_of(run, template, watch, reference))
        failed = run.failures()
        if failed:
            grade.extra_warnings.append(
                f"{run.filename}: {len(failed)} cell{'s' if len(failed) > 1 else ''} failed when run top to bottom "
                f"(the cells after each still ran): {run.before()}"
            )
    return grade.memo[key]
