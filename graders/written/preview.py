"""What students run before they submit: how the grader reads each answer of answers.yaml, and
which it cannot read and why, without saying whether any answer is right.

    python -m graders.written.preview answers.yaml --parts parts.json    (the templates' `make selfcheck`)
    grade check-answers answers.yaml --assignment transformer_exam        (the same, from the key)

parts.json is the assignment's parts without their answers (template.py writes it from the key).
Exit status 0 when every answer given can be read (missing ones are listed, not counted), 1 when
one cannot, 2 when the file itself cannot be read. Only sympy and PyYAML are needed.
"""

import argparse
import json
import re
import sys
from pathlib import Path

from graders.written.answerfile import Answers, AnswersProblem, load_answers
from graders.written.expressions import ExpressionError
from graders.written.reading import PartForm, describe, find_answer, read_answer, shown, unknown_ids

HEADER = "How the grader reads {source} (this says nothing of whether an answer is right):"


def _manual(form: PartForm, answers: Answers) -> str:
    entry = answers.entries.get(form.question)
    text = entry.text if entry is not None and not isinstance(entry, dict) else ""
    if not text.strip():
        return "no answer (free text, graded by hand)"
    return f"free text, graded by hand ({len(text.strip())} characters)"


def part_line(form: PartForm, answers: Answers, code_file: str | None) -> tuple[str, bool]:
    """One part's line, and whether its answer (if any) could be read."""
    if form.kind == "code":
        where = f"{form.function}() in {code_file or 'the .py file'}"
        return f"{form.question}: answered by {where}, which the grader runs (not checked here)", True
    if form.kind == "manual":
        return f"{form.label}: {_manual(form, answers)}", True
    found = find_answer(form, answers)
    if isinstance(found, str):
        if found.startswith("no answer"):
            return f"{form.label}: no answer", True
        located = re.match(r"\([^)]* line (\d+)\): ", found.removeprefix(form.label + " "))
        why = found[len(form.label) + 1 + located.end() :] if located else found
        return f"{form.label}: CANNOT BE READ" + (f" (line {located[1]})" if located else "") + f": {why}", False
    try:
        reading = read_answer(form, found)
    except ExpressionError as e:
        return f"{form.label}: CANNOT BE READ (line {found.line}): {shown(found.text)} {e}", False
    return f"{form.label}: {describe(form, reading)}", True


def preview(forms: list[PartForm], answers: Answers, code_file: str | None = None) -> tuple[list[str], int]:
    """The preview's lines, and how many answers cannot be read."""
    lines, unreadable, missing = [HEADER.format(source=answers.source)], 0, 0
    for i, form in enumerate(forms):
        if form.kind == "code" and i and forms[i - 1].kind == "code" and forms[i - 1].question == form.question:
            continue  # a question's code parts all run the same function: one line says it
        line, readable = part_line(form, answers, code_file)
        lines.append("  " + line)
        unreadable += not readable
        missing += line.endswith(": no answer")
    lines += [f"warning: {w}" for w in unknown_ids(forms, answers)]
    graded = sum(f.kind in ("number", "expression") for f in forms)
    lines.append(
        f"{graded - unreadable - missing} of {graded} answers read, {unreadable} cannot be read, {missing} missing"
    )
    return lines, unreadable


def run(forms: list[PartForm], path: Path, code_file: str | None, prog: str) -> int:
    """Print the preview of the answers file at `path`; the exit status (module docstring)."""
    try:
        answers = load_answers(path)
    except AnswersProblem as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    lines, unreadable = preview(forms, answers, code_file)
    print("\n".join(lines))
    return 1 if unreadable else 0


def load_parts(path: Path) -> tuple[list[PartForm], str | None]:
    """parts.json: {"code_file": ..., "parts": [PartForm fields, ...]}."""
    data = json.loads(path.read_text())
    forms = [PartForm(**{**p, "symbols": tuple(p["symbols"]), "siblings": tuple(p["siblings"])}) for p in data["parts"]]
    return forms, data.get("code_file")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="selfcheck", description="How the grader reads each answer of answers.yaml.")
    parser.add_argument("answers", type=Path, nargs="?", default=Path("answers.yaml"))
    parser.add_argument("--parts", type=Path, default=Path("parts.json"), help="the assignment's parts (no answers)")
    args = parser.parse_args(argv)
    try:
        forms, code_file = load_parts(args.parts)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"selfcheck: {args.parts}: cannot be read ({e})", file=sys.stderr)
        return 2
    return run(forms, args.answers, code_file, "selfcheck")


if __name__ == "__main__":
    sys.exit(main())
