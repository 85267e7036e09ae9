"""The trusted side's handle on the warm worker zygote (graders/execution/worker/zygote.py).

Where workers run in bwrap as root with a uid of their own (the grading image, CI), one zygote per
`grade` process imports torch once, and each worker start forks it into the sandbox that bwrap set
up for that worker (a "holder": the same command a spawned worker runs in, with `sleep` instead of
Python). A worker start then costs milliseconds of CPU instead of a torch import (1.1 CPU-s).
Anywhere else, or if the zygote fails, workers are spawned as before. GRADER_ZYGOTE=0 turns it off.
"""

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from graders.execution.sandbox import Sandbox, capabilities

WORKER_PACKAGE = Path(__file__).resolve().parent / "worker"
# `-I -S`: as a spawned worker (graders/execution/client.py's _BOOT): only the staged worker code
# and the site-packages we name are importable.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(2)); sys.path += sys.argv.pop(2).split(':'); "
    "from gradeworker.zygote import serve; serve(int(sys.argv[1]))"
)


def stage_worker_code() -> Path:
    """A private copy of the worker package, readable by the sandbox uids (the installed grader's
    modes may be root-only), in a new folder: what workers import their code from."""
    stage = Path(tempfile.mkdtemp(prefix="grade-worker-"))
    shutil.copytree(WORKER_PACKAGE, stage / "gradeworker", ignore=shutil.ignore_patterns("__pycache__"))
    for path in (stage, *stage.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return stage


class Forked:
    """What a Worker uses of Popen, for a worker forked into a holder: `pid` is the holder's bwrap
    (killing its group ends the sandbox's PID namespace, the worker with it); `wait` gives the
    worker's status as bwrap's exit code gives a spawned worker's."""

    def __init__(self, holder: subprocess.Popen, status_fd: int):
        self.holder, self._status = holder, status_fd
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        return self.holder.pid

    def wait(self, timeout: float | None = None) -> int:
        """The worker's status; without `timeout` (after Worker.kill), the holder reaped too."""
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("worker", timeout or 0)
            data = os.read(self._status, 64)
            os.close(self._status)
            # Nothing said: the child that waits for the worker was killed with it.
            self.returncode = int(data) if data.strip().isdigit() else 128 + signal.SIGKILL
        if timeout is None:
            self.holder.wait()
        return self.returncode


class Zygote:
    """One zygote process and the socket to it."""

    def __init__(self, env: dict[str, str], site_packages: str):
        self.serves = (env, site_packages)  # the workers it can fork: their environment and site-packages
        # Processes forked from the owner (a batch's fork server: deploy/shared_zygote.py) share the
        # zygote; only the owner may stop it or remove its code.
        self.owner = os.getpid()
        self.stage = stage_worker_code()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", "-c", _BOOT, str(theirs.fileno()), str(self.stage), site_packages],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            # The grade's own stderr (its log in a batch): what the zygote or a fork of it says before
            # its worker's pipes are in place. It never runs student code, whose output has pipes of its own.
            stderr=None,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
        theirs.close()
        self.sock = ours

    def fork(self, request: dict, fds: list[int]) -> None:
        """Ask for a worker and return at once: the first waits for the zygote's torch import, which
        the caller overlaps with its own. OSError if the zygote is gone."""
        # Only the owner can poll its child; a send to a zygote that is gone fails anyway (EPIPE).
        if self.owner == os.getpid() and self.proc.poll() is not None:
            raise OSError("the zygote is gone")
        socket.send_fds(self.sock, [json.dumps(request).encode()], fds)

    def close(self) -> None:
        """Close this process's end of the socket; the owner also stops the zygote."""
        self.sock.close()
        if self.owner != os.getpid():
            return
        try:
            self.proc.kill()
            self.proc.wait()
        except OSError:
            pass


_zygote: Zygote | None = None
_failed = False
# Zygotes' copies of the worker code, by the pid that made them, which alone removes them (at
# exit): workers of a zygote that failed spawn from them until then.
_stages: dict[Path, int] = {}


def is_zygote_stage(path: Path) -> bool:
    return path in _stages


def shutdown() -> None:
    """Stop this process's zygote and remove its copies of the worker code (at exit); a zygote and
    code inherited from a fork server stay, the server's to remove."""
    global _zygote
    if _zygote is not None:
        _zygote.close()
        _zygote = None
    for stage in [s for s, pid in _stages.items() if pid == os.getpid()]:
        shutil.rmtree(stage, ignore_errors=True)
        del _stages[stage]


def zygote(env: dict[str, str], site_packages: str) -> Zygote | None:
    """This process's zygote for workers with `env`, started on first use, where it can serve:
    bwrap as root with a uid for each worker. None elsewhere, and after it failed once."""
    global _zygote
    caps = capabilities()
    usable = caps.bwrap and caps.uid and os.geteuid() == 0 and os.environ.get("GRADER_ZYGOTE", "1") != "0"
    if _failed or not usable:
        return None
    if _zygote is not None and _zygote.serves != (env, site_packages):
        _zygote.close()  # a fork server's, for other workers: this process starts its own
        _zygote = None
    if _zygote is None:
        _zygote = Zygote(env, site_packages)
        if not _stages:
            atexit.register(shutdown)
        _stages[_zygote.stage] = os.getpid()
    return _zygote


def warm(env: dict[str, str], site_packages: str) -> None:
    """Start the zygote for workers with `env` now, where one can serve, for the processes forked
    from this one to share; if it cannot start, each of them starts its own as usual."""
    try:
        zygote(env, site_packages)
    except OSError:
        pass


def give_up(z: Zygote) -> None:
    """The zygote failed: spawn workers from now on."""
    global _zygote, _failed
    _failed, _zygote = True, None
    z.close()


def start_forked(z: Zygote, sandbox: Sandbox, request: dict, fds: list[int], env: dict[str, str]) -> Forked:
    """A holder for `sandbox`, then the worker forked into it with the pipes `fds` (request read
    end, reply write end, stdout, stderr)."""
    info_r, info_w = os.pipe()
    ready_r, ready_w = os.pipe()
    status_r, status_w = os.pipe()
    # The holder says "ready" once bwrap has run it, so after every mount: bwrap tells the pid
    # on --info-fd before its child has set the sandbox up.
    holder = subprocess.Popen(
        sandbox.command(["sh", "-c", "echo ready; exec sleep infinity"], info_fd=info_w),
        cwd=sandbox.scratch,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=ready_w,
        stderr=None,  # bwrap's own complaints, into the grade's log
        pass_fds=(info_w,),
        start_new_session=True,
        close_fds=True,
        preexec_fn=sandbox.preexec(),
    )
    for fd in (info_w, ready_w):
        os.close(fd)
    try:
        if _read_until(ready_r, lambda data: data == b"ready\n") != b"ready\n":
            raise OSError("the holder did not start")
        info = json.loads(_read_until(info_r, _is_json))
        z.fork({**request, "holder": int(info["child-pid"])}, [*fds, status_w])
    except (OSError, ValueError, KeyError):
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        os.close(status_r)
        raise
    finally:
        for fd in (info_r, ready_r, status_w):
            os.close(fd)
    return Forked(holder, status_r)


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


def _read_until(fd: int, done, timeout: float = 60) -> bytes:
    """What `fd` gives until `done(data)`, EOF or `timeout` s."""
    data, deadline = b"", time.monotonic() + timeout
    while not done(data):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data
