"""A batch's grades.csv: one row per student, the total and each item's points."""

import csv
from pathlib import Path

from graders.scoring.results import Results
from graders.spec import Spec


def _csv_cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text  # no formulas in spreadsheets


def write_gradebook(path: Path, spec: Spec, students: dict[str, Path], graded: dict[str, Results]) -> None:
    """grades.csv: one row per student (0 and empty items where there is no readable result)."""
    ids = [i.id for i in spec.items]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "total", *ids])
        for student in students:
            r = graded.get(student)
            if r is None:
                writer.writerow([_csv_cell(student), 0, *[""] * len(ids)])
                continue
            scores = {i.id: ("" if i.status == "manual" else f"{i.score:g}") for i in r.items}
            writer.writerow([_csv_cell(student), f"{r.score:g}", *[scores.get(i, "") for i in ids]])
