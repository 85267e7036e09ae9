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


def skip_shell_lines(name: str, text: str) -> tuple[str, str] | None:
    """`text` with the shell and magic lines that stop it parsing skipped, and the warning that
    says which; None if it parses as it is or skipping them does not make it parse."""
    error = _parses(text, name)
    if error is None:
        return None
    lines = text.splitlines(keepends=True)
    skipped: list[tuple[int, str]] = []
    while error is not None and len(skipped) < MAX_SKIPPED:
        index = (error.lineno or 0) - 1
        stripped = lines[index].lstrip() if 0 <= index < len(lines) else ""
        if not stripped.startswith(("!", "%")):
            return None
        indent = lines[index][: len(lines[index]) - len(stripped)]
        skipped.append((index + 1, stripped.rstrip("\r\n")[:120]))
        lines[index] = f"{indent}pass\n"
        error = _parses("".join(lines), name)
    if error is not None:
        return None
    numbers = ", ".join(str(n) for n, _ in skipped)
    commands = ", ".join(f"`{c}`" for _, c in skipped[:5]) + (", ..." if len(skipped) > 5 else "")
    one = len(skipped) == 1
    return "".join(lines), (
        f"{name}, line{'' if one else 's'} {numbers}: {commands} {'is a' if one else 'are'} notebook shell "
        f"command{'' if one else 's'} or magic{'' if one else 's'}, not Python (`python {name}` stops at "
        f"{'it' if one else 'the first'}); skipped for grading (as `pass`), the rest graded as written. Delete "
        "such lines from a file exported from a notebook"
    )
