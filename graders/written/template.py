"""What students of a written assignment get, generated from the key: answers.yaml with every
question and part id and an empty answer (the prompts and what each part asks as comments, nothing
of the key's values), parts.json (each part's kind and names, no answers) and a Makefile whose
`make selfcheck` shows how the grader reads each answer (graders/written/preview.py).

    python -m graders.written.template [ASSIGNMENT]              rewrite assignment/ASSIGNMENT/template/
    python -m graders.written.template ASSIGNMENT --export OUT   what students get, in OUT: the template
                                                                 and the grader's reading code it runs

ASSIGNMENT: written by default.
"""

import argparse
import dataclasses
import json
import shutil
from pathlib import Path

from graders.spec import ASSIGNMENTS_DIR, load_spec
from graders.written.key import AnswerKey, Part, Question, key_forms, load_key

WRITTEN = ASSIGNMENTS_DIR / "written"
HERE = Path(__file__).resolve().parent
# The modules `make selfcheck` runs (reading.py's docstring): sympy and PyYAML are all they need.
SHIPPED = ("answerfile.py", "expressions.py", "mathlex.py", "mathparse.py", "preview.py", "reading.py", "yamlsafe.py")
# Pinned as in pyproject.toml (tests/test_written_reading.py keeps the two in step).
REQUIREMENTS = "sympy==1.14.0\nmpmath==1.3.0\npyyaml==6.0.4\n"
MAKEFILE = """\
# make selfcheck: how the grader reads each answer of answers.yaml, and which it cannot read and
# why (it does not say whether an answer is right). Needs sympy and PyYAML: pip install -r requirements.txt
# Any Python 3.11+: make selfcheck PYTHON=.venv/bin/python
PYTHON ?= python3

.PHONY: selfcheck

selfcheck:
\t$(PYTHON) -m graders.written.preview answers.yaml --parts parts.json
"""

_HEADER = """\
# {title} — your answers
#
# Write each answer after its colon; an empty answer gets no points. `make selfcheck` shows how the
# grader reads each one (not whether it is right).
# Numbers: 64, 512/8, 2^20, 4 × 512² or 1,048,576. Expressions: the names the part lists, with
# + - * / ^, sqrt exp log sin cos tan, pi and E, e.g. d_model/h, 2 sqrt(d_k) or n^2 d; LaTeX
# (\\frac{{d}}{{h}}, \\sqrt{{d_k}}, n^{{2}} \\cdot d) and Unicode (n²d, √d_k) read the same. A complexity
# may be written O(n^2 d). Where a product has two readings (1/2n), write brackets: 1/(2n).
# Put an answer that starts with * & ! [ {{ or - in quotes: "-d_k"; LaTeX without quotes or in
# single quotes (in double quotes \\t and \\f are escapes).
# Free-text answers go on the indented lines after `|`.
"""


def _points(question: Question) -> str:
    points = f"{question.points:g} point{'' if question.points == 1 else 's'}"
    return points + (", graded by hand" if question.manual else "")


def _asks(part: Part) -> str:
    if part.number is not None or not part.symbols:
        return f"a number: {part.rubric}"
    kind = "a complexity (O(...) accepted)" if part.complexity else "an expression"
    return f"{kind} in {', '.join(part.symbols)}: {part.rubric}"


def answers_template(key: AnswerKey, code_file: str | None = None) -> str:
    blocks = [_HEADER.format(title=key.title)]
    for q in key.questions:
        lines = [f"# {q.id}. {q.title} ({_points(q)})"]
        lines += [f"#   {line}".rstrip() for line in q.prompt.strip().splitlines()]
        functions = sorted({p.code.function for p in q.parts if p.code is not None})
        if functions:  # answered in the .py file, not here (a question's parts are all code or none)
            lines.append(
                f"#   (answered by {', '.join(f'{f}()' for f in functions)} in {code_file}: nothing to write here)"
            )
            blocks.append("\n".join(lines) + "\n")
            continue
        if q.manual:
            lines.append(f"{q.id}: |")
        elif len(q.parts) == 1:
            lines.append(f"{q.id}:    # {_asks(q.parts[0])}")
        else:
            lines.append(f"{q.id}:")
            lines += [f"  {p.id}:    # {_asks(p)}" for p in q.parts]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def parts_json(key: AnswerKey, code_file: str | None = None) -> str:
    """The parts as the preview needs them: kinds, labels, names; never an answer."""
    parts = [dataclasses.asdict(form) for form in key_forms(key)]
    return json.dumps({"title": key.title, "code_file": code_file, "parts": parts}, indent=1) + "\n"


def template_files(key: AnswerKey, code_file: str | None = None) -> dict[str, str]:
    """The generated files of a written template, by name."""
    return {
        "answers.yaml": answers_template(key, code_file),
        "parts.json": parts_json(key, code_file),
        "Makefile": MAKEFILE,
        "requirements.txt": REQUIREMENTS,
    }


def export(template: Path, out: Path) -> None:
    """The template as students get it: its files, and the grader's reading code beside them
    (graders/written/, as a package of its own), so that `make selfcheck` runs without the grader."""
    shutil.copytree(template, out, ignore=shutil.ignore_patterns("__pycache__"))
    package = out / "graders" / "written"
    package.mkdir(parents=True)
    (out / "graders" / "__init__.py").write_text('"""The grader\'s reading of answers, for make selfcheck."""\n')
    (package / "__init__.py").write_text('"""How the grader reads answers.yaml (preview.py)."""\n')
    for name in SHIPPED:
        shutil.copy(HERE / name, package / name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m graders.written.template", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", nargs="?", default="written")
    parser.add_argument("--export", type=Path, metavar="OUT", help="write what students get to OUT (must not exist)")
    args = parser.parse_args(argv)
    folder = ASSIGNMENTS_DIR / args.assignment
    spec = load_spec(folder / "spec.toml")
    assert spec.key is not None, f"{folder.name} has no answer key"
    target = folder / "template"
    target.mkdir(parents=True, exist_ok=True)
    for name, text in template_files(load_key(folder / spec.key), spec.code_file()).items():
        (target / name).write_text(text)
    print(f"wrote {target}")
    if args.export:
        export(target, args.export)
        print(f"exported {args.export}")


if __name__ == "__main__":
    main()
