"""A by-hand mark as every view shows it (the gradebook, report.html, summary.html): plain data,
read from the store (store.py) and handed to the views, which never open the store themselves."""

from dataclasses import dataclass


@dataclass(frozen=True)
class AppliedItem:
    text: str
    points: float


@dataclass(frozen=True)
class Mark:
    question: str
    max: float
    points: float | None  # None: not graded yet (an empty cell, never 0)
    items: tuple[AppliedItem, ...] = ()
    comment: str = ""
    override: bool = False  # points entered as a number, not from the rubric items
    grader: str = ""
    at: str = ""  # UTC, ISO 8601
    version: int = 0  # of the stored mark: a stale edit is one made against an older version

    @property
    def graded(self) -> bool:
        return self.points is not None


# student -> question -> mark: every by-hand part of a class that has a stored mark or comment
Marks = dict[str, dict[str, Mark]]


def rubric_total(points: list[float], maximum: float) -> float:
    """Applied rubric items add up, capped at the part's maximum and never below 0."""
    return round(min(maximum, max(0.0, sum(points))), 4)
