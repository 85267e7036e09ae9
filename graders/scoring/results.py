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
    name: str
    title: str
    status: CheckStatus
    weight: float
    message: str = ""
    measured: float | None = Field(None, description="the measured error, where one applies")
    tolerance: float | None = None
    where: str | None = Field(None, description="where the error is largest, e.g. 'batch 0, position 3'")
    example: str | None = Field(None, description="the generated case that failed")
    diagnosis: Diagnosis | None = Field(
        None, description="the known mistake this failure matches, when exactly one does"
    )


class ItemResult(BaseModel):
    id: str
    title: str
    score: float
    max_score: float
    bonus: bool
    status: ItemStatus
    feedback: str
    visibility: str
    checks: list[CheckResult]
    rubric: list[str] = Field(default_factory=list, description="what earns the points, from the spec")


class Training(BaseModel):
    initial_loss: float | None = None
    final_loss: float | None = None
    floor: float
    required_improvement: float
    recorded_losses: list[float | None] | None = Field(None, description="what train() recorded; null where not finite")
    steps: int | None = None
    reference_losses: list[float] | None = Field(None, description="the reference's training losses on the same data")
    reference_final_loss: float | None = Field(None, description="the reference's held-out loss after the same run")
    plot: str | None = Field(
        None, description="file name, beside results.json, of the plot the student's train() saved"
    )


class Output(BaseModel):
    stdout: str = ""
    stderr: str = ""


class Submission(BaseModel):
    name: str
    sha256: str
    files: list[str]


class Results(BaseModel):
    schema_version: int = SCHEMA_VERSION
    assignment: str
    grader_version: str
    submission: Submission
    score: float
    max_score: float
    bonus_score: float
    bonus_max: float
    items: list[ItemResult]
    problems: dict[str, str] = Field(default_factory=dict, description="per file: why it could not be used")
    warnings: list[str] = Field(default_factory=list)
    training: Training | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    output: Output = Field(default_factory=Output)
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
    grader_error: str | None = None

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
