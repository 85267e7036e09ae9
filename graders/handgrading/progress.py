"""By-hand progress and statistics of a class, per question: how many answers are graded, and
what they scored (summary.html, the app's front page)."""

import statistics
from dataclasses import dataclass

from graders.handgrading.marks import Marks
from graders.handgrading.questions import HandQuestion


@dataclass(frozen=True)
class HandProgress:
    id: str
    title: str
    max: float
    bonus: bool
    answers: int
    graded: int
    mean: float | None
    median: float | None
    low: float | None
    high: float | None
    full: int  # answers with the maximum

    @property
    def percent(self) -> float:
        return round(100 * self.graded / self.answers, 1) if self.answers else 0.0


def hand_progress(questions: list[HandQuestion], students: list[str], marks: Marks) -> list[HandProgress]:
    rows = []
    for q in questions:
        points = [m.points for s in students if (m := marks.get(s, {}).get(q.id)) is not None and m.points is not None]
        rows.append(
            HandProgress(
                q.id,
                q.title,
                q.max,
                q.bonus,
                len(students),
                len(points),
                statistics.fmean(points) if points else None,
                statistics.median(points) if points else None,
                min(points, default=None),
                max(points, default=None),
                sum(1 for p in points if p >= q.max),
            )
        )
    return rows
