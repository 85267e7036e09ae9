"""A .py file exported from a notebook (Colab's "Download .py") keeps the notebook's shell commands
and magics as they were: `!pip install wandb`, `%matplotlib inline`, `%cd /content/drive`. They are
no Python, so the file does not even parse; in the notebook they did their work before the code
ran. Each such line that stops the file parsing is skipped (`pass`, same line and indent, so every
line number stays) and said in a warning; nothing else is touched, and a file that still does not
parse is refused as it was."""

import ast

MAX_SKIPPED = 50  # a notebook's installs and magics are a handful


def _parses(text: str, name: str) -> SyntaxError | None:
    try:
        ast.parse(text, filename=name)
    except SyntaxError as e:
        return e
    except ValueError:  # a NUL byte: nothing to skip
        return SyntaxError("cannot be parsed")
    return None


def skip_shell_lines(name: str, text: str) -> tuple[str, list[str]] | None:
    """`text` with the shell and magic lines that stop it parsing skipped, and a warning for each;
    None if it parses as it is or skipping them does not make it parse."""
    error = _parses(text, name)
    if error is None:
        return None
    lines = text.splitlines(keepends=True)
    warnings: list[str] = []
    while error is not None and len(warnings) < MAX_SKIPPED:
        index = (error.lineno or 0) - 1
        stripped = lines[index].lstrip() if 0 <= index < len(lines) else ""
        if not stripped.startswith(("!", "%")):
            return None
        indent = lines[index][: len(lines[index]) - len(stripped)]
        command = stripped.rstrip("\r\n")
        lines[index] = f"{indent}pass\n"
        warnings.append(
            f"{name}, line {index + 1}: `{command[:120]}` is a notebook's shell command or magic, not Python (so "
            f"`python {name}` stops there); it was skipped for grading, the rest graded as written. Delete such "
            "lines from a file exported from a notebook"
        )
        error = _parses("".join(lines), name)
    return ("".join(lines), warnings) if error is None else None
