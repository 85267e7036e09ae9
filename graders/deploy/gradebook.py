"""A batch's grades.csv: one row per student, the automatic points, the by-hand marks entered
(`grade hand`), the bonus and the total, then each item's points.

An item graded by hand and not graded yet is an empty cell, never 0; `ungraded` counts them, so
a row's total is final when it is 0. total = automatic + by_hand + bonus, of what is entered."""

import csv
import os
import tempfile
from pathlib import Path

from graders.handgrading.marks import Mark
from graders.scoring.results import Results
from graders.spec import Spec

COLUMNS = ["student", "total", "automatic", "by_hand", "bonus", "ungraded"]


def csv_cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text  # no formulas in spreadsheets


def _number(x: float) -> str:
    return f"{round(x, 4):g}"


def _sum(values: list[float | None]) -> str:
    """Empty when nothing of it is known yet (every part by hand, none graded), else the sum."""
    known = [v for v in values if v is not None]
    return _number(sum(known)) if known else ""


def gradebook_row(spec: Spec, results: Results | None, marks: dict[str, Mark]) -> list[str]:
    """The columns after `student`: total, automatic, by_hand, bonus, ungraded, then each item's."""
    auto = {i.id: i.score for i in results.items if i.status != "manual"} if results else {}
    cells: dict[str, float | None] = {}
    by_hand: list[float | None] = []
    bonus: list[float | None] = []
    for item in spec.items:
        value = (marks[item.id].points if item.id in marks else None) if item.manual else auto.get(item.id)
        cells[item.id] = value
        if item.bonus:
            bonus.append(value)
        elif item.manual:
            by_hand.append(value)
    automatic = results.score if results else 0.0
    added = sum(v for v in by_hand + bonus if v is not None)  # the marks entered, and any automatic bonus
    ungraded = sum(1 for i in spec.items if i.manual and cells[i.id] is None)
    items = ["" if cells[i.id] is None else _number(cells[i.id] or 0.0) for i in spec.items]
    return [_number(automatic + added), _number(automatic), _sum(by_hand), _sum(bonus), str(ungraded), *items]


def write_gradebook(
    path: Path,
    spec: Spec,
    students: dict[str, Path] | list[str],
    graded: dict[str, Results],
    marks: dict[str, dict[str, Mark]] | None = None,
) -> None:
    """grades.csv, written whole or not at all (a spreadsheet open on it never reads half a file):
    one row per student (automatic 0 where there is no readable result)."""
    ids = [i.id for i in spec.items]
    marks = marks or {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, delete=False, suffix=".tmp", newline="", encoding="utf-8"
    ) as fh:
        writer = csv.writer(fh)
        writer.writerow([*COLUMNS, *ids])
        for student in students:
            writer.writerow([csv_cell(student), *gradebook_row(spec, graded.get(student), marks.get(student, {}))])
    os.replace(fh.name, path)
