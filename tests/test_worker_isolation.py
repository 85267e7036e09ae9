"""What student code can reach from inside the worker through imports and the environment."""

import errno
import json
import os

import pytest

from conftest import REPO, TEST_LIMITS, edited, grade_all, reference_files, write_zip

PROBE = '''
import json as _json, os as _os, sys as _sys
_reach = {}
for _name in ("graders", "graders.runner", "reference", "a3_checklib", "test_attention", "conftest"):
    try:
        __import__(_name)
        _reach[_name] = True
    except ImportError:
        _reach[_name] = False
import socket as _socket
try:
    _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM).close()
    _inet = "created"
except OSError as _e:
    _inet = _e.errno
_status = dict(_l.split(":\t", 1) for _l in open("/proc/self/status").read().splitlines() if ":\t" in _l)
_fds = sorted(int(_fd) for _fd in _os.listdir("/proc/self/fd"))
print("PROBE" + _json.dumps({"reach": _reach, "path": _sys.path, "env": sorted(_os.environ), "inet": _inet,
                             "status": {_k: _status[_k].strip() for _k in ("Uid", "CapEff", "CapPrm", "CapAmb", "CapBnd",
                                                                            "NoNewPrivs", "Seccomp")},
                             "fds": _fds, "argv": _sys.argv[:3], "cwd": _os.getcwd()}))
'''


# grade: a `grade` process and its own zygote; forked: a grade forked from the fork server, with its
# zygote; spawned: a fresh grade process whose workers are spawned into bwrap (no zygote).
@pytest.mark.parametrize("how", ["grade", "forked", "spawned"])
def test_the_worker_sees_no_grader_code_and_a_minimal_environment(tmp_path, how, monkeypatch):
    if how == "spawned":
        monkeypatch.setenv("GRADER_ZYGOTE", "0")
    files = edited("utils.py", '"""Weight conversion', PROBE + '"""Weight conversion', reference_files())
    results = grade_all([write_zip(tmp_path / "probe.zip", files)], tmp_path / "out", fresh=how != "forked")["probe"]
    probe = _probe(results)
    assert not any(probe["reach"].values()), probe["reach"]
    inside_repo = [p for p in probe["path"] if p.startswith(str(REPO)) and "/.venv/" not in p]
    assert inside_repo == [], probe["path"]
    assert not any(k.startswith(("GRADE", "PYTEST", "HYPOTHESIS", "CI")) for k in probe["env"]), probe["env"]
    assert "HF_HUB_OFFLINE" in probe["env"]
    assert results["score"] == 30  # probing is not a bug
    layers = results["sandbox"].split("+")  # the full stack, as `make test` sets the machine up
    assert {"bwrap", "rlimits", "landlock", "seccomp"} <= set(layers), results["sandbox"]
    if "seccomp" in results["sandbox"]:  # even a UDP socket: Landlock covers only TCP
        assert probe["inet"] == errno.EPERM, probe["inet"]
    _assert_no_privilege_and_no_stray_fd(probe, results)
    if how == "spawned":
        assert results["timings"]["worker_forks"] == 0, results["timings"]


@pytest.mark.skipif(os.geteuid() != 0, reason="as root: where no uid can be dropped to, none of root's capabilities stay")
def test_without_bwrap_or_a_sandbox_uid_root_keeps_no_capability(tmp_path, monkeypatch):
    """--sandbox minimal on a machine without bwrap whose Python no other uid can run (pyenv under
    root's 0700 home): student code runs as uid 0, but with no capability, none to regain."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # bwrap hidden
    monkeypatch.setenv("GRADER_SANDBOX", "container")  # no bwrap either way; the uid drop where it can
    files = edited("utils.py", '"""Weight conversion', PROBE + '"""Weight conversion', reference_files())
    extra = [*TEST_LIMITS, "--sandbox", "minimal"]
    results = grade_all([write_zip(tmp_path / "probe.zip", files)], tmp_path / "out", extra=extra, fresh=True)["probe"]
    probe = _probe(results)
    assert results["score"] == 30 and results["sandbox_level"] == "minimal"
    _assert_no_privilege_and_no_stray_fd(probe, results)


def _probe(results: dict) -> dict:
    line = next(l for l in results["output"]["stdout"].splitlines() if l.startswith("PROBE"))
    return json.loads(line[len("PROBE"):])


def _assert_no_privilege_and_no_stray_fd(probe: dict, results: dict) -> None:
    """Spawned or forked from the zygote (graders/execution/zygote.py, where bwrap runs as root),
    the worker holds no capability and no fd but its own, and knows no more of how it was started."""
    status = probe["status"]
    assert status["CapEff"] == status["CapPrm"] == status["CapAmb"] == "0" * 16, status
    if os.geteuid() == 0:  # the bounding set emptied: nothing of root's to regain by exec or setuid binary
        assert status["CapBnd"] == "0" * 16, status
    if "uid" in results["sandbox"]:
        assert int(status["Uid"].split()[0]) >= 61000 and len(set(status["Uid"].split())) == 1, status
    assert status["NoNewPrivs"] == "1", status
    assert len(probe["fds"]) <= 6 and probe["fds"][:3] == [0, 1, 2], probe["fds"]  # + 2 pipes + listdir's own
    # as `python utils.py` would see it (the probe runs as utils.py is imported), not the worker's own argv
    assert probe["argv"] == ["utils.py"] and probe["cwd"].endswith("/submission"), probe
    t = results["timings"]
    if os.geteuid() == 0 and "bwrap" in results["sandbox"] and os.environ.get("GRADER_ZYGOTE") != "0":
        assert t["worker_forks"] == t["worker_starts"] >= 1, t  # every worker from the warm zygote
