"""What student code can reach from inside the worker through imports and the environment."""

import errno
import json
import os

from conftest import REPO, edited, grade_all, reference_files, write_zip

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
print("PROBE" + _json.dumps({"reach": _reach, "path": _sys.path, "env": sorted(_os.environ), "inet": _inet}))
'''


def test_the_worker_sees_no_grader_code_and_a_minimal_environment(tmp_path):
    files = edited("utils.py", '"""Weight conversion', PROBE + '"""Weight conversion', reference_files())
    results = grade_all([write_zip(tmp_path / "probe.zip", files)], tmp_path / "out", jobs=1)["probe"]
    line = next(l for l in results["output"]["stdout"].splitlines() if l.startswith("PROBE"))
    probe = json.loads(line[len("PROBE"):])
    assert not any(probe["reach"].values()), probe["reach"]
    inside_repo = [p for p in probe["path"] if p.startswith(str(REPO)) and "/.venv/" not in p]
    assert inside_repo == [], probe["path"]
    assert not any(k.startswith(("GRADE", "PYTEST", "HYPOTHESIS", "CI")) for k in probe["env"]), probe["env"]
    assert "HF_HUB_OFFLINE" in probe["env"]
    assert results["score"] == 30  # probing is not a bug
    if os.environ.get("REQUIRE_BWRAP") == "1":  # CI: the full stack must be in force
        layers = results["sandbox"].split("+")
        assert {"bwrap", "rlimits", "landlock", "seccomp"} <= set(layers), results["sandbox"]
    if "seccomp" in results["sandbox"]:  # even a UDP socket: Landlock covers only TCP
        assert probe["inet"] == errno.EPERM, probe["inet"]
