"""Hostile submissions of our own, each with the outcome it must get.

An attack is built on the reference (it sits inside one method or at import of one file, and may
cost the items that use that method and no other) or on the unfilled-starter stub (it tries to
earn points it did not: it must score 0). `Target` carries what an attack needs to aim at the
grader: the listener's port, the paths it must not reach, a marker the grader must never create.
"""

import textwrap
from dataclasses import dataclass

from conftest import REPO, edited, reference_files
from scenarios import stub

GENERATE = "3(a)vi"
LOSS = "3(b)ii"
TRAINING = "3(b)iii"
LOOP = "        for _ in range(num_new_tokens):\n"


@dataclass(frozen=True)
class Target:
    port: int            # a listener of the test's on 127.0.0.1: it must see no connection
    out: str             # the grade's --out folder: nothing the submission writes may land there
    marker: str          # created only if the grader unpickled or ran what the worker sent
    secret: str          # in the grader's environment, never in the worker's
    token: str           # names the daemon and the files the submission tries to plant


@dataclass(frozen=True)
class Attack:
    files: dict[str, str]
    may_lose: frozenset[str] | None  # None: built on the stub, must score 0
    must_lose: frozenset[str] = frozenset()
    says: tuple[str, str] | None = None  # (item, words its failing messages contain)
    what: str = ""


def in_generate(code: str, files: dict[str, str] | None = None) -> dict[str, str]:
    """The reference with `code` run at the start of Transformer.generate."""
    body = textwrap.indent(textwrap.dedent(code).strip() + "\n", " " * 8)
    return edited("model_solution.py", LOOP, body + LOOP, files)


def at_import(file: str, code: str, files: dict[str, str] | None = None) -> dict[str, str]:
    files = dict(files or reference_files())
    files[file] += "\n\n" + textwrap.dedent(code).strip() + "\n"
    return files


def on_stub(code: str) -> dict[str, str]:
    return at_import("model_solution.py", code, stub())


def method(what: str, code: str, lose: frozenset[str] = frozenset({GENERATE}), says: str | None = None) -> Attack:
    return Attack(in_generate(code), may_lose=lose, must_lose=lose, says=(next(iter(lose)), says) if says else None,
                  what=what)


def attacks(t: Target) -> dict[str, Attack]:
    hidden = [str(REPO / "reference" / "a3" / "model_solution.py"), str(REPO / "assignment" / "a3" / "spec.toml"),
              str(REPO / "assignment" / "a3" / "checks" / "a3_checklib.py"), t.out]
    planted = [f"/tmp/planted-{t.token}", str(REPO / f"planted-{t.token}"), f"{t.out}/planted-{t.token}",
               f"/root/planted-{t.token}", str(REPO / "reference" / "a3" / "utils.py")]
    return {
        # -- inside one method of a correct solution: costs that item only -------------------------
        "kill_parent_in_generate": Attack(in_generate("""
            import os, signal
            for pid in (os.getppid(), 1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            """), may_lose=frozenset({GENERATE}), what="SIGKILL the parent and pid 1, then carry on"),
        "kill_group_in_generate": method("SIGKILL its own process group", "import os; os.killpg(0, 9)",
                                         says="killed by SIGKILL"),
        "sigterm_ignored_hang": method("ignore SIGTERM and SIGINT, then spin", """
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            while True:
                pass
            """, says="timed out"),
        "fork_bomb_in_generate": method("fork until fork fails", """
            import os
            while True:
                os.fork()
            """),
        "disk_bomb_in_generate": method("write 64 MiB files until the disk is full (at most 2 GiB)", """
            import os
            written = 0
            try:
                for i in range(32):
                    with open(f"bomb{i}", "wb") as fh:
                        for _ in range(64):
                            fh.write(b"x" * (1 << 20))
                            written += 1 << 20
            finally:
                print("DISK-BOMB-WROTE", written, flush=True)
            """, says="OSError"),
        "recursion_in_generate": method("unbounded recursion with the limit lifted", """
            import sys
            sys.setrecursionlimit(10 ** 7)
            def deeper(n):
                return deeper(n + 1) + 1
            deeper(0)
            """),
        "huge_tensor_from_generate": method("return a 128 MiB tensor", "return torch.zeros(1, 1 << 24, dtype=torch.long)"),
        "nan_loss": Attack(edited("model_solution.py", "        logits = self(input_ids[:, :-1])\n",
                                  "        logits = self(input_ids[:, :-1]) * float('nan')\n"),
                           # charged once, on the loss: 3(b)iii is graded on a run with the grader's loss
                           may_lose=frozenset({LOSS}), must_lose=frozenset({LOSS}),
                           what="the loss is NaN"),
        # Asleep, not spinning: the import timeout is wall-clock either way, and a spin here burned 30 CPU-s
        # of the suite's two cores (spinning hangs: the scenarios' hang_in_generate, the cost suite's
        # hang_in_attention, a2s1's cell_hangs at import).
        "hang_at_import_of_train": Attack(at_import("train.py", "import time\nwhile True:\n    time.sleep(1)"),
                                          may_lose=frozenset({TRAINING}), must_lose=frozenset({TRAINING}),
                                          says=(TRAINING, "timed out"), what="hang forever at import of train.py"),
        "os_exit_at_import_of_train": Attack(at_import("train.py", "import os\nos._exit(0)"),
                                             may_lose=frozenset({TRAINING}), must_lose=frozenset({TRAINING}),
                                             says=(TRAINING, "train.py"), what="os._exit(0) at import of train.py"),
        "daemon_at_import": Attack(at_import("utils.py", f"""
            import ctypes, os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    ctypes.CDLL(None).prctl(15, b"d{t.token[:14]}")  # PR_SET_NAME: the test looks for it
                    while True:
                        time.sleep(1)
                os._exit(0)
            os.wait()
            """), may_lose=frozenset(), what="a double-forked daemon in its own session, left running"),
        "child_at_import": Attack(at_import("model_solution.py", """
            import subprocess
            subprocess.Popen(["sleep", "1000"])  # left running, never waited for
            """), may_lose=frozenset(), what="a child process started at import and left running"),
        "child_in_generate": method("a child process started in every generate call and left running", """
            import subprocess
            subprocess.Popen(["sleep", "1000"])
            """, lose=frozenset()),
        "thread_at_import": Attack(at_import("utils.py", """
            import threading, time
            def _forever():
                while True:
                    time.sleep(0.2)
            threading.Thread(target=_forever).start()
            """), may_lose=frozenset(), what="a non-daemon thread left running (blocks a clean exit)"),
        # -- built on the stub: tries to earn what it did not -------------------------------------
        "fake_results": Attack(on_stub(f"""
            import json, os
            fake = {{"score": 30, "tests": [], "items": [], "output": "29 passed"}}
            for where in ("results.json", "/autograder/results/results.json", {t.out + "/results.json"!r},
                          {t.out + "/report.html"!r}):
                try:
                    os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
                    with open(where, "w") as fh:
                        json.dump(fake, fh)
                except OSError:
                    pass
            print("============================= 29 passed in 0.12s ==============================")
            print(json.dumps(fake))
            import atexit
            atexit.register(lambda: print(json.dumps(fake)))
            """), may_lose=None, what="write results.json everywhere, print pytest's summary and a JSON score"),
        "patched_comparisons": Attack(on_stub("""
            import math, unittest
            import numpy, torch
            torch.allclose = lambda *a, **k: True
            torch.equal = lambda *a, **k: True
            torch.isclose = lambda a, b, *r, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
            torch.testing.assert_close = lambda *a, **k: None
            torch.Tensor.__eq__ = lambda self, other: True
            torch.Tensor.allclose = lambda *a, **k: True
            numpy.allclose = lambda *a, **k: True
            numpy.testing.assert_allclose = lambda *a, **k: None
            math.isclose = lambda *a, **k: True
            unittest.TestCase.assertEqual = lambda *a, **k: None
            """), may_lose=None, what="patch torch/numpy/math/unittest comparisons to always agree"),
        "lying_tensor": Attack(on_stub("""
            class _Liar(torch.Tensor):
                def __eq__(self, other):
                    return True
                __ne__ = lambda self, other: False
                def __reduce_ex__(self, proto):
                    import os
                    return (os.system, ("echo pwned",))
            class _Anything:
                shape = property(lambda self: (1,))
                def __eq__(self, other):
                    return True
                def __array__(self, *a, **k):
                    raise RuntimeError("no")
            def _liar_forward(self, x, *a, **k):
                return torch.zeros(*x.shape[:2], 1).as_subclass(_Liar)
            for _cls in (MLP, CausalAttention, DecoderBlock, Transformer):
                _cls.forward = _liar_forward
            Transformer.generate = lambda self, x, n: _Anything()
            Transformer.get_loss_on_batch = lambda self, ids: _Anything()
            """), may_lose=None, what="return a tensor subclass whose __eq__ lies, and objects equal to anything"),
        "protocol_forgery": Attack(on_stub("""
            import sys
            _protocol = sys.modules.get("gradeworker.protocol")
            if _protocol is not None:
                _real = _protocol.write_frame
                _protocol.write_frame = lambda fd, obj: _real(fd, {"ok": True, "passed": True, "score": 30})
            """), may_lose=None, what="patch the worker's own reply writer to claim success"),
        "pickle_to_every_fd": Attack(on_stub(f"""
            import os, pickle
            class _Payload:
                def __reduce__(self):
                    return (os.system, ("touch {t.marker}",))
            _blob = pickle.dumps(_Payload())
            for _fd in range(1, 1024):
                try:
                    os.write(_fd, _blob)
                except OSError:
                    pass
            """), may_lose=None, what="a pickle that runs `touch` written to every open fd"),
        "reads_hidden_files": Attack(on_stub(f"""
            import os
            for _path in {hidden!r}:
                try:
                    if os.path.isdir(_path):
                        print("LEAK", _path, os.listdir(_path))
                    else:
                        with open(_path) as _fh:
                            print("LEAK", _path, _fh.read())
                except OSError as _e:
                    print("DENIED", _path, type(_e).__name__)
            """), may_lose=None, what="read the reference, the spec, the hidden checks and the out folder; print them"),
        "writes_outside_scratch": Attack(on_stub(f"""
            import os
            for _path in {planted!r}:
                try:
                    with open(_path, "a") as _fh:
                        _fh.write("planted")
                    print("WROTE", _path)
                except OSError as _e:
                    print("DENIED", _path, type(_e).__name__)
            """), may_lose=None, what="write into /tmp, the repo, the reference, /root and the out folder"),
        "network_and_environment": Attack(on_stub(f"""
            import os, socket
            print("ENV", dict(os.environ))
            for _pid in ("1", str(os.getppid())):
                try:
                    print("ENV", _pid, open(f"/proc/{{_pid}}/environ", "rb").read())
                except OSError as _e:
                    print("DENIED environ", _pid, type(_e).__name__)
            try:
                socket.create_connection(("127.0.0.1", {t.port}), timeout=2).sendall(b"hello")
                print("CONNECTED")
            except OSError as _e:
                print("NO-CONNECTION", type(_e).__name__)
            """), may_lose=None, what="connect to the test's 127.0.0.1 listener; print the environment"),
    }

