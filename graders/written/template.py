"""The answers.yaml students start from, generated from the key: every question and part id with
an empty answer, the prompts and what each part asks as comments, and nothing of the key's values.

`python -m graders.written.template [ASSIGNMENT]` rewrites assignment/ASSIGNMENT/template/answers.yaml
(ASSIGNMENT: written by default).
"""

import sys

from graders.spec import ASSIGNMENTS_DIR, load_spec
from graders.written.key import AnswerKey, Part, Question, load_key

WRITTEN = ASSIGNMENTS_DIR / "written"

_HEADER = """\
# {title} — your answers
#
# Write each answer after its colon; an empty answer gets no points.
# Numbers: 64, 512/8, 2^20 or 1,048,576. Expressions: the names the part lists, with + - * / ^,
# sqrt exp log sin cos tan, pi and E, e.g. d_model/h or 2*sqrt(d_k).
# Put an answer that starts with * & ! [ {{ or - in quotes: "-d_k".
# Free-text answers go on the indented lines after `|`.
"""


def _points(question: Question) -> str:
    points = f"{question.points:g} point{'' if question.points == 1 else 's'}"
    return points + (", graded by hand" if question.manual else "")


def _asks(part: Part) -> str:
    if part.number is not None:
        return f"a number: {part.rubric}"
    return f"an expression in {', '.join(part.symbols)}: {part.rubric}" if part.symbols else f"a number: {part.rubric}"


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


def main(argv: list[str]) -> None:
    folder = ASSIGNMENTS_DIR / (argv[0] if argv else "written")
    spec = load_spec(folder / "spec.toml")
    assert spec.key is not None, f"{folder.name} has no answer key"
    target = folder / "template" / "answers.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(answers_template(load_key(folder / spec.key), spec.code_file()))
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1:])
