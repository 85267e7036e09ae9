"""The grade report's schema: `results.json` is this model, and `schemas/results.schema.json` its
exported JSON Schema (tests keep the two in step)."""

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1

CheckStatus = Literal["passed", "failed", "not_applicable", "error"]
ItemStatus = Literal["passed", "partial", "failed", "manual", "warning"]


class Diagnosis(BaseModel):
    """A known mistake the failing output matched, and only that one (see graders/checks/checking.py)."""

    id: str = Field(description="the fingerprint's name, e.g. 'attn_no_scaling'")
    explanation: str = Field(description="what the output matches and the idea behind the right way")


class CheckResult(BaseModel):
    """One hidden check's outcome."""

    name: str = Field(description="the check's name in the spec (the hidden test test_<name>)")
    title: str = Field(description="what it checks, in a few words")
    status: CheckStatus = Field(
        description="passed; failed; not_applicable (it did not apply to this code, its weight moved to the "
        "item's other checks); error (the grader's own failure)"
    )
    weight: float = Field(description="its share of the item's points")
    message: str = Field("", description="why it failed or did not apply, in words a student can act on")
    measured: float | None = Field(None, description="the measured error, where one applies")
    tolerance: float | None = Field(None, description="the largest error allowed, where one applies")
    where: str | None = Field(None, description="where the error is largest, e.g. 'batch 0, position 3'")
    example: str | None = Field(None, description="the generated case that failed")
    diagnosis: Diagnosis | None = Field(
        None, description="the known mistake this failure matches, when exactly one does"
    )


class ItemResult(BaseModel):
    """One handout item's points and checks."""

    id: str = Field(description="the handout's numbering, e.g. 3(a)iii")
    title: str = Field(description="what the item asks")
    score: float = Field(description="the points earned (0 for an item graded by hand: staff add them)")
    max_score: float = Field(description="what the item is worth")
    bonus: bool = Field(description="counted in bonus_score, not score")
    status: ItemStatus = Field(
        description="passed, partial or failed; manual (graded by hand); warning (advice, worth no points)"
    )
    feedback: str = Field(description="the first failing check's message, or 'ok'")
    visibility: str = Field(description="when Gradescope shows it to the student")
    checks: list[CheckResult] = Field(description="every check of the item")
    rubric: list[str] = Field(default_factory=list, description="what earns the points, from the spec")


class Training(BaseModel):
    """The student's own training run, as the grader measured it."""

    initial_loss: float | None = Field(None, description="the held-out loss before training, recomputed by the grader")
    final_loss: float | None = Field(None, description="the held-out loss after training, recomputed by the grader")
    floor: float = Field(description="the lowest loss possible on this data (the source's entropy rate)")
    required_improvement: float = Field(description="how far the held-out loss must fall for full points")
    recorded_losses: list[float | None] | None = Field(None, description="what train() recorded; null where not finite")
    steps: int | None = Field(None, description="optimizer steps train() made")
    reference_losses: list[float] | None = Field(None, description="the reference's training losses on the same data")
    reference_final_loss: float | None = Field(None, description="the reference's held-out loss after the same run")
    plot: str | None = Field(
        None, description="file name, beside results.json, of the plot the student's train() saved"
    )


class Output(BaseModel):
    """What the student's code printed, capped (limits.output_cap_bytes)."""

    stdout: str = Field("", description="its standard output")
    stderr: str = Field("", description="its standard error")


class Submission(BaseModel):
    """What was graded."""

    name: str = Field(description="the zip's or folder's name")
    sha256: str = Field(description="of the submission's files: the same zip always gets the same grade")
    files: list[str] = Field(description="the files graded")


class Results(BaseModel):
    """One grade: what `grade` writes as results.json and every report is made from."""

    schema_version: int = Field(SCHEMA_VERSION, description="this schema's version")
    assignment: str = Field(description="the assignment's name")
    grader_version: str = Field(description="the grader's version (graders.__version__)")
    submission: Submission = Field(description="what was graded")
    score: float = Field(description="the points earned automatically (not the bonus, not those graded by hand)")
    max_score: float = Field(description="the assignment's points, by-hand ones included")
    bonus_score: float = Field(description="bonus points earned automatically")
    bonus_max: float = Field(description="the bonus points there are")
    items: list[ItemResult] = Field(description="every item of the spec, in its order")
    problems: dict[str, str] = Field(default_factory=dict, description="per file: why it could not be used")
    warnings: list[str] = Field(default_factory=list, description="what else the student or the staff should know")
    training: Training | None = Field(None, description="the training run, for an assignment that has one")
    timings: dict[str, float] = Field(
        default_factory=dict, description="where the grade's time went, in seconds and counts"
    )
    output: Output = Field(default_factory=Output, description="what the student's code printed")
    sandbox: str = Field(
        "", description="the isolation layers student code ran under, e.g. bwrap+uid+cgroup+rlimits+landlock+seccomp"
    )
    sandbox_notes: list[str] = Field(default_factory=list, description="why a layer is missing here")
    sandbox_level: str = Field(
        "", description="the sandbox level the grade ran at (full, container, minimal; the spec's limits.sandbox)"
    )
    sandbox_missing: list[str] = Field(
        default_factory=list,
        description="the layers of the full sandbox that were not in force, and why: every view shows them",
    )
    grader_error: str | None = Field(
        None, description="the grader's own failure on this submission (the score is then 0, for staff to look at)"
    )

    @property
    def sandbox_warning(self) -> str | None:
        """What every view of a grade under fewer layers than the full sandbox says, loudly."""
        if not self.sandbox_missing:
            return None
        return (
            f"student code ran in a weaker sandbox (level {self.sandbox_level or 'unknown'}): "
            f"in force {self.sandbox or 'no layer'}; missing {'; '.join(self.sandbox_missing)}"
        )

    @property
    def by_hand_points(self) -> float:
        """Of max_score, the points staff grade by hand (not in `score` yet; bonus apart): every
        view of the total says so, or "33 / 60" reads as the final grade."""
        return sum(i.max_score for i in self.items if i.status == "manual" and not i.bonus)


SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "results.schema.json"


def schema_text() -> str:
    return json.dumps(Results.model_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m graders.scoring.results: re-export the schema after changing the models
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(schema_text())
