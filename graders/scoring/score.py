"""Checks' outcomes to item scores, by the weights in the spec."""

from graders.scoring.results import CheckResult, ItemResult
from graders.spec import Item


def score_item(item: Item, checks: list[CheckResult]) -> ItemResult:
    """Points shared by weight among applicable checks; not-applicable weight goes to the rest."""
    common = dict(
        id=item.id,
        title=item.title,
        max_score=item.points,
        bonus=item.bonus,
        visibility=item.visibility,
        checks=checks,
        rubric=list(item.rubric),
    )
    if item.manual:
        return ItemResult(score=0, status="manual", feedback="graded by hand", **common)
    applicable = [c for c in checks if c.status != "not_applicable"]
    total = sum(c.weight for c in applicable)
    earned = sum(c.weight for c in applicable if c.status == "passed")
    score = round(item.points * earned / total, 2) if total else 0.0
    failed = [c for c in applicable if c.status != "passed"]
    if item.report_as == "warning":
        status = "warning" if failed else "passed"
    else:
        status = "passed" if not failed else ("failed" if earned == 0 else "partial")
    feedback = failed[0].message if failed else "all checks passed"
    return ItemResult(score=score, status=status, feedback=feedback, **common)
