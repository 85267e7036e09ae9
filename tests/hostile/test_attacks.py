"""Hostile submissions (tests/hostile/attacks.py) through real `grade` processes with the sandbox on.

For each: the grade finishes with a valid report, the score is never above the honest one, and
nothing outside the worker's scratch changed: no file planted, no connection made, no process
left, nothing of the hidden side or the grader's environment in any report.
"""

import hashlib
import os
import re
import secrets
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from attacks import Target, attacks
from conftest import (REPO, SPARE, TEST_LIMITS, container_level, descends_from, grade_all, lost, messages,
                      parent_pids, reference_files, require_bwrap, within_cost_bound, write_zip)
from graders.execution.sandbox import UID_BASE, UID_SLOTS, capabilities

CAPS = capabilities()
GUARDED = ("reference", "assignment", "graders", "tests", "student_template")
# Text only the hidden side holds: none of it may reach any report.
HIDDEN_TEXT = ("scores.masked_fill(self.causal_mask", "weights = 20260", "[training.model]")


CONTROL = "control_reference"  # not an attack: the reference, graded in the same run


def _tree_digest() -> str:
    h = hashlib.sha256()
    for top in GUARDED:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[tuple] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(peer)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


# The attacks that wait out a timeout, with their grade's seconds (bench/hostile_cost.py): spread
# over the grade processes so that neither is left with most of them (was 95 s against 64).
SLOW = {"hang_at_import_of_train": 34.4, "fork_bomb_in_generate": 12.1, "recursion_in_generate": 11.2,
        "sigterm_ignored_hang": 10.9, "huge_tensor_from_generate": 8.0, "disk_bomb_in_generate": 7.7,
        "kill_group_in_generate": 7.3}


def _other_grades() -> set[int]:
    """Grade processes running now that are not this test's (another test file's, side by side
    under pytest-xdist): their workers hold sandbox uids too, legitimately."""
    parents, mine = parent_pids(), os.getpid()
    others = set()
    for pid in parents:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"graders." in cmdline and not descends_from(pid, {mine}, parents):
            others.add(pid)
    return others


def _sandbox_processes(token: str) -> list[str]:
    """Processes of a sandbox uid, or named like the daemon attack's, still running: this run's
    grades are over, so none may be left but those of another test's live grades."""
    left, others, parents = [], _other_grades(), parent_pids()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        named = comm == f"d{token[:14]}"
        if named or (UID_BASE <= uid < UID_BASE + UID_SLOTS and not descends_from(int(entry.name), others, parents)):
            left.append(f"pid {entry.name} uid {uid} {comm}")
    return left


def _run_attacks(base: Path, names: list[str] | None = None, sandbox: str | None = None,
                 level: str = "full") -> SimpleNamespace:
    """Grade the attacks (all, or `names`) with a listener on 127.0.0.1 and a secret in the
    grader's environment; `sandbox` sets GRADER_SANDBOX for the grade processes, `level` is their --sandbox."""
    listener = Listener()
    target = Target(port=listener.port, out=str(base / "out"), marker=str(base / "unpickled"),
                    secret=f"grader-secret-{secrets.token_hex(8)}", token=secrets.token_hex(8))
    cases = {n: a for n, a in attacks(target).items() if names is None or n in names}
    autograder = Path("/autograder/results/results.json")
    existed = autograder.exists()
    (base / "zips").mkdir()
    zips = [write_zip(base / "zips" / f"{name}.zip", a.files) for name, a in cases.items()]
    zips.append(write_zip(base / "zips" / f"{CONTROL}.zip", reference_files()))  # a normal grade, to time against
    before = _tree_digest()
    env = {"GRADER_TEST_SECRET": target.secret, **({"GRADER_SANDBOX": sandbox} if sandbox else {})}
    os.environ.update(env)  # inherited by the grade processes only
    try:
        results = grade_all(zips, base / "out", jobs=2, extra=[*TEST_LIMITS, *SPARE, "--sandbox", level], seconds=SLOW,
                            fresh=True)
    finally:
        for key in env:
            del os.environ[key]
        listener.close()
    return SimpleNamespace(cases=cases, results=results, target=target, listener=listener, base=base,
                           changed=_tree_digest() != before, autograder_planted=autograder.exists() and not existed)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    require_bwrap()
    assert CAPS.bwrap, f"bwrap is not usable here: {CAPS.notes}"
    return _run_attacks(tmp_path_factory.mktemp("hostile"))


# What a default Docker container leaves (no bwrap, no cgroups): the walls that must still hold.
CONTAINER_ATTACKS = ["daemon_at_import", "kill_parent_in_generate", "reads_hidden_files", "network_and_environment",
                     "writes_outside_scratch"]  # no fork bomb: as root without a uid drop nothing would stop it


@pytest.fixture(scope="module")
def hostile_container(tmp_path_factory):
    if not CAPS.landlock_abi:
        pytest.skip("no Landlock in this kernel: the container fallback has no file wall here")
    return _run_attacks(tmp_path_factory.mktemp("hostile-container"), CONTAINER_ATTACKS, sandbox="container",
                        level=container_level())


NAMES = sorted(attacks(Target(0, "", "", "", "0" * 16)))


@pytest.mark.parametrize("name", NAMES)
def test_no_point_unearned_and_only_the_attacked_items_lost(hostile, name):
    _judge(hostile, name)


@pytest.mark.parametrize("name", CONTAINER_ATTACKS)
def test_the_container_fallback_holds(hostile_container, name):
    """Without bwrap and cgroups (uid drop where the Python allows it, rlimits, Landlock, the
    subreaper): the same outcome, no leak, no connection, no process left, nothing written."""
    run = hostile_container
    _judge(run, name)
    assert "bwrap" not in run.results[name]["sandbox"] and "landlock" in run.results[name]["sandbox"]
    assert any(n.startswith("GRADER_SANDBOX=container") for n in run.results[name]["sandbox_notes"])
    assert not run.changed and not Path(run.target.marker).exists()
    assert run.listener.accepted == []
    assert _sandbox_processes(run.target.token) == []
    stdout = run.results[name]["output"]["stdout"]
    assert "LEAK" not in stdout and "WROTE" not in stdout and run.target.secret not in stdout
    if name == "network_and_environment":
        assert "NO-CONNECTION" in stdout and "DENIED environ" in stdout, stdout
    if name == "reads_hidden_files":
        assert stdout.count("DENIED") == 4, stdout


def _judge(run: SimpleNamespace, name: str) -> None:
    attack, results = run.cases[name], run.results[name]
    assert results["grader_error"] is None, results["grader_error"]
    if attack.may_lose is None:
        assert results["score"] == 0, f"{attack.what}: {results['score']} points from a stub"
        return
    assert lost(results) <= attack.may_lose, f"{attack.what} cost {lost(results)}"
    assert attack.must_lose <= lost(results), f"{attack.what} was not caught"
    if attack.says:
        item, words = attack.says
        assert words in messages(results, item), messages(results, item)


def test_no_attack_reads_as_a_grader_bug(hostile):
    """A forged or broken reply fails its check as the worker's fault, never as `grader error: KeyError`."""
    errors = {name: [c["message"] for i in r["items"] for c in i["checks"] if c["status"] == "error"]
              for name, r in hostile.results.items()}
    assert not {name: m for name, m in errors.items() if m}
    assert "malformed reply" in messages(hostile.results["protocol_forgery"], "3(a)iii")


def test_nothing_hidden_and_no_secret_in_any_report(hostile):
    for path in hostile.base.joinpath("out").rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            for secret in (*HIDDEN_TEXT, hostile.target.secret):
                assert secret not in text, f"{secret!r} in {path}"
    stdout = hostile.results["reads_hidden_files"]["output"]["stdout"]
    assert "LEAK" not in stdout and stdout.count("DENIED") == 4, stdout
    assert "DENIED environ" in hostile.results["network_and_environment"]["output"]["stdout"]


def test_no_connection_reached_the_listener(hostile):
    assert hostile.listener.accepted == []
    assert "NO-CONNECTION" in hostile.results["network_and_environment"]["output"]["stdout"]


def test_nothing_outside_scratch_changed(hostile):
    t = hostile.target
    assert not hostile.changed, f"the submissions changed files under {GUARDED}"
    assert not Path(t.marker).exists(), "the grader ran a pickle the worker sent"
    assert not hostile.autograder_planted
    assert list(hostile.base.joinpath("out").glob("planted-*")) == []
    for path in (f"/tmp/planted-{t.token}", REPO / f"planted-{t.token}", f"/root/planted-{t.token}"):
        assert not Path(path).exists(), path
    stdout = hostile.results["writes_outside_scratch"]["output"]["stdout"]
    assert "WROTE" not in stdout and stdout.count("DENIED") == 5, stdout
    for results in hostile.results.values():  # the files in --out are the grader's own
        assert results["assignment"] == "a3" and "items" in results


def test_no_process_of_a_submission_outlives_its_grade(hostile):
    assert _sandbox_processes(hostile.target.token) == []


def test_a_disk_bomb_fills_the_sandbox_not_the_disk(hostile):
    stdout = hostile.results["disk_bomb_in_generate"]["output"]["stdout"]
    written = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("DISK-BOMB-WROTE")]
    assert written, stdout
    if "bwrap" in hostile.results["disk_bomb_in_generate"]["sandbox"]:
        # scratch is a tmpfs of scratch_mb (256 MiB): the bomb stops there, every time it runs
        assert max(written) <= 256 << 20, written


def test_the_report_names_the_sandbox_layers(hostile):
    layers = {r["sandbox"] for r in hostile.results.values()}
    assert len(layers) == 1, layers
    assert layers.pop().startswith("bwrap+"), layers


# what each leftover case must be told; the grade goes on, and costs at most 2x a normal one
LEFT_RUNNING = {"daemon_at_import": "after import of utils.py", "child_at_import": "after import of model_solution.py",
                "child_in_generate": "after Transformer.generate"}


@pytest.mark.parametrize("name", [*LEFT_RUNNING, "thread_at_import"])
def test_a_process_left_running_is_killed_named_and_costs_seconds(hostile, name):
    r, normal = hostile.results[name], hostile.results[CONTROL]
    told = [w for w in r["warnings"] if w.startswith("your code left ")]
    if name in LEFT_RUNNING:
        assert len(told) == 1 and LEFT_RUNNING[name] in told[0] and "was killed" in told[0], r["warnings"]
    else:  # a thread is not a process: nothing to kill, nothing to say
        assert told == [], told
    assert r["score"] == 30, lost(r)
    assert within_cost_bound(r, normal), (r["timings"], normal["timings"])


# StudentError's form, "<Type> in <where>: ...": with no file and line of the submission, an
# exception raised in the grader's own code would read like the student's
BARE_EXCEPTION = re.compile(r"^\w+ in [^:(]+: ")


def test_no_feedback_is_an_exception_of_the_graders(hostile):
    """Every failure names a line of the submission, or is a sentence of ours."""
    for name, r in hostile.results.items():
        for item in r["items"]:
            for c in item["checks"]:
                if c["status"] == "passed":
                    continue
                text = c["message"]
                assert not BARE_EXCEPTION.match(text), (name, c["name"], text)
                assert "NoSuchHandle" not in text and "gradeworker" not in text and "graders/" not in text, (name, text)
