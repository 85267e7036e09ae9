"""`grade gradescope-bundle` and the bundle's scripts, without Gradescope: the real zip unpacked into
a folder laid out as /autograder (source/, submission/, results/), `setup.sh`'s steps that change
nothing outside that folder (perms, verify) on this venv, and the real `run_autograder` on the
reference, the demo's planted bug, a hostile submission and three ways of running out of time or
dying; every results.json validated against Gradescope's schema. All runs start at once."""

import json
import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from conftest import GRADE, REPO, SPARE, TEST_LIMITS, container_level, edited, reference_files, uid_drop_works_without_bwrap
from graders.deploy import bundle
from graders.tools import demo
from graders.reports.gradescope import SCHEMA_FILE
from graders.spec import Gradescope, load_spec, spec_path

SPEC = load_spec(spec_path("a3"))
GS_SCHEMA = json.loads(SCHEMA_FILE.read_text())
VENV = Path(os.environ.get("VIRTUAL_ENV") or Path(GRADE[0]).parent.parent)
HIDDEN_TEXT = ("scores.masked_fill(self.causal_mask", "weights = 20260", "def test_attention_agrees")
# Wrap-ups far above Gradescope's: seven grades share two cores here, and the trusted side's imports
# (pytest, torch, the checks) happen after the deadline when it is this early.
TINY = ("--time-budget", "60", "--wrap-up", "54")  # 6 s of checks: the worker barely starts in that
# Checks stop 35 s in: the items before the loss's are done ~14 s in beside the other runs (trusted
# imports 8 s, the worker's boot 10 s); the rest of the wait leaves a core idle, so it is short.
SLEEPER = ("--time-budget", "120", "--wrap-up", "85")


def _hostile(root: Path) -> dict[str, str]:
    """The reference, plus an import-time attack on what a Gradescope container holds: forge the
    results file, read the hidden checks, kill the grader. Each prints how it was refused."""
    attack = f'''
import os as _os, signal as _signal
def _try(name, action):
    try:
        action()
        print("HOSTILE", name, "succeeded", flush=True)
    except Exception as e:
        print("HOSTILE", name, "refused:", type(e).__name__, flush=True)
def _forge():
    with open({str(root / "results" / "results.json")!r}, "w") as fh:
        fh.write('{{"score": 999, "tests": []}}')
def _read():
    print(open({str(root / "source" / "assignment" / "a3" / "checks" / "test_attention.py")!r}).read())
_try("forge", _forge)
_try("read", _read)
_try("kill", lambda: _os.kill(_os.getppid(), _signal.SIGKILL))
'''
    files = reference_files()
    files["utils.py"] += attack
    return files


def _unzip(archive: Path, dest: Path) -> None:
    """As `unzip` does on Gradescope: with the modes the zip records (run_autograder executable)."""
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            path = Path(z.extract(info, dest))
            path.chmod((info.external_attr >> 16) & 0o777)


def _root(base: Path, name: str, archive: Path, files: dict[str, str]) -> Path:
    root = base / name
    _unzip(archive, root / "source")
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")  # where Gradescope puts it
    (root / "submission").mkdir()
    for file, text in files.items():
        (root / "submission" / file).write_text(text)
    (root / "results").mkdir()
    return root


def _env(root: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_VENV": str(VENV), **extra}


_RUNS: dict[str, dict] = {}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    """Every run_autograder of this file, all started together; by case: root, log, seconds,
    results.json (validated against the schema) and our own results.json where one was written."""
    if _RUNS:
        return _RUNS
    base = tmp_path_factory.mktemp("autograder")
    archive = base / "autograder.zip"
    p = subprocess.run([*GRADE, "gradescope-bundle", "--out", str(archive)], cwd=REPO, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and archive.exists(), p.stdout + p.stderr
    notebook_archive = base / "autograder-a2s1.zip"  # another assignment's bundle, graded the same way
    p = subprocess.run([*GRADE, "gradescope-bundle", "--assignment", "a2s1", "--out", str(notebook_archive)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and notebook_archive.exists(), p.stdout + p.stderr
    reference, planted = demo.build(base / "zips")
    planted_files = {n: zipfile.ZipFile(planted).read(n).decode() for n in zipfile.ZipFile(planted).namelist()}
    limits = [*TEST_LIMITS, "--quiet"]
    cases = {  # name: (files, run_autograder arguments, extra environment)
        # The second worker only here: seven grades already share the two cores.
        "reference": (reference_files(), ["--", *limits, *SPARE], {}),
        "planted_bug": (planted_files, ["--", *limits], {}),
        # As a default Docker container (Gradescope's) allows: no bwrap, no cgroups; uid drop, Landlock, seccomp.
        "hostile": (None, ["--", *limits], {"GRADER_SANDBOX": "container", "GRADER_SANDBOX_LEVEL": container_level()}),
        "tiny_budget": (reference_files(), [*TINY, "--", *limits], {}),
        # get_loss_on_batch never returns and a call may take 300 s: only the deadline ends its check.
        # The items checked before it (attention, block, generate) finish; those after it never start.
        "sleeper": (edited("model_solution.py", "        logits = self(input_ids[:, :-1])\n",
                           "        import time; time.sleep(1000)\n        logits = self(input_ids[:, :-1])\n"),
                    [*SLEEPER, "--", *limits, "--limit", "call_timeout_s=300"], {}),
        "killed": (reference_files(), ["--time-budget", "4", "--wrap-up", "1", "--", *limits], {}),
        "grade_dies": (reference_files(), ["--", "--limit", "memory_mb=lots"], {}),
        # A container that cannot give the bundle's level (here: every layer left out): refused, no score.
        "refused": (reference_files(), ["--", *limits], {"GRADER_SANDBOX": "plain"}),
        "a2s1": ({"A2S1.py": (REPO / "assignment" / "a2s1" / "reference" / "A2S1.py").read_text()}, [], {}),
    }
    roots = {name: _root(base, name, notebook_archive if name == "a2s1" else archive,
                         files if files is not None else _hostile(base / name))
             for name, (files, _, _) in cases.items()}
    for name, root in roots.items():
        p = subprocess.run(["bash", str(root / "source" / "setup.sh"), "perms"], env=_env(root), capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        _RUNS[name] = {"root": root}
    procs = {}
    for name, (_, args, env) in cases.items():
        root = roots[name]
        with open(root / "log.txt", "w") as log:
            procs[name] = (time.monotonic(), subprocess.Popen([str(root / "run_autograder"), *args],
                                                              env=_env(root, **env), stdout=log, stderr=subprocess.STDOUT))
    ended: dict[str, float] = {}
    while len(ended) < len(procs) and time.monotonic() - min(t for t, _ in procs.values()) < 600:
        for name, (_, proc) in procs.items():
            if name not in ended and proc.poll() is not None:
                ended[name] = time.monotonic()  # each its own time: they run side by side
        time.sleep(0.05)
    for name, (started, proc) in procs.items():
        proc.wait(timeout=1)
        run = _RUNS[name]
        log = (run["root"] / "log.txt").read_text()
        run.update(log=log, seconds=ended[name] - started, code=proc.returncode)
        if name == "refused":
            continue
        assert proc.returncode == 0, log[-3000:]
        run["results"] = json.loads((run["root"] / "results" / "results.json").read_text())
        jsonschema.validate(run["results"], GS_SCHEMA)
        ours = run["root"] / "grader-out" / "results.json"
        run["ours"] = json.loads(ours.read_text()) if ours.exists() else None
    return _RUNS


def _tests(results: dict) -> dict[str, dict]:
    return {t["tags"][0]: t for t in results["tests"] if t["tags"] != ["output"]}


def test_the_bundle_holds_the_scripts_and_what_they_need(tmp_path):
    path = bundle.write_bundle(SPEC, tmp_path / "a.zip")
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()}
        requirements = z.read("requirements.txt").decode()
        run_autograder = z.read("run_autograder").decode()
    for name in ("setup.sh", "run_autograder", "install.sh"):
        assert modes[name] == 0o755, name
    assert {"requirements.txt", "graders/cli.py", "graders/execution/worker/main.py", "graders/reports/schemas/gradescope_results.schema.json",
            "assignment/a3/spec.toml", "assignment/a3/checks/test_attention.py", "reference/a3/model_solution.py"} <= names
    assert not any("__pycache__" in n or n.startswith(("tests/", "student_template/", ".venv")) for n in names)
    assert 'ASSIGNMENT="${GRADER_ASSIGNMENT:-a3}"' in run_autograder
    pins = [line for line in requirements.splitlines() if line and not line.startswith("#")]
    assert "torch==2.13.0" in pins and all("==" in p for p in pins)
    import tomllib
    assert set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]) <= set(pins)
    assert bundle.write_bundle(SPEC, tmp_path / "b.zip").read_bytes() == path.read_bytes()  # same inputs, same bytes


def test_the_time_budget_is_validated():
    assert SPEC.gradescope.time_budget_s < 600  # under Gradescope's default limit
    for bad in ({"time_budget_s": 2401}, {"time_budget_s": 0}, {"time_budget_s": 60, "wrap_up_s": 60}):
        with pytest.raises(ValidationError):
            Gradescope(**bad)


def test_setup_verifies_the_venv_the_sandbox_uid_and_hides_the_source(runs):
    root = runs["reference"]["root"]
    p = subprocess.run(["bash", str(root / "source" / "setup.sh"), "verify"], env=_env(root), capture_output=True,
                       text=True, timeout=120)
    if uid_drop_works_without_bwrap():
        assert p.returncode == 0 and f"verified: 3." in p.stdout and "sandbox uid 61000" in p.stdout, p.stdout + p.stderr
    else:  # the pins passed; what the image must not have, this venv has, and verify says so
        assert p.returncode != 0 and "the sandbox uid 61000 cannot run" in p.stderr, p.stdout + p.stderr
        assert "pinned" not in p.stderr
    for hidden in ("assignment", "reference", "graders"):
        assert (root / "source" / hidden).stat().st_mode & 0o077 == 0, hidden
    # run_autograder runs from source/: the bundle's own grader, not the checkout this venv points at.
    p = subprocess.run([str(VENV / "bin" / "python"), "-c", "import graders; print(graders.__file__)"],
                       cwd=root / "source", capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == str(root / "source" / "graders" / "__init__.py")


def test_reference_gets_full_marks_with_the_sandbox_on(runs):
    run = runs["reference"]
    assert run["results"]["score"] == 30 == run["ours"]["score"]
    assert all(t["status"] == "passed" for t in _tests(run["results"]).values() if "status" in t)
    assert run["ours"]["sandbox"].startswith("bwrap+uid") and "seccomp" in run["ours"]["sandbox"]
    assert run["seconds"] < SPEC.gradescope.time_budget_s


def test_planted_bug_loses_its_items_points_with_its_message(runs):
    gs, ours = runs["planted_bug"]["results"], runs["planted_bug"]["ours"]
    assert gs["score"] == ours["score"] < 30
    attention = _tests(gs)["3(a)iii"]
    assert attention["status"] == "failed" and attention["score"] < attention["max_score"] == 6
    check = next(c for i in ours["items"] if i["id"] == "3(a)iii" for c in i["checks"] if c["status"] == "failed")
    assert f"✗ {check['title']}: {check['message']}" in attention["output"]
    assert _tests(gs)["3(a)ii"]["status"] == "passed"


def test_hostile_submission_forges_nothing_reads_nothing_kills_nothing(runs):
    run = runs["hostile"]
    gs, ours = run["results"], run["ours"]
    assert gs["score"] == ours["score"] == 30 and ours["grader_error"] is None  # the grader lived to write it
    # uid only where this venv's Python is readable by the sandbox uid (in the image; not here).
    assert ours["sandbox"] == ("uid+rlimits" if uid_drop_works_without_bwrap() else "rlimits+reaper") + "+landlock+seccomp"
    printed = ours["output"]["stdout"]
    for attack in ("forge", "read", "kill"):
        assert f"HOSTILE {attack} refused" in printed, printed[-2000:]
    everything = json.dumps(gs) + json.dumps(ours) + run["log"]
    assert not any(text in everything for text in HIDDEN_TEXT)


def test_a_container_that_cannot_give_the_bundles_sandbox_refuses_and_scores_nothing(runs):
    """Fail closed on Gradescope: no results.json at all (Gradescope counts no score and shows the
    staff this output), never the score-0 file a student would read as their grade."""
    run = runs["refused"]
    assert run["code"] == 3, run["log"][-2000:]
    assert "refusing to grade" in run["log"] and "--sandbox container requires" in run["log"], run["log"][-2000:]
    assert "missing uid" in run["log"] or "missing landlock" in run["log"], run["log"][-2000:]
    assert not (run["root"] / "results" / "results.json").exists()
    assert not (run["root"] / "grader-out" / "results.json").exists()


def test_a_tiny_budget_still_writes_results_in_time_saying_what_did_not_finish(runs):
    run = runs["tiny_budget"]
    budget = float(TINY[1])
    assert run["seconds"] < budget, run["log"][-2000:]
    assert run["ours"] is not None and run["ours"]["grader_error"] is None  # graded, not the fallback
    unfinished = 0
    for t in _tests(run["results"]).values():
        if "status" not in t or t["max_score"] == 0:
            continue
        if t["status"] == "failed":
            assert "time budget" in t["output"], t["output"]
            unfinished += 1
        else:
            assert t["score"] == t["max_score"]  # what finished keeps its points
    assert unfinished >= 1
    assert run["results"]["score"] == sum(t["score"] for t in _tests(run["results"]).values() if "status" in t)


def test_a_check_running_at_the_deadline_is_cut_there_and_finished_items_keep_their_points(runs):
    run = runs["sleeper"]
    assert run["seconds"] < float(SLEEPER[1]) - 3, run["log"][-2000:]  # ended by the deadline, not the kill
    assert run["ours"] is not None and run["ours"]["grader_error"] is None
    tests = _tests(run["results"])
    loss = tests["3(b)ii"]
    assert loss["status"] == "failed" and loss["score"] == 0 and "the grade's time budget of" in loss["output"]
    cut = [c for i in run["ours"]["items"] for c in i["checks"] if "ran out during" in c["message"]]
    assert [c["name"] for c in cut] == ["loss_agrees"], cut  # cut mid-request, the first check of the item
    for item in ("3(a)iii", "3(a)iv", "3(a)vi"):  # checked before the deadline, in the checks' file order
        assert tests[item]["status"] == "passed" and tests[item]["score"] == tests[item]["max_score"], item
    for item in ("3(a)ii", "3(a)v"):  # their files come after test_loss.py: never started
        assert tests[item]["score"] == 0 and "not run, the grade's time budget" in tests[item]["output"], item
    assert run["results"]["score"] == 13


def test_a_grade_killed_at_the_budget_still_leaves_a_valid_score_zero_file(runs):
    run = runs["killed"]
    assert run["seconds"] < 4 + 2
    assert run["results"]["score"] == 0 and "did not finish within the autograder's time budget of 4 s" in \
        run["results"]["output"]


def test_a_grade_that_dies_still_leaves_a_valid_score_zero_file(runs):
    out = runs["grade_dies"]["results"]
    assert out["score"] == 0 and "grader itself failed" in out["output"] and "exit status 2" in out["output"]
    assert "memory_mb" in runs["grade_dies"]["log"]  # the reason, for the staff


def test_run_autograder_writes_a_file_even_without_a_working_python(tmp_path):
    archive = bundle.write_bundle(SPEC, tmp_path / "a.zip")
    root = _root(tmp_path, "root", archive, reference_files())
    p = subprocess.run([str(root / "run_autograder")], env={**_env(root), "GRADER_VENV": str(tmp_path / "no-venv")},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    out = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(out, GS_SCHEMA)
    assert out["score"] == 0 and "autograder itself failed" in out["output"]


def test_another_assignments_bundle_grades_its_reference(runs):
    run = runs["a2s1"]
    assert run["results"]["score"] == 12, run["log"][-3000:]
    assert set(_tests(run["results"])) == {"1.2.1", "1.2.2", "1.3.1", "1.3.2", "1.3.3a", "1.3.3b"}
    assert run["ours"]["assignment"] == "a2s1"
    names = set(zipfile.ZipFile(run["root"].parent / "autograder-a2s1.zip").namelist())
    assert {"assignment/a2s1/spec.toml", "assignment/a2s1/checks/a2s1_checklib.py"} <= names
    assert not any(n.startswith(("assignment/a3/", "reference/a3/")) for n in names)


def test_a_written_key_is_bundled_only_when_all_its_claims_hold(tmp_path):
    p = subprocess.run([*GRADE, "gradescope-bundle", "--assignment", "written", "--out", str(tmp_path / "ok.zip")],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and (tmp_path / "ok.zip").exists(), p.stderr[-2000:]
    # The same assignment under another name, its key with one claim made false (a TA's slip).
    name = f"zz_false_claim_{os.getpid()}"
    folder = REPO / "assignment" / name
    shutil.copytree(REPO / "assignment" / "written", folder)
    try:
        spec = folder / "spec.toml"
        spec.write_text(spec.read_text().replace('assignment = "written"', f'assignment = "{name}"'))
        key = folder / "key.yaml"
        assert key.read_text().count("4 * d_model**2 == 1048576") == 1
        key.write_text(key.read_text().replace("4 * d_model**2 == 1048576", "3 * d_model**2 == 1048576"))
        p = subprocess.run([*GRADE, "gradescope-bundle", "--assignment", name, "--out", str(tmp_path / "bad.zip")],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(folder)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "not bundled: claims of the key not true: projection_count (grade check-key" in p.stderr
    assert not (tmp_path / "bad.zip").exists()
