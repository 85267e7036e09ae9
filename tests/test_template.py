"""The student template (student_template/): exported to a scratch folder, run with its own
`make selfcheck`, zipped by its own create_submission.sh and graded by real `grade` processes.

The slow runs (three selfchecks, two grades, one fixture regeneration) start together in one
fixture and are awaited by the tests that need them.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import torch
import yaml
from conftest import FILES, REFERENCE, REPO

from graders.tools.template import DATA, TEMPLATE, export

SPEC = tomllib.loads((REPO / "assignment" / "a3" / "spec.toml").read_text())
CHECKS_DIR = REPO / "assignment" / "a3" / "checks"
TODO = {("MLP", "forward"), ("CausalAttention", "forward"), ("DecoderBlock", "forward"),
        ("Transformer", "forward"), ("Transformer", "generate"), ("Transformer", "get_loss_on_batch")}
PLACEHOLDER = ast.dump(ast.parse("return torch.empty(1)").body[0])
PUBLIC_TESTS = 7
SUMMARY = re.compile(r"^(\d+)/(\d+) public tests pass; submission\.zip is ready \(3 files\)$", re.M)
TIMEOUT_S = 300
# Reference lines that give a TODO away, whatever else the template says.
DISTINCTIVE = ("masked_fill(self.causal_mask", "F.cross_entropy(logits.reshape", "self.fc2(self.gelu(self.fc1(x)))",
               "self.attention(self.pre_layer_norm(x))", "self.position_embeddings(positions)",
               "argmax(dim=-1, keepdim=True)")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GITHUB_STEP_SUMMARY")}
    return {**env, **extra}


def _sh(folder: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("sh"), "create_submission.sh"], cwd=folder, env=env or _env(),
                          capture_output=True, text=True, timeout=60)


class Runs:
    """Background processes by name; `result(name)` waits for one and returns (exit status, output)."""

    def __init__(self, base: Path):
        self.base, self.procs, self.logs, self.done = base, {}, {}, {}

    def start(self, name: str, cmd: list[str], cwd: Path, env: dict) -> None:
        self.logs[name] = self.base / f"{name}.log"
        with self.logs[name].open("w") as log:
            self.procs[name] = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)

    def result(self, name: str) -> tuple[int, str]:
        if name not in self.done:
            rc = self.procs[name].wait(timeout=TIMEOUT_S)
            self.done[name] = (rc, self.logs[name].read_text())
        return self.done[name]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("template")
    folders = {name: export(base / name, regenerate=False) for name in ("starter", "reference", "broken")}
    for name in FILES:
        shutil.copy(REFERENCE / name, folders["reference"] / name)
    broken = folders["broken"] / "model_solution.py"
    broken.write_text(broken.read_text().replace("class GELU(nn.Module):", "class GELU(nn.Module)"))
    zips = {}
    for name in ("starter", "reference"):  # made before the selfchecks, which rebuild submission.zip
        assert _sh(folders[name]).returncode == 0
        zips[name] = (folders[name] / "submission.zip").rename(base / f"{name}.zip")
    regenerated = export(base / "regenerated", regenerate=False)
    shutil.rmtree(regenerated / DATA)

    r = Runs(base)
    r.summary_file = base / "step_summary.md"
    for name, folder in folders.items():
        extra = {"GITHUB_STEP_SUMMARY": str(r.summary_file)} if name == "reference" else {}
        r.start(f"selfcheck_{name}", ["make", "selfcheck", f"PYTHON={sys.executable}"], folder, _env(**extra))
    # Both zips in one `grade` process (results in out/<zip stem>/): one start-up, as a TA's run.
    r.start("grade", [sys.executable, "-m", "graders.cli", *map(str, zips.values()), "--out", str(base / "out"),
                      "--quiet", "--limit", "call_timeout_s=3"], REPO, _env())
    r.start("regenerate", [sys.executable, "-m", "graders.tools.template", str(regenerated)], REPO, _env())
    r.folders, r.regenerated = folders, regenerated
    yield r
    r.stop()


def _graded(runs: Runs, name: str) -> dict:
    rc, log = runs.result("grade")
    assert rc == 0, log[-3000:]
    return json.loads((runs.base / "out" / name / "results.json").read_text())


def _template_files() -> list[Path]:
    skip = {"__pycache__", ".pytest_cache", ".hypothesis"}
    return sorted(p for p in TEMPLATE.rglob("*")
                  if p.is_file() and not skip & set(p.relative_to(TEMPLATE).parts) and p.name != "submission.zip")


def _bodies(source: str) -> dict[tuple[str, str], list[ast.stmt]]:
    """(class or "", function) -> its body without the docstring, for every function of a module."""
    out = {}
    for node in ast.parse(source).body:
        defs = [("", node)] if isinstance(node, ast.FunctionDef) else \
            [(node.name, n) for n in node.body if isinstance(n, ast.FunctionDef)] if isinstance(node, ast.ClassDef) else []
        for cls, fn in defs:
            body = fn.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]
            out[(cls, fn.name)] = body
    return out


def _dump(body: list[ast.stmt]) -> str:
    return "\n".join(ast.dump(s) for s in body)


def _without_docstrings(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


# -- the starter itself -------------------------------------------------------------------------

def test_todos_are_placeholders_and_everything_else_is_given():
    template = _bodies((TEMPLATE / "model_solution.py").read_text())
    reference = _bodies((REFERENCE / "model_solution.py").read_text())
    assert set(template) == set(reference)
    for key, body in template.items():
        if key in TODO:
            assert _dump(body) == PLACEHOLDER, f"{key} must be `return torch.empty(1)  # TODO`"
        else:
            assert _dump(body) == _dump(reference[key]), f"{key} is given and must match the reference"
    assert (TEMPLATE / "model_solution.py").read_text().count("return torch.empty(1)  # TODO") == len(TODO)
    for name in ("utils.py", "train.py"):  # given complete
        assert _without_docstrings((TEMPLATE / name).read_text()) == _without_docstrings((REFERENCE / name).read_text())


def test_no_solution_body_leaks():
    solution = {key: _dump(body) for key, body in _bodies((REFERENCE / "model_solution.py").read_text()).items()
                if key in TODO}
    lines = {line.strip() for key in TODO for line in ast.get_source_segment(
        (REFERENCE / "model_solution.py").read_text(), _function(key)).splitlines()[1:]}
    lines = {x for x in lines if len(x) >= 16 and not x.startswith(("#", "def ", "@", "for _ in"))}
    assert len(lines) >= 10
    for path in _template_files():
        raw = path.read_bytes()
        for needle in DISTINCTIVE:
            assert needle.encode() not in raw, f"{path.relative_to(TEMPLATE)} contains {needle!r}"
        if path.suffix in (".py", ".md", ".sh", ".yml", ".txt", ".ini", ".json", ""):
            text = raw.decode()
            for line in lines:
                assert line not in text, f"{path.relative_to(TEMPLATE)} contains the reference's {line!r}"
        if path.suffix == ".py":
            for key, body in _bodies(path.read_text()).items():
                assert _dump(body) not in solution.values(), f"{path.name}: {key} is a reference solution body"


def _function(key: tuple[str, str]) -> ast.FunctionDef:
    tree = ast.parse((REFERENCE / "model_solution.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == key[0])
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == key[1])


def test_no_hidden_names_seeds_or_configs_leak():
    names = {c["name"] for item in SPEC["items"] for c in item.get("checks", [])}
    for path in sorted(CHECKS_DIR.glob("test_*.py")):
        names |= {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)
                  and n.name.startswith("test_")}
    assert len(names) > 20
    seeds = [int(v) for v in SPEC["seeds"].values()]
    for path in _template_files():
        raw = path.read_bytes().lower()
        for name in names:
            assert name.lower().encode() not in raw, f"{path.relative_to(TEMPLATE)} names the hidden check {name}"
        if path.suffix == ".pt":
            continue
        text = raw.decode()
        for seed in seeds:
            assert not re.search(rf"seed\w*\s*[(=:,]\s*{seed}\b", text), f"{path.relative_to(TEMPLATE)}: seed {seed}"
            if seed >= 100:
                assert not re.search(rf"\b{seed}\b", text), f"{path.relative_to(TEMPLATE)} contains the seed {seed}"
        assert not re.search(r"^\s*(from|import)\s+(graders|assignment|reference)\b", text, re.M), \
            f"{path.relative_to(TEMPLATE)} imports from this repo: the template must stand alone"
    # The public configuration is none of the hidden ones.
    public = json.loads((TEMPLATE / DATA / "config.json").read_text())
    keys = ("d_model", "n_heads", "n_layers", "context_length", "vocab_size")
    assert public != SPEC["training"]["model"]
    tree = ast.parse((CHECKS_DIR / "a3_checklib.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SHAPES" for t in node.targets):
            assert (public["d_model"], public["n_heads"]) not in ast.literal_eval(node.value)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Case" and \
                all(isinstance(a, ast.Constant) for a in node.args[:5]) and len(node.args) >= 5:
            assert tuple(a.value for a in node.args[:5]) != tuple(public[k] for k in keys)


def test_fixtures_are_small_and_not_default_init():
    data = TEMPLATE / DATA
    assert sorted(p.name for p in data.iterdir()) == ["cases.pt", "config.json", "weights.pt"]
    assert sum(p.stat().st_size for p in data.iterdir()) < 200_000
    weights = torch.load(data / "weights.pt", weights_only=True)
    cases = torch.load(data / "cases.pt", weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in [*weights.values(), *cases.values()])
    for name, w in weights.items():
        if "layer_norm" in name and name.endswith("weight"):
            assert float((w - 1).abs().mean()) > 0.1, name
        elif name.endswith("bias"):
            assert float(w.abs().mean()) > 0.05, name
        else:
            assert float(w.std()) > 0.1, name  # default init is std 0.02
    assert any(k.startswith("backbone.1.") for k in weights)


def test_requirements_are_pinned_like_the_grader():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    grader = dict(d.split("==") for d in pyproject["project"]["dependencies"])
    lines = [x for x in (TEMPLATE / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
    pins = dict(x.split("==") for x in lines)
    assert len(pins) == len(lines)
    assert {"torch", "pytest", "hypothesis", "transformers", "datasets", "einops", "jaxtyping"} <= set(pins)
    for name, version in pins.items():
        assert grader.get(name) == version, f"{name}=={version} but the grader pins {grader.get(name)}"


def test_workflow_runs_make_selfcheck():
    workflow = yaml.safe_load((TEMPLATE / ".github" / "workflows" / "selfcheck.yml").read_text())
    assert "push" in workflow[True]  # YAML 1.1 reads the key `on` as True
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    commands = [s["run"].strip() for s in steps if "run" in s]
    installs = [c for c in commands if c.startswith("python -m pip install")]
    assert [c for c in commands if c not in installs] == ["make selfcheck"]
    assert "python -m pip install -r requirements.txt" in installs
    torch_pin = next(x for x in (TEMPLATE / "requirements.txt").read_text().split() if x.startswith("torch=="))
    assert all(torch_pin in c for c in installs if "torch" in c)


def test_create_submission_refuses_a_missing_file(tmp_path):
    folder = export(tmp_path / "t", regenerate=False)
    (folder / "train.py").unlink()
    run = _sh(folder)
    assert run.returncode != 0 and "missing train.py" in run.stderr
    assert not (folder / "submission.zip").exists()


def test_create_submission_works_without_zip(tmp_path):
    folder = export(tmp_path / "t", regenerate=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname", "rm"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    run = _sh(folder, env={"PATH": str(bin_dir), "PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr
    with zipfile.ZipFile(folder / "submission.zip") as z:
        assert sorted(z.namelist()) == sorted(FILES)
        assert all(z.read(name) == (folder / name).read_bytes() for name in FILES)


# -- real runs ----------------------------------------------------------------------------------

def test_unfilled_starter_selfcheck_reports_failing_tests(runs):
    rc, out = runs.result("selfcheck_starter")
    assert rc == 0, out[-3000:]
    assert SUMMARY.search(out).groups() == ("0", str(PUBLIC_TESTS)), out[-3000:]
    assert "ok: utils, model_solution and train import" in out
    assert out.count("not implemented yet") >= PUBLIC_TESTS
    assert "Traceback (most recent call last)" not in out
    with zipfile.ZipFile(runs.folders["starter"] / "submission.zip") as z:
        assert sorted(z.namelist()) == sorted(FILES)


def test_reference_files_pass_every_public_test(runs):
    rc, out = runs.result("selfcheck_reference")
    assert rc == 0, out[-3000:]
    assert SUMMARY.search(out).groups() == (str(PUBLIC_TESTS), str(PUBLIC_TESTS)), out[-3000:]
    assert "All public tests pass" in out and f"{PUBLIC_TESTS} passed" in out
    assert "7/7 public tests pass" in runs.summary_file.read_text()
    with zipfile.ZipFile(runs.folders["reference"] / "submission.zip") as z:
        assert all(z.read(name) == (REFERENCE / name).read_bytes() for name in FILES)


def test_a_syntax_error_stops_the_zip(runs):
    rc, out = runs.result("selfcheck_broken")
    assert rc != 0
    line = next(i for i, x in enumerate((runs.folders["broken"] / "model_solution.py").read_text().splitlines(), 1)
                if x.startswith("class GELU"))
    assert f"public tests not run; submission.zip was NOT built: model_solution.py, line {line}: SyntaxError" in out, out[-3000:]
    assert not (runs.folders["broken"] / "submission.zip").exists()


def test_fixtures_regenerate_byte_identical(runs):
    rc, out = runs.result("regenerate")
    assert rc == 0, out
    committed = sorted(p.name for p in (TEMPLATE / DATA).iterdir())
    assert sorted(p.name for p in (runs.regenerated / DATA).iterdir()) == committed
    for name in committed:
        assert (runs.regenerated / DATA / name).read_bytes() == (TEMPLATE / DATA / name).read_bytes(), name


def test_grade_of_the_unfilled_starter_is_zero_not_implemented(runs):
    results = _graded(runs, "starter")
    assert results["score"] == 0 and results["grader_error"] is None
    model_items = [i for i in results["items"] if i["id"] in ("3(a)ii", "3(a)iii", "3(a)iv", "3(a)v", "3(a)vi", "3(b)ii")]
    assert len(model_items) == len(TODO)
    for item in model_items:
        assert item["score"] == 0 and "not implemented" in item["feedback"], item


def test_grade_of_the_reference_files_is_full_marks(runs):
    results = _graded(runs, "reference")
    assert (results["score"], results["max_score"]) == (30, 30), [i["feedback"] for i in results["items"]]
