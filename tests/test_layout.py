"""The shape of graders/: no import circles, a self-contained worker, short functions, and an
architecture page whose layout table names every stage folder. Static: nothing is imported or run."""

import ast
import re
from pathlib import Path

from conftest import REPO

GRADERS = REPO / "graders"
MAX_FUNCTION_LINES = 50
NOT_OURS: tuple[str, ...] = ()  # folders of graders/ left out of these checks (none now)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(GRADERS.rglob("*.py")):
        if any(part in NOT_OURS for part in path.relative_to(GRADERS).parts):
            continue
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The graders modules `name` imports anywhere in it (inside functions too), its own packages aside."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            wanted = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            wanted = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in wanted:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                targets.add(target)
    return targets


def test_no_import_circles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            current = todo.pop()
            if current == goal:
                return True
            if current not in seen:
                seen.add(current)
                todo += graph[current]
        return False

    circles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and reaches(b, a))
    assert not circles, circles


def test_the_worker_imports_nothing_of_the_grader():
    """It is copied alone into the sandbox (execution/client.py's WORKER_PACKAGE) as `gradeworker`."""
    worker = GRADERS / "execution" / "worker"
    for path in sorted(worker.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 1 or not (node.module or "").startswith("graders"), f"{path.name}: {ast.unparse(node)}"
                assert node.level <= 1, f"{path.name} reaches outside the worker: {ast.unparse(node)}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("graders") for a in node.names), f"{path.name}: {ast.unparse(node)}"


def test_no_function_is_longer_than_the_limit():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, long


def test_the_readme_layout_names_every_stage_folder():
    readme = (REPO / "docs" / "architecture.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`graders/([a-z_]+)/`", layout))
    folders = {p.name for p in GRADERS.iterdir() if (p / "__init__.py").exists() and p.name not in NOT_OURS}
    assert folders <= listed, f"not in docs/architecture.md's Layout: {sorted(folders - listed)}"
    assert listed <= folders, f"in docs/architecture.md's Layout, not in graders/: {sorted(listed - folders)}"
