"""Files written for Python 3.14's deferred annotations (PEP 649): there an annotation such as
`Float[Tensor, ...]` is never evaluated at import, while Python 3.11 evaluates it and raises. When
an import fails inside evaluating an annotation, the module is imported again with postponed
evaluation of annotations (what `from __future__ import annotations` does), nothing else changed."""

import __future__

import ast
import importlib.util
import sys
import traceback
from pathlib import Path


def _annotations(tree: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def _inside(node: ast.expr, line: int, col: int | None) -> bool:
    end_line = node.end_lineno or node.lineno
    if not node.lineno <= line <= end_line:
        return False
    if col is None:
        return True
    after_start = line > node.lineno or col >= node.col_offset
    before_end = line < end_line or node.end_col_offset is None or col < node.end_col_offset
    return after_start and before_end


def failed_in_annotation(exc: BaseException, path: Path) -> int | None:
    """The line of `path` where `exc` was raised, if that was inside an annotation; else None."""
    path = path.resolve()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path]
    if not frames or frames[-1].lineno is None:
        return None
    line, col = frames[-1].lineno, frames[-1].colno
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    return line if any(_inside(a, line, col) for a in _annotations(tree)) else None


def import_postponed(module: str, path: Path) -> None:
    """Import `module` from `path` with annotations kept as strings (it raises as an import would)."""
    for name in [n for n in sys.modules if n == module]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None:
        raise ImportError(f"cannot load {path.name}")
    mod = importlib.util.module_from_spec(spec)
    code = compile(path.read_bytes(), str(path), "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    sys.modules[module] = mod
    try:
        exec(code, mod.__dict__)  # noqa: S102  student code, in the worker only
    except BaseException:
        del sys.modules[module]
        raise
