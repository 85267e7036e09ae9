"""Shared helpers: build real submission zips and grade many of them with real `grade` processes."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest

from graders.deploy.batch import run_grade
from graders.scoring.results import SCHEMA_FILE

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "reference" / "a3"
FILES = ("model_solution.py", "train.py", "utils.py")
RESULTS_SCHEMA = json.loads(SCHEMA_FILE.read_text())
GRADE = [sys.executable, "-m", "graders.cli"]
# Short timeouts keep the hostile cases quick; the reference finishes every call in milliseconds.
TEST_LIMITS = ["--limit", "call_timeout_s=2", "--limit", "import_timeout_s=30", "--limit", "train_timeout_s=20"]
# The training run in a second worker, as on a TA's machine with 3+ cores (on 2 cores the default
# is one): the hostile suite and the Gradescope runs take this path; the rest, the default one.
SPARE = ["--limit", "workers=2"]


# `make test` runs the files in 2 processes (pytest-xdist). A file's tests stay in one process, so
# its module fixtures are built once; files that share a session fixture, or that must not overlap
# (the attacks hash the repo's folders, which the bundle test adds a key to; they also count every
# sandbox-uid process not below a live grade, and test_zygote's killed zygote leaves its in-flight
# worker below init for a moment), go to the same process.
# (xdist's own --dist loadgroup marks cannot do this under pytest 9, whose node ids it cannot edit.)
GROUPS = {"test_grade.py": "scenarios", "test_html_report.py": "scenarios", "test_dask.py": "scenarios",
          "test_gradescope.py": "scenarios",
          "test_attacks.py": "repo", "test_gradescope_bundle.py": "repo", "test_zygote.py": "repo"}


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return GROUPS.get(Path(file).name, file)

    return FileGroups(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The tests that run torch in this process (test_reference, test_fingerprints, ...) do so beside
    the other process's grades: one thread, as the grade's trusted side uses, not a pool of two
    contending for the same two cores. (The controller of `-n 2` collects nothing, imports no torch.)"""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


# Installed by `make test` (scripts/system-packages): a test that needs one fails without it, never skips.
SET_UP = "run scripts/system-packages as root (make test does), or: sudo apt-get install -y bubblewrap chromium"


def require_bwrap() -> str:
    """bwrap's path; the test fails, naming the set-up, where it is missing."""
    path = shutil.which("bwrap")
    assert path, f"bubblewrap is not installed: {SET_UP}"
    return path


def uid_drop_works_without_bwrap() -> bool:
    """Whether the sandbox, without bwrap (as in a container), can run this venv's Python as a
    sandbox uid: not on a machine whose Python lives under root's 0700 home (pyenv)."""
    p = subprocess.run([*GRADE[:1], "-c", "from graders.execution.sandbox import capabilities; print(capabilities().uid)"],
                       cwd=REPO, env={**os.environ, "GRADER_SANDBOX": "container"}, capture_output=True, text=True,
                       timeout=60)
    return p.stdout.strip() == "True"


def container_level() -> str:
    """The sandbox level a grade under GRADER_SANDBOX=container may ask for here: `container` where
    the uid drop works without bwrap, else (student code would be uid 0, capabilities dropped) only
    `minimal`, which the TA must ask for."""
    return "container" if uid_drop_works_without_bwrap() else "minimal"


def reference_files() -> dict[str, str]:
    return {name: (REFERENCE / name).read_text() for name in FILES}


def edited(file: str, old: str, new: str, files: dict[str, str] | None = None) -> dict[str, str]:
    """The reference (or `files`) with one exact, unique edit in `file`."""
    files = dict(files or reference_files())
    assert files[file].count(old) == 1, f"{old!r} must occur once in {file}"
    files[file] = files[file].replace(old, new)
    return files


def write_zip(path: Path, files: dict[str, str | bytes], folder: str = "") -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in sorted(files.items()):
            z.writestr(folder + name, text)
    return path


def grade_all(zips: list[Path], out: Path, jobs: int = 1, extra: list[str] = TEST_LIMITS,
              seconds: dict[str, float] | None = None, fresh: bool = False) -> dict[str, dict]:
    """Grade `zips` with `jobs` real grade processes; results.json of each, by zip stem. With
    `seconds` (a zip stem's expected grade time; 4 s if not given), each zip goes to the process
    with the least work so far, longest first, so that no process is left alone at the end.

    Each grade process is forked from a warm one, as `grade batch` forks its grades
    (deploy/forked_grades.py: this test process's fork server, whose imports and worker zygote
    every grade_all shares), where the platform allows; else, or with `fresh` (a test that sets
    the grade's environment, or that is about the `grade` command's own process), a new `grade`."""
    chunks = _balanced(zips, jobs, seconds) if seconds else [zips[i::jobs] for i in range(jobs) if zips[i::jobs]]
    argvs = [[*map(str, chunk), "--out", str(out / f"job{i}"), "--quiet", *extra] for i, chunk in enumerate(chunks)]
    out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(len(argvs)) as pool:
        codes = list(pool.map(lambda i: run_grade(argvs[i], out / f"job{i}.log", 1800, fork=not fresh), range(len(argvs))))
    logs = [(out / f"job{i}.log").read_text(errors="replace") for i in range(len(argvs))]
    results = {}
    for i, chunk in enumerate(chunks):
        for z in chunk:
            target = out / f"job{i}" / z.stem / "results.json" if len(chunk) > 1 else out / f"job{i}" / "results.json"
            assert target.exists(), f"no results for {z.name}:\n{logs[i][-3000:]}"
            results[z.stem] = json.loads(target.read_text())
            jsonschema.validate(results[z.stem], RESULTS_SCHEMA)
    for code, log in zip(codes, logs):
        assert code == 0, log[-3000:]
    return results


def _balanced(zips: list[Path], jobs: int, seconds: dict[str, float]) -> list[list[Path]]:
    loads, chunks = [0.0] * jobs, [[] for _ in range(jobs)]
    for z in sorted(zips, key=lambda z: -seconds.get(z.stem, 4.0)):
        i = loads.index(min(loads))
        chunks[i].append(z)
        loads[i] += seconds.get(z.stem, 4.0)
    return [c for c in chunks if c]


def parent_pids() -> dict[int, int]:
    """Every live process's parent pid, from /proc."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return parents


def descends_from(pid: int, ancestors: set[int], parents: dict[int, int]) -> bool:
    seen = set()
    while pid in parents and pid not in seen:
        if pid in ancestors:
            return True
        seen.add(pid)
        pid = parents[pid]
    return False


def grade_seconds(results: dict) -> float:
    """A grade's time without the trusted side's imports, which only the first grade of each
    `grade` process pays: time bounds compare grades, not where they fell in a process."""
    t = results["timings"]
    return t["total_s"] - t.get("trusted_imports_s", 0.0)


def within_cost_bound(results: dict, normal: dict, extra_s: float = 0.0) -> bool:
    """`results`' grade took at most 3x the `normal` one's, plus `extra_s` (timeouts it had to wait
    out) and 5 s. bench/hostile_cost.py measures the issue's 2x target on a quiet machine; here the
    grades run beside another test process, and this bound still fails at the costs it guards
    against (a hang in attention paid for at every check: 91 s; a process left at import: 237 s)."""
    return grade_seconds(results) <= 3 * grade_seconds(normal) + extra_s + 5


def items(results: dict) -> dict[str, dict]:
    return {i["id"]: i for i in results["items"]}


def lost(results: dict) -> set[str]:
    return {i["id"] for i in results["items"] if i["max_score"] > 0 and not i["bonus"] and i["score"] < i["max_score"]}


def messages(results: dict, item: str) -> str:
    return " | ".join(c["message"] for c in items(results)[item]["checks"] if c["status"] != "passed")




@pytest.fixture(scope="session")
def scenario_zips(tmp_path_factory) -> dict[str, Path]:
    """tests/scenarios.py's SCENARIOS as zips, plus one in a folder with Mac junk and the demo's two, by stem."""
    from graders.tools import demo
    from scenarios import SCENARIOS

    folder = tmp_path_factory.mktemp("zips")
    zips = [write_zip(folder / f"{name}.zip", files) for name, files in SCENARIOS.items()]
    zips.append(write_zip(folder / "nested.zip", {**reference_files(), "__MACOSX/._x": "junk", ".DS_Store": "junk"},
                          folder="submission/"))
    zips += [p.rename(folder / f"demo_{p.name}") for p in demo.build(tmp_path_factory.mktemp("demo"))]
    return {z.stem: z for z in zips}


@pytest.fixture(scope="session")
def graded(scenario_zips, tmp_path_factory) -> dict[str, dict]:
    """Each scenario graded in single mode (one `grade` with every zip, in a grade process forked as
    grade batch's: grade_all), by stem."""
    return grade_all(list(scenario_zips.values()), tmp_path_factory.mktemp("out"))
