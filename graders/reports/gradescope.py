"""Gradescope's results.json, made from our `Results`.

The format is Gradescope's "Autograder Specifications" (`schemas/gradescope_results.schema.json`
is written from it, and the tests validate every file this module writes against it). One test
per handout item, numbered from the handout's id so Gradescope sorts them as the handout does:
"3(a)iii" -> "3.1.3". Every output is `"text"`: everything in it may come from the submission
(messages quote its errors, file names are its own), and Gradescope renders `simple_format`
and `html` as HTML.
"""

import json
import re
from pathlib import Path
from typing import Any

from graders.scoring.results import ItemResult, Results

SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "gradescope_results.schema.json"
OTHER_SECTION = 99  # items whose id is not a handout id ("utils", "advice") sort after the handout's
MAX_TEST_OUTPUT = 20_000
MAX_CAPTURED = 10_000

_ID = re.compile(r"^(\d+)(?:\(([a-z])\))?([ivxlcdm]+)?$")
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def _roman(text: str) -> int:
    values = [_ROMAN[c] for c in text]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


def handout_number(item_id: str) -> str | None:
    """The handout id as Gradescope's dotted number: "3(a)iii" -> "3.1.3", "3(c)" -> "3.3", "2" -> "2";
    None when the id is not of that form."""
    m = _ID.match(item_id)
    if not m:
        return None
    parts = [int(m[1])]
    if m[2]:
        parts.append(ord(m[2]) - ord("a") + 1)
    if m[3]:
        parts.append(_roman(m[3]))
    return ".".join(map(str, parts))


def clip(text: str, limit: int) -> str:
    """At most about `limit` characters: the head and the tail, and how much was left out between."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 5, limit * 3 // 5
    return f"{text[:head]}\n… {len(text) - head - tail} characters left out …\n{text[-tail:]}"


def captured_text(text: str, limit: int = MAX_CAPTURED) -> str:
    """Captured output as a terminal would leave it: each line's text after its last carriage
    return (progress bars redraw themselves), then clipped."""
    lines = [line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r") for line in text.split("\n")]
    return clip("\n".join(lines), limit)


def check_lines(item: ItemResult) -> list[str]:
    """One line per check, and for each failing one its message, measured error, where and case."""
    lines = []
    for c in item.checks:
        if c.status == "passed":
            lines.append(f"✓ {c.title}")
        elif c.status == "not_applicable":
            lines.append(f"– {c.title}: does not apply" + (f" ({c.message})" if c.message else ""))
        else:
            lines.append(f"✗ {c.title}: {c.message or c.status}")
            if c.measured is not None:
                tol = f" (tolerance {c.tolerance:.3g})" if c.tolerance is not None else ""
                lines.append(f"    measured error {c.measured:.3g}{tol}" + (f" at {c.where}" if c.where else ""))
            elif c.where:
                lines.append(f"    at {c.where}")
            if c.example:
                lines.append(f"    failing case: {c.example}")
            if c.diagnosis:
                lines.append(f"    diagnosis: {c.diagnosis.explanation}")
    return lines


def _test(item: ItemResult, number: str) -> dict:
    tags = [item.id] + (["bonus"] if item.bonus else []) + (["graded by hand"] if item.status == "manual" else [])
    test: dict[str, Any] = {
        "name": f"{item.id} {item.title}",
        "number": number,
        "output_format": "text",
        "tags": tags,
        "visibility": item.visibility,
    }
    if item.status == "manual":
        # Listed so students see it exists; worth 0 here so it never counts against the autograded
        # total; no status: it is neither passed nor failed until staff grade it.
        # No rubric lines: this is what students read, and a rubric says what the answer is.
        test.update(
            score=0,
            max_score=0,
            output=f"Graded by hand by the course staff (up to {item.max_score:g}{' bonus' if item.bonus else ''} "
            "points); not part of the autograder's score.",
        )
        return test
    lines = check_lines(item)
    if item.feedback and item.feedback != "all checks passed" and not any(item.feedback in line for line in lines):
        lines.insert(0, item.feedback)  # e.g. why no check ran: a missing file
    lines = lines or ["no checks ran"]
    test.update(
        score=item.score,
        max_score=item.max_score,
        status="passed" if item.status == "passed" else "failed",
        output=clip("\n".join(lines), MAX_TEST_OUTPUT),
    )
    return test


def _summary(results: Results) -> list[str]:
    """The lines above the tests: the autograded score, what is graded by hand, what went wrong."""
    # Gradescope adds its own by-hand questions' points to this score: the autograder's part is the
    # automatic items alone, and it says so (a "33/60" would read as the final grade).
    auto_max = results.max_score - results.by_hand_points
    summary = [f"Autograded score: {results.score:g}/{auto_max:g}."]
    if results.by_hand_points:
        summary.append(
            f"The other {results.by_hand_points:g} of the {results.max_score:g} points are graded by hand by the "
            "course staff on Gradescope, and are not part of the autograder's score."
        )
    if results.bonus_max:
        summary.append(f"Bonus ({results.bonus_max:g} points) is graded by hand and added later.")
    if results.grader_error:
        summary.append(
            "The grader itself failed on this submission, so the score is 0; "
            f"the course staff will look at it. ({results.grader_error})"
        )
    if results.sandbox_warning:
        summary.append(f"Note: {results.sandbox_warning}.")
    summary += [f"{name}: {why}" for name, why in sorted(results.problems.items())]
    summary += [f"warning: {w}" for w in results.warnings]
    return summary


def to_gradescope(results: Results, stdout_visibility: str = "hidden") -> dict:
    """Gradescope's results.json for `results`; `stdout_visibility` (the spec's) governs what the
    student's own code printed, both Gradescope's stdout and the "printed output" test here."""
    tests, others = [], 0
    for item in results.items:
        number = handout_number(item.id)
        if number is None:
            others += 1
            number = f"{OTHER_SECTION}.{others}"
        tests.append(_test(item, number))
    printed = "\n".join(
        f"--- {name} ---\n{captured_text(text)}"
        for name, text in (("stdout", results.output.stdout), ("stderr", results.output.stderr))
        if text.strip()
    )
    if printed:
        tests.append(
            {
                "name": "What your code printed (not graded)",
                "number": f"{OTHER_SECTION}.{others + 1}",
                "status": "passed",
                "output": printed,
                "output_format": "text",
                "tags": ["output"],
                "visibility": stdout_visibility,
            }
        )
    summary = _summary(results)
    return {
        "score": results.score,
        "execution_time": round(results.timings.get("total_s", 0.0), 3),
        "output": clip("\n".join(summary), MAX_TEST_OUTPUT),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": stdout_visibility,
        "tests": tests,
    }


def write_gradescope(results: Results, path: Path, stdout_visibility: str = "hidden") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_gradescope(results, stdout_visibility), indent=2, ensure_ascii=False) + "\n")
    return path


def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())
