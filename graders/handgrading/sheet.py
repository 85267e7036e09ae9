"""`grade hand OUT --export sheet.csv` and `--import sheet.csv`: the by-hand parts as a
spreadsheet, one row per part per student (columns student, question, max, points, comment; then,
for the reader, the rubric items applied, the answer, and the version the row was exported at).

An import is all or nothing: every row is checked first (an unknown student or question, points
that are not a number, negative or over the part's maximum, a maximum that is not the part's, a
row given twice), each problem named by file, row and column; then one transaction writes the
marks, or none if any row's mark changed since the sheet was exported (its version)."""

import csv
import io
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from graders.deploy.gradebook import csv_cell
from graders.handgrading.classroom import Classroom
from graders.handgrading.store import Stale, Store

COLUMNS = ["student", "question", "max", "points", "comment", "rubric_items", "answer", "version"]
REQUIRED = ("student", "question", "points")
MAX_CELL = 32_000  # a spreadsheet's cell holds 32,767 characters
MAX_SHEET_BYTES = 64 << 20
MAX_PROBLEMS = 30


class SheetProblem(Exception):
    """The sheet was refused; nothing was written. One line per problem, each naming file, row and column."""


@dataclass(frozen=True)
class SheetRow:
    row: int
    student: str
    question: str
    points: float | None
    comment: str | None  # None: the sheet has no comment column, the stored comment stays
    version: int | None


def _cell(text: str) -> str:
    """No formulas: a cell a spreadsheet would evaluate starts with a quote (stripped on import)."""
    return csv_cell(text[:MAX_CELL])


def _uncell(text: str) -> str:
    return text[1:] if text[:2] in ("'=", "'+", "'-", "'@", "'\t", "'\r") else text


def export_sheet(room: Classroom, store: Store, path: Path) -> int:
    """Write the sheet (whole or not at all); the number of rows."""
    marks = store.marks()
    rows = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, delete=False, suffix=".tmp", newline="", encoding="utf-8"
    ) as fh:
        writer = csv.writer(fh)
        writer.writerow(COLUMNS)
        for q in room.questions:
            for student in room.students:
                m = marks.get(student, {}).get(q.id)
                answer = room.answers.get(q.id, {}).get(student)
                text = "" if answer is None else answer.missing or "\n\n".join(s.text for s in answer.sections)
                applied = "; ".join(f"{a.points:+g} {a.text}" for a in m.items) if m else ""
                points = "" if m is None or m.points is None else f"{round(m.points, 4):g}"
                writer.writerow(
                    [
                        _cell(student),
                        q.id,
                        f"{q.max:g}",
                        points,
                        _cell(m.comment if m else ""),
                        _cell(applied),
                        _cell(text),
                        m.version if m else 0,
                    ]
                )
                rows += 1
    os.replace(fh.name, path)
    return rows


def _number(text: str) -> float:
    value = float(text)  # ValueError for "2,5", "two", ""
    if not math.isfinite(value):
        raise ValueError(text)
    return value


class _Checker:
    def __init__(self, room: Classroom, name: str):
        self.maxima = {q.id: q.max for q in room.questions}
        self.students = set(room.students)
        self.name = name
        self.problems: list[str] = []
        self.seen: dict[tuple[str, str], int] = {}

    def problem(self, row: int, column: str, why: str) -> None:
        self.problems.append(f"{self.name} row {row}, column {column}: {why}")

    def row(self, number: int, cells: dict[str, str], has_comment: bool) -> SheetRow | None:
        student, question = _uncell(cells.get("student", "").strip()), cells.get("question", "").strip()
        if student not in self.students:
            self.problem(number, "student", f"unknown student {student!r} (not in this batch)")
        if question not in self.maxima:
            known = ", ".join(self.maxima) or "none"
            self.problem(number, "question", f"unknown question {question!r}: the by-hand parts are {known}")
            return None
        if (student, question) in self.seen:
            self.problem(
                number,
                "question",
                f"{student} {question} is given twice (rows {self.seen[student, question]} and {number})",
            )
        self.seen[student, question] = number
        points = self.points(number, question, cells.get("points", "").strip())
        self.maximum(number, question, cells.get("max", "").strip())
        version = cells.get("version", "").strip()
        if version and not version.isdigit():
            self.problem(number, "version", f"{version!r} is not a version number (leave the column as exported)")
        comment = _uncell(cells.get("comment", "")) if has_comment else None
        return SheetRow(number, student, question, points, comment, int(version) if version.isdigit() else None)

    def points(self, number: int, question: str, text: str) -> float | None:
        if not text:
            return None
        try:
            value = _number(text)
        except ValueError:
            self.problem(number, "points", f"{text!r} is not a number (points like 2 or 2.5, or empty: not graded)")
            return None
        if value < 0 or value > self.maxima[question]:
            self.problem(
                number, "points", f"{text} is outside 0 to {self.maxima[question]:g}, question {question}'s maximum"
            )
        return value

    def maximum(self, number: int, question: str, text: str) -> None:
        try:
            wrong = bool(text) and _number(text) != self.maxima[question]
        except ValueError:
            wrong = True
        if wrong:
            self.problem(number, "max", f"{text!r} is not question {question}'s maximum, {self.maxima[question]:g}")


def _records(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SheetProblem(f"{path}: cannot be read ({e.strerror})") from None
    if len(data) > MAX_SHEET_BYTES:
        raise SheetProblem(f"{path}: {len(data)} bytes; a sheet is at most {MAX_SHEET_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8-sig")  # a spreadsheet's "CSV UTF-8" starts with a byte-order mark
    except UnicodeDecodeError as e:
        raise SheetProblem(f"{path}: not UTF-8 text (byte {e.start}); save it as CSV UTF-8") from None
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = [h.strip().lower() for h in next(reader, [])]
        rows = [dict(zip(header, row, strict=False)) for row in reader if any(c.strip() for c in row)]
    except csv.Error as e:
        raise SheetProblem(f"{path}: not a CSV file ({e})") from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SheetProblem(f"{path} row 1: no column {', '.join(missing)} (the header must have {', '.join(REQUIRED)})")
    return header, rows


def read_sheet(room: Classroom, path: Path) -> list[SheetRow]:
    """The sheet's rows, checked; SheetProblem naming every problem (up to MAX_PROBLEMS)."""
    header, records = _records(path)
    checker = _Checker(room, str(path))
    rows = [checker.row(number, cells, "comment" in header) for number, cells in enumerate(records, start=2)]
    if checker.problems:
        shown = checker.problems[:MAX_PROBLEMS]
        more = len(checker.problems) - len(shown)
        raise SheetProblem("\n".join(shown + ([f"... and {more} more"] if more else [])))
    return [r for r in rows if r is not None]


def import_sheet(room: Classroom, store: Store, path: Path, grader: str) -> int:
    """Check the sheet, then write its marks in one transaction; the number of marks changed.
    SheetProblem (nothing written) for a bad sheet or rows that changed since their export."""
    rows = read_sheet(room, path)
    try:
        return store.import_rows(
            [(f"{path} row {r.row}", r.student, r.question, r.points, r.comment, r.version) for r in rows], grader
        )
    except Stale as e:
        raise SheetProblem("\n".join(f"{why}: export the sheet again" for why in e.changed)) from None
