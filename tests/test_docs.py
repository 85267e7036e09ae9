"""The documentation runs: every ```bash and ```python block of README.md and docs/ is executed, in
page order, in a scratch copy of the repository (its .venv linked, `demo/` and a `class/` of three
zips made), and a block titled with a path (```toml title="assignment/x/spec.toml") is written
there first. A block marked `<!-- not run: WHY -->` on the line before is skipped (a cluster, a
Docker engine, the network, the test suite itself). Commands in a block without a language are
refused: a command a reader may copy must be one the tests run.

The reference pages generated from the code (graders/tools/reference_docs.py) are checked too:
every subcommand's every option, every field of the spec and of results.json, appears."""

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, reference_files, write_zip

PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run: [^>]+-->\s*$")
COMMAND = re.compile(r"^\s*(\$ )?(\.venv/bin/|grade |make |python3? |pip |bash |npm |dask )", re.M)
TIMEOUT_S = 600


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    title: str | None
    body: str
    skipped: bool


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        title = re.search(r'title="([^"]+)"', m.group("attrs"))
        body = "\n".join(line[len(m.group("indent")):] for line in m.group("body").split("\n"))
        found.append(Block(page, text[: m.start()].count("\n") + 1, m.group("lang"), title and title.group(1), body,
                           bool(NOT_RUN.search(before))))
    return found


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if not b.skipped and (b.title or b.lang in ("bash", "python"))]


def _name(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_command_hides_in_a_block_without_a_language(page):
    hidden = [f"{_name(page)}:{b.line}" for b in blocks(page) if not b.lang and not b.skipped and COMMAND.search(b.body)]
    assert not hidden, f"commands in a block without a language (```bash, or <!-- not run: why --> before it): {hidden}"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """The repository's files (tracked and untracked but not ignored), without tests/ and docs/, and
    the example submissions the pages grade: demo/ (make demo's zips) and class/."""
    from graders.tools import demo

    root = tmp_path_factory.mktemp("pristine")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    with tarfile.open(root / "tree.tar", "w") as tar:
        for name in listed:
            if not name.startswith(("tests/", "docs/")) and (REPO / name).is_file():
                tar.add(REPO / name, arcname=name)
    demo.build(root / "demo")
    (root / "class").mkdir()
    shutil.copy(root / "demo" / "reference.zip", root / "class" / "ann.zip")
    shutil.copy(root / "demo" / "planted_bug.zip", root / "class" / "bob.zip")
    files = reference_files()
    files["model_solution.py"] = files["model_solution.py"].replace("return self.fc2(", "return 0 * self.fc2(", 1)
    write_zip(root / "class" / "cy.zip", files)
    return root


def _copy(pristine: Path, dest: Path) -> Path:
    with tarfile.open(pristine / "tree.tar") as tar:
        tar.extractall(dest, filter="data")
    for folder in ("demo", "class"):
        shutil.copytree(pristine / folder, dest / folder)
    (dest / ".venv").symlink_to(REPO / ".venv")
    return dest


def _run(block: Block, cwd: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the copy's graders, not the checkout's
    argv = ["bash", "-euo", "pipefail", "-c", block.body] if block.lang == "bash" else [sys.executable, "-c", block.body]
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert p.returncode == 0, f"{_name(block.page)}:{block.line} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=_name)
def test_every_command_of_the_page_runs(page, pristine, tmp_path):
    cwd = _copy(pristine, tmp_path / "repo")
    for block in runnable(page):
        if block.title:
            path = cwd / block.title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.body, encoding="utf-8")
        else:
            _run(block, cwd)


def _models(root) -> list:
    from graders.tools.reference_docs import _models_in

    seen, todo = [], [root]
    while todo:
        model = todo.pop()
        if model not in seen:
            seen.append(model)
            todo += [m for f in model.model_fields.values() for m in _models_in(f.annotation)]
    return seen


def test_the_reference_pages_name_every_option_and_field():
    from graders.cli import SUBCOMMANDS
    from graders.scoring.results import Results
    from graders.spec import Spec
    from graders.tools.reference_docs import cli_reference, results_reference, spec_reference

    cli = cli_reference()
    for module in ("graders.commands.grade", *SUBCOMMANDS.values()):
        for action in importlib.import_module(module).parser()._actions:
            for flag in action.option_strings if not isinstance(action, argparse._HelpAction) else ():
                assert f"`{flag}`" in cli, (module, flag)
    spec, results = spec_reference(), results_reference()
    for model, page in ((Spec, spec), (Results, results)):
        for name in model.model_fields:
            assert f"| `{name}` |" in page, (model.__name__, name)
    undescribed = [f"{m.__name__}.{n}" for root in (Spec, Results) for m in _models(root)
                   for n, f in m.model_fields.items() if not f.description]
    assert not undescribed, f"fields without a description (the reference pages show it): {undescribed}"
    assert "## `Limits`" in spec and "| `sandbox` |" in spec and "## `CheckResult`" in results


def test_the_changelog_has_this_version():
    """CHANGELOG.md (Keep a Changelog) has a section for the version graders/__init__.py says, the
    newest released one, and pyproject.toml says the same."""
    import tomllib

    import graders

    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", text, re.M)
    assert released and released[0] == graders.__version__, (released[:3], graders.__version__)
    assert "## [Unreleased]" in text
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"] == graders.__version__
