"""Hostile submissions (tests/hostile/attacks.py) through real `grade` processes with the sandbox on.

For each: the grade finishes with a valid report, the score is never above the honest one, and
nothing outside the worker's scratch changed: no file planted, no connection made, no process
left, nothing of the hidden side or the grader's environment in any report.
"""

import hashlib
import os
import secrets
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from attacks import Target, attacks
from conftest import REPO, grade_all, lost, messages, write_zip
from graders.sandbox import UID_BASE, UID_SLOTS, capabilities

CAPS = capabilities()
# CI sets REQUIRE_BWRAP=1: there the strong sandbox must be in force, not skipped.
REQUIRED = os.environ.get("REQUIRE_BWRAP") == "1"
GUARDED = ("reference", "assignment", "graders", "tests", "student_template")
# Text only the hidden side holds: none of it may reach any report.
HIDDEN_TEXT = ("scores.masked_fill(self.causal_mask", "weights = 20260", "[training.model]")


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


def _sandbox_processes(token: str) -> list[str]:
    """Processes of a sandbox uid, or named like the daemon attack's, still running."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if UID_BASE <= uid < UID_BASE + UID_SLOTS or comm == f"d{token[:14]}":
            left.append(f"pid {entry.name} uid {uid} {comm}")
    return left


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    if not (CAPS.bwrap or CAPS.landlock_abi):
        assert not REQUIRED, f"REQUIRE_BWRAP=1 but no sandbox: {CAPS.notes}"
        pytest.skip(f"neither bwrap nor Landlock here, and these attacks write into the repo: {CAPS.notes}")
    if REQUIRED:
        assert CAPS.bwrap, f"REQUIRE_BWRAP=1 but bwrap is not usable: {CAPS.notes}"
    base = tmp_path_factory.mktemp("hostile")
    listener = Listener()
    target = Target(port=listener.port, out=str(base / "out"), marker=str(base / "unpickled"),
                    secret=f"grader-secret-{secrets.token_hex(8)}", token=secrets.token_hex(8))
    cases = attacks(target)
    autograder = Path("/autograder/results/results.json")
    existed = autograder.exists()
    (base / "zips").mkdir()
    zips = [write_zip(base / "zips" / f"{name}.zip", a.files) for name, a in cases.items()]
    before = _tree_digest()
    os.environ["GRADER_TEST_SECRET"] = target.secret  # inherited by the grade processes only
    try:
        results = grade_all(zips, base / "out")
    finally:
        del os.environ["GRADER_TEST_SECRET"]
        listener.close()
    return SimpleNamespace(cases=cases, results=results, target=target, listener=listener, base=base,
                           changed=_tree_digest() != before, autograder_planted=autograder.exists() and not existed)


NAMES = sorted(attacks(Target(0, "", "", "", "0" * 16)))


@pytest.mark.parametrize("name", NAMES)
def test_no_point_unearned_and_only_the_attacked_items_lost(hostile, name):
    attack, results = hostile.cases[name], hostile.results[name]
    assert results["grader_error"] is None, results["grader_error"]
    if attack.may_lose is None:
        assert results["score"] == 0, f"{attack.what}: {results['score']} points from a stub"
        return
    assert lost(results) <= attack.may_lose, f"{attack.what} cost {lost(results)}"
    assert attack.must_lose <= lost(results), f"{attack.what} was not caught"
    if attack.says:
        item, words = attack.says
        assert words in messages(results, item), messages(results, item)


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
    if REQUIRED:
        assert layers.pop().startswith("bwrap+"), layers
