"""The trusted side's handle on a worker process: start, ask, time out, restart.

Only this module talks to student code, and only through private pipes with checked frames.
A hang, a signal, an exit or a bad frame in the worker becomes a WorkerError naming where it
happened; the next request starts a fresh worker, so one broken method costs one check.
"""

import json
import os
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from graders.execution import policy
from graders.execution.breaker import Breaker
from graders.execution.sandbox import Sandbox, capabilities
from graders.execution.worker import protocol
from graders.execution.zygote import Forked, give_up, is_zygote_stage, stage_worker_code, start_forked, warm, zygote
from graders.spec import Limits

# `-I -S`: no user site, no PYTHONPATH, no .pth files, so the editable install of `graders` is not
# importable; only the private copy of the worker and the site-packages we name are.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(4)); sys.path += sys.argv.pop(4).split(':'); "
    "from gradeworker.main import run; run()"
)
SITE_PACKAGES = ":".join(site.getsitepackages())


# Every worker's environment but its own folders: minimal, offline, deterministic hashing.
_WORKER_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "MPLBACKEND": "Agg",
    "CUDA_VISIBLE_DEVICES": "",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def _zygote_env(limits: Limits) -> dict[str, str]:
    """The zygote's environment: a worker's before its folders are known (each worker gets its
    own when forked); torch reads the thread count as it is imported."""
    threads = str(limits.threads)
    return {
        **_WORKER_ENV,
        "HOME": "/nonexistent",
        **{var: threads for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
    }


def warm_zygote(limits: Limits) -> None:
    """Start the zygote that workers under `limits` fork from now, ahead of any grade: a fork
    server does, and the grades forked from it share it (deploy/shared_zygote.py)."""
    warm(_zygote_env(limits), SITE_PACKAGES)


class WorkerError(Exception):
    """The worker hung, died or misbehaved; the message says how and where. `broke`: it hung or
    died in student code (a timeout, a signal, an exit), what graders.execution.breaker remembers."""

    def __init__(self, message: str, broke: bool = False):
        super().__init__(message)
        self.broke = broke


class StudentError(Exception):
    """Student code raised; `info` has type, message and the file and line inside the submission."""

    def __init__(self, info: dict, where: str):
        self.info, self.where = info, where
        # No line of the submission on the stack: raised where the grader called into the student's
        # code (a missing method, the wrong arguments) or used what it returned; said so, so that it
        # never reads as an exception of the submission's, or as one of the grader's own.
        loc = (
            f" ({info['file']}, line {info['line']})"
            if info.get("file")
            else ", raised outside your files (where the grader called your code or used what it returned)"
        )
        super().__init__(f"{info.get('type', 'Error')} in {where}{loc}: {info.get('message', '')}".strip())


@dataclass
class CapturedStream:
    """Keeps the first `cap` bytes of a worker's stdout or stderr and counts the rest."""

    cap: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def pump(self, fd: int) -> None:
        while chunk := os.read(fd, 65536):
            self.total += len(chunk)
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
        os.close(fd)

    def text(self) -> str:
        body = self.kept.decode("utf-8", errors="replace")
        if self.total > len(self.kept):
            body += f"\n[... {self.total - len(self.kept)} more bytes not kept]"
        return body


class Reply(dict):
    """A worker's reply: a field it left out is the worker's fault (a forged or broken reply), so
    it fails the check with a WorkerError, never a KeyError that reads as a grader bug."""

    where = ""

    @classmethod
    def wrap(cls, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            return value
        reply = cls({k: cls.wrap(v, where) for k, v in value.items()})
        reply.where = where
        return reply

    def __missing__(self, key: str) -> Any:
        raise WorkerError(f"the worker sent a malformed reply during {self.where}: no {key!r}")


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


class Worker:
    """One submission's worker. `modules` are imported at every (re)start, in order."""

    def __init__(self, scratch: Path, limits: Limits, modules: list[str]):
        # The last wall: no worker starts under fewer layers than the level (the commands refuse earlier).
        verdict = policy.assess(limits.sandbox, capabilities())
        if not verdict.ok:
            raise policy.SandboxRefused(policy.refusal(verdict))
        self.scratch, self.limits = scratch, limits
        self.modules = list(modules)
        # Requests re-sent at every (re)start after the imports: a notebook's cells that ran, so
        # that checks calling what they defined find it again in a fresh worker.
        self.replay: list[tuple[str, str, dict]] = []
        self.import_errors: dict[str, dict] = {}
        self.import_notes: dict[str, dict] = {}  # module -> how its import was retried (postponed annotations)
        self.left_running: dict[str, int] = {}  # request -> how many processes it left running (killed)
        self.stdout, self.stderr = CapturedStream(limits.output_cap_bytes), CapturedStream(limits.output_cap_bytes)
        self.starts = 0
        self.forks = 0  # of the starts, those forked from the zygote
        self.calls = 0
        self.peak_rss_kb = 0  # the largest peak resident memory any incarnation reported
        # The first start's split, for timings: spawn to hello (Python and torch), then the
        # submission's own imports.
        self.boot_s: float | None = None
        self.import_s: float | None = None
        self._spawned_at = 0.0
        self._proc: subprocess.Popen | Forked | None = None
        self._poison: str | None = None
        self._stale = False
        self._restarted: str | None = None  # why the last restart for staleness happened, for messages
        self.breaker: Breaker | None = None  # the grade's, shared by its workers
        self.check: str | None = None  # the title of the check now running, for the breaker's messages
        self.lost_s = 0.0  # in requests that hung or crashed, and in restarts
        self._swapped: set[str] = set()  # handles with a stand-in swapped in: only the method named runs
        self._booting = False  # spawned by launch(), its hello not read yet
        # Workers forked from this process's zygote import their code from its copy; spawned ones
        # from a copy of their own.
        self._zygote = zygote(_zygote_env(limits), SITE_PACKAGES)
        self._stage = self._zygote.stage if self._zygote else stage_worker_code()
        (scratch / ".tmp").mkdir(exist_ok=True)  # before the sandbox hands scratch to its uid
        self.sandbox = Sandbox(scratch, self._stage, limits)
        self.landlock: str | None = None
        self.seccomp = False
        # The grade's deadline (time.monotonic()), set once the checks run: no request outlives it,
        # so a grade under a platform's hard limit (Gradescope's) ends in time whatever student code does.
        self.deadline: float | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        tmp = str(self.scratch / ".tmp")
        return {**_WORKER_ENV, "HOME": str(self.scratch), "TMPDIR": tmp, "MPLCONFIGDIR": tmp}

    def _fork(self, fds: list[int]) -> Forked | None:
        """The worker forked from the zygote into its sandbox with the pipes `fds`; None (and
        spawned workers from now on) if the zygote failed."""
        assert self._zygote is not None
        env = self._env()
        request = {
            "cgroups": self.sandbox.cgroup_procs,
            "rlimits": self.sandbox.rlimits(),
            "cwd": str(self.scratch),
            "env": env,
            "limits": self._worker_limits(),
        }
        try:
            forked = start_forked(self._zygote, self.sandbox, request, fds, env)
        except (OSError, ValueError):
            self._give_up_zygote()
            return None
        self.forks += 1
        return forked

    def _give_up_zygote(self) -> None:
        """The zygote failed: this worker and every later one in this process are spawned."""
        assert self._zygote is not None
        give_up(self._zygote)
        self._zygote = None

    def _worker_limits(self) -> dict:
        return {
            "memory_mb": self.limits.memory_mb,
            "threads": self.limits.threads,
            "landlock": self.sandbox.landlock_rules() if self.sandbox.caps.landlock_abi else None,
            "uid": self.sandbox.worker_uid,
            "scratch_tmpfs": bool(self.sandbox.caps.bwrap),
            "seccomp": self.sandbox.caps.seccomp,
        }

    def _spawn(self) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self._proc = self._fork([req_r, rep_w, out_w, err_w]) if self._zygote is not None else None
        if self._proc is None:
            argv = [sys.executable, "-I", "-S", "-B", "-c", _BOOT, str(req_r), str(rep_w)]
            self._proc = subprocess.Popen(
                self.sandbox.command([*argv, json.dumps(self._worker_limits()), str(self._stage), SITE_PACKAGES]),
                cwd=self.scratch,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(req_r, rep_w),
                start_new_session=True,
                close_fds=True,
                preexec_fn=self.sandbox.preexec(),
            )
        self._spawned_at = time.monotonic()
        self.sandbox.started(self._proc.pid)
        for fd in (req_r, rep_w, out_w, err_w):
            os.close(fd)
        self._req, self._rep = req_w, rep_r
        for stream, fd in ((self.stdout, out_r), (self.stderr, err_r)):
            threading.Thread(target=stream.pump, args=(fd,), daemon=True).start()
        self.starts += 1

    def _ensure(self) -> None:
        if self._proc is not None and not self._booting:
            return
        if self._proc is None:
            self._spawn()
        self._booting = False
        hello = self._hello()
        self.landlock = hello.get("landlock") if isinstance(hello.get("landlock"), str) else None
        self.seccomp = hello.get("seccomp") is True
        first = self.boot_s is None
        if first:
            self.boot_s = round(time.monotonic() - self._spawned_at, 3)
        imports_began = time.monotonic()
        for module in list(self.modules):
            try:
                reply = self._exchange(
                    {"op": "import", "module": module}, self.limits.import_timeout_s, f"import of {module}.py"
                )
                if isinstance(reply.get("postponed_annotations"), dict):
                    self.import_notes[module] = reply["postponed_annotations"]
            except StudentError as e:
                self.import_errors[module] = e.info
                self.modules.remove(module)
            except WorkerError as e:
                self.import_errors[module] = {"type": "WorkerError", "message": str(e)}
                self.modules.remove(module)
                self._ensure()  # without the module that broke the worker
                return
        self._replay()
        if first:
            self.import_s = round(time.monotonic() - imports_began, 3)
        self._stale = False  # a restart would only import the same modules again

    def _hello(self) -> dict:
        """The worker's hello. A forked worker that never says it failed in the zygote, not in the
        submission (none of its code has run yet): the zygote is given up, the worker spawned."""
        forked = isinstance(self._proc, Forked)
        try:
            return self._exchange(None, self.limits.import_timeout_s, "worker start-up (import torch)")
        except WorkerError:
            if not forked or self._zygote is None:
                raise
            self._give_up_zygote()
            self.kill()
            self._spawn()
            return self._exchange(None, self.limits.import_timeout_s, "worker start-up (import torch)")

    def _replay(self) -> None:
        """Re-send `replay`; a request that fails now as it did not before is skipped (it bound
        nothing then either), one that breaks the worker ends the replays."""
        for op, where, fields in list(self.replay):
            try:
                self._exchange({"op": op, **fields}, self.limits.call_timeout_s, f"{where}, run again")
            except StudentError:
                continue
            except WorkerError as e:
                self.replay = []
                raise WorkerError(f"{e} (replaying the notebook after a restart)") from None

    def launch(self) -> None:
        """Spawn the process and return at once: it imports torch while the caller does other work."""
        if self._proc is None:
            self._spawn()
            self._booting = True

    def start(self) -> None:
        """Start now (and import the submission's modules) rather than at the first request."""
        self._ensure()

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        self._booting = False
        self._swapped.clear()  # the models go with the process
        if proc is None:
            return
        for fd in (self._req, self._rep):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        self.sandbox.ended(proc.pid)
        self.sandbox.sweep()  # what left the process group: daemons, double forks

    def close(self) -> None:
        self.kill()
        self.sandbox.close()
        if not is_zygote_stage(self._stage):
            shutil.rmtree(self._stage, ignore_errors=True)

    @property
    def layers(self) -> str:
        """The isolation the student code actually ran under, e.g. bwrap+uid+cgroup+rlimits+landlock."""
        layers = self.sandbox.layers
        if self.landlock is None:
            layers = layers.replace("+landlock", "")
        if not self.seccomp:
            layers = layers.replace("+seccomp", "")
        return layers

    # -- requests ------------------------------------------------------------------------------
    def begin_check(self, title: str | None = None) -> None:
        """A new check: errors of the last one no longer short-circuit requests."""
        self._poison = None
        self.check = title

    def _died(self, where: str) -> WorkerError:
        proc = self._proc
        assert proc is not None  # only a started worker dies
        try:
            code = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is None:
            return WorkerError(f"the worker closed its reply pipe during {where}", broke=True)
        if code > 128 and self.sandbox.caps.bwrap:
            code = 128 - code  # bwrap exits 128 + n when its child died of signal n
        if code < 0:
            return WorkerError(f"worker killed by {_signal_name(-code)} in {where}", broke=True)
        return WorkerError(f"worker exited with status {code} during {where}", broke=True)

    def _exchange(self, request: dict | None, timeout: float, where: str) -> dict:
        deadline = time.monotonic() + timeout
        cut = self.deadline is not None and self.deadline < deadline
        if cut:
            deadline = cast(float, self.deadline)
        try:
            if request is not None:
                protocol.write_frame(self._req, request)
            reply = protocol.read_frame(self._rep, deadline, max_payload=self.limits.reply_cap_bytes)
        except protocol.ReadTimeout:
            self.kill()
            if cut:
                raise WorkerError(
                    f"not finished: the grade's time budget of {self.limits.total_timeout_s:g} s ran out during {where}"
                ) from None
            raise WorkerError(f"timed out after {timeout:g} s in {where}", broke=True) from None
        except (protocol.PeerClosed, BrokenPipeError):
            raise self._died(where) from None
        except protocol.ProtocolError as e:
            self.kill()
            raise WorkerError(f"the worker sent a malformed reply during {where}: {e}", broke=True) from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            self.kill()
            raise WorkerError(f"the worker sent a malformed reply during {where}", broke=True)
        rss = reply.pop("peak_rss_kb", None)
        if isinstance(rss, int) and not isinstance(rss, bool):  # a measurement only: never a score
            self.peak_rss_kb = max(self.peak_rss_kb, rss)
        left = reply.pop("left_processes", None)
        if isinstance(left, int) and not isinstance(left, bool) and left > 0:  # only ever shown
            self.left_running.setdefault(where, min(left, 1 << 20))
        if reply.get("restart"):
            self._stale = True  # the next request gets a fresh worker (and scratch), without what this call left
            why = reply["restart"] if isinstance(reply["restart"], str) else "it left the worker unusable"
            self._restarted = f"the worker was restarted after {where} because {why[:200]}"  # said by the breaker too
        if not reply["ok"]:
            error = reply.get("error")
            if isinstance(error, dict) and error.get("type") == "NoSuchHandle":
                raise WorkerError(
                    f"this check could not go on: {self._restarted or 'the worker was restarted'}, "
                    f"and what the check had built before {where} was lost with it"
                )
            raise StudentError(error if isinstance(error, dict) else {"message": str(error)[:500]}, where)
        return reply

    def _unusable(self, where: str, stand_ins: bool, said: str) -> None:
        """The request answered (`said`: its error, if it raised) but left the worker unusable."""
        if self._stale and self.breaker and self._restarted:
            self.breaker.record(where, stand_ins, said + self._restarted, self.check)

    def request(
        self, op: str, where: str, timeout: float | None = None, keep_state: bool = False, **fields: Any
    ) -> dict:
        """One operation; raises StudentError when student code raised, WorkerError when the
        worker failed (then the rest of this check fails at once with the same reason), or at once
        when the breaker knows the method is broken.
        `keep_state`: stay in this worker even if the last call left processes running or filled
        its scratch: a notebook's cells share one namespace, and what one cell left behind can only
        touch that notebook's own later cells (the next request without it gets a fresh worker)."""
        if self._poison:
            raise WorkerError(self._poison)
        stand_ins = fields.get("handle") in self._swapped
        blocked = self.breaker.blocked(where, stand_ins) if self.breaker else None
        if blocked:
            raise WorkerError(blocked)
        began, starts = time.monotonic(), self.starts
        try:
            if self._stale and not keep_state:
                self.kill()  # never mid-import: the fds of a killed worker must not be written again
            self._ensure()
            if self.starts > max(starts, 1):  # a restart: paid for what went wrong before
                self.lost_s += time.monotonic() - began
            self.calls += 1
            try:
                reply = Reply.wrap(
                    self._exchange({"op": op, **fields}, timeout or self.limits.call_timeout_s, where), where
                )
            except StudentError as e:
                self._unusable(where, stand_ins, f"{e}; ")
                raise
            self._unusable(where, stand_ins, "")
        except WorkerError as e:
            if e.broke:
                self.lost_s += time.monotonic() - began
                if self.breaker:
                    self.breaker.record(where, stand_ins, str(e), self.check)
            self._poison = str(e)
            raise
        if op in ("build", "swap") and isinstance(fields.get("handle"), str):
            (self._swapped.add if op == "swap" else self._swapped.discard)(fields["handle"])
        return reply
