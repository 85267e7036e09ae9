"""Where the worker runs: layered isolation, chosen by what works on this machine.

Layers, each probed once per grading process and used only when it works here:
- `bwrap`: new mount, PID, IPC, UTS and network namespaces; only an allow-list is mounted (the
  Python install, its site-packages, the staged worker code read-only; the scratch folder
  read-write; a private /tmp). Nothing of reference/, the hidden checks or other submissions exists
  inside. Its PID namespace takes every descendant down with the worker.
- `uid`: when the grader is root, student code runs as a dedicated unprivileged uid (one per
  concurrent worker, so RLIMIT_NPROC, which counts per uid machine-wide, bites per submission and
  killing "every process of that uid" kills exactly that submission's).
- `cgroup`: a memory cap for the worker and everything it starts, and a pids cap (v1 or v2).
- `rlimits`: address space, CPU seconds, file size, open files, processes (set before exec).
- `reaper`: with no bwrap, cgroup or uid, the grader becomes its workers' subreaper, so a
  double-forked daemon comes back to it as a child and is killed.
- `seccomp`: a BPF deny-list the worker installs on itself (graders/execution/worker/seccomp.py): no
  internet sockets, ptrace, mounts, namespaces, keyrings, eBPF, io_uring.
- `landlock`: applied by the worker itself before student code runs: reads only the allow-list,
  writes only scratch, no TCP bind/connect, no signals or abstract sockets outside itself.

The layers in force are reported (e.g. "bwrap+uid+cgroup+rlimits+landlock"): a weaker sandbox
is never silent. GRADER_SANDBOX=plain turns every layer but rlimits off (for the benchmark);
GRADER_SANDBOX=container keeps only what a default Docker container allows (uid drop, rlimits,
Landlock, seccomp, the reaper), to test that fallback on a machine that has more.
"""

import fcntl
import functools
import os
import platform
import resource
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from graders.execution.worker import landlock
from graders.execution.worker.privileges import give_up_root
from graders.spec import Limits

UID_BASE, UID_SLOTS = 61000, 1000
# Every worker's namespaces: it dies with the grader, in a session, PID, network, IPC, UTS and
# cgroup namespaces of its own, with no capabilities (but the three a uid drop needs, added after).
BWRAP_ISOLATION = (
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--cap-drop",
    "ALL",
)
PROC_READ = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/sys")
# What the worker needs of root to give it up inside bwrap: the uid drop, and the bounding set emptied.
UID_DROP_CAPS = ("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP")


def _python_paths() -> list[str]:
    """What the worker's interpreter needs to read: its prefixes and site-packages."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages()}
    exe = Path(sys.executable)
    paths.add(str(exe.parent))
    paths.add(str(exe.resolve().parent.parent))
    return sorted(p for p in paths if Path(p).exists())


SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl",
    "/etc/fonts",
)


def _outermost(paths: list[str]) -> list[str]:
    """`paths` without those beneath another of them (mounted once, with the outer one)."""
    kept: list[str] = []
    for p in sorted(paths):
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept


@dataclass(frozen=True)
class Capabilities:
    bwrap: str | None
    uid: bool
    cgroup_v1: dict[str, Path] = field(default_factory=dict)
    cgroup_v2: Path | None = None
    landlock_abi: int = 0
    seccomp: bool = False  # the worker installs graders/execution/worker/seccomp.py's filter on itself
    reaper: bool = True  # may become the subreaper when nothing else can catch a daemon
    notes: tuple[str, ...] = ()
    why: dict[str, str] = field(default_factory=dict)  # layer -> why it is missing here (policy.py)


def _as_uid(uid: int):
    def drop() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    return drop


def _own_cgroup_dirs() -> tuple[dict[str, Path], Path | None]:
    v1: dict[str, Path] = {}
    v2: Path | None = None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            if c in ("memory", "pids") and Path(f"/sys/fs/cgroup/{c}").is_dir():
                v1[c] = Path(f"/sys/fs/cgroup/{c}") / path.lstrip("/")
        if controllers == "":
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            try:
                if {"memory", "pids"} <= set((base / "cgroup.subtree_control").read_text().split()):
                    v2 = base
            except OSError:
                pass
    return v1, v2


def _can_make(parent: Path) -> bool:
    probe = parent / f"grader-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


@functools.cache
def capabilities() -> Capabilities:
    """Probe each layer once (about 30 ms): what fails here is left out and said so."""
    mode = os.environ.get("GRADER_SANDBOX", "auto")
    if mode == "plain":
        off = dict.fromkeys(("bwrap", "uid", "cgroup", "landlock", "seccomp"), "GRADER_SANDBOX=plain leaves it out")
        return Capabilities(None, False, reaper=False, notes=("GRADER_SANDBOX=plain: only rlimits",), why=off)
    if mode not in ("auto", "container"):
        raise ValueError(f"GRADER_SANDBOX={mode}: expected auto, container or plain")
    why: dict[str, str] = {}
    if mode == "container":
        why["bwrap"] = why["cgroup"] = "GRADER_SANDBOX=container leaves it out, as in a default Docker container"
    root = os.geteuid() == 0
    bwrap = _probe_bwrap(root, why) if mode == "auto" else None
    can_uid = _probe_uid(root, bwrap, why)
    v1, v2 = _own_cgroup_dirs() if mode == "auto" else ({}, None)
    v1 = {c: d for c, d in v1.items() if _can_make(d)}
    v2 = v2 if v2 is not None and not v1 and _can_make(v2) else None
    if not v1 and v2 is None:
        why.setdefault("cgroup", "none can be created here")
    abi = landlock.abi_version()
    if abi < 1:
        why["landlock"] = "not in this kernel"
    seccomp = platform.machine() in ("x86_64", "aarch64")
    if not seccomp:
        why["seccomp"] = f"no seccomp filter for {platform.machine()}"
    notes = tuple(_note(layer, text) for layer, text in why.items())
    return Capabilities(bwrap, can_uid, v1, v2, abi, seccomp=seccomp, notes=notes, why=why)


def _note(layer: str, why: str) -> str:
    """A missing layer as the reports list it (results.json's sandbox_notes)."""
    return why if why.startswith("GRADER_SANDBOX") and layer == "bwrap" else f"no {layer}: {why}"


def _probe_bwrap(root: bool, why: dict[str, str]) -> str | None:
    """bwrap's path if it runs here as the worker will run it, else None (and why, in `why`)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        why["bwrap"] = "not installed (Debian: bubblewrap)"
        return None
    # As the worker will run it: as root, namespaces but no user namespace, then the uid drop.
    ns = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"] + ([] if root else ["--unshare-user"])
    check = "import os; os.setgroups([]); os.setgid(61999); os.setuid(61999)" if root else "pass"
    caps = list(UID_DROP_CAPS) if root else []
    p = subprocess.run(
        [
            bwrap,
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            *ns,
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            *caps,
            sys.executable,
            "-I",
            "-S",
            "-c",
            check,
        ],
        capture_output=True,
        timeout=60,
    )
    if p.returncode != 0:
        why["bwrap"] = f"unusable here: {p.stderr.decode(errors='replace').strip()[:200]}"
        return None
    return bwrap


def _probe_uid(root: bool, bwrap: str | None, why: dict[str, str]) -> bool:
    """Whether student code can run as a sandbox uid: as root, inside bwrap or where this Python
    is readable by an unprivileged uid."""
    if not root:
        why["uid"] = "the grader is not root (student code runs as its uid, without privileges)"
        return False
    if bwrap:
        return True
    drop = _as_uid(UID_BASE + UID_SLOTS - 1)  # a probe uid no worker uses
    try:
        p = subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], preexec_fn=drop, capture_output=True, timeout=60)
        can_uid = p.returncode == 0
    except OSError:  # EACCES from exec: e.g. a Python under root's 0700 home
        can_uid = False
    if not can_uid:
        why["uid"] = _unreadable_python()
    return can_uid


def _unreadable_python() -> str:
    """Why an unprivileged uid cannot run this Python: the first folder above it that such a uid
    cannot enter (a pyenv Python under root's 0700 home), where there is one."""
    real = Path(sys.executable).resolve()
    shown = sys.executable if str(real) == sys.executable else f"{sys.executable} -> {real}"
    for parent in reversed(real.parents):
        try:
            mode = parent.stat().st_mode
        except OSError:
            continue
        if not mode & stat.S_IXOTH:
            return (
                f"this Python ({shown}) lies under {parent} (mode {stat.S_IMODE(mode):04o}), "
                "which an unprivileged uid cannot enter"
            )
    return f"this Python ({shown}) cannot be run by an unprivileged uid"


# Where graders before 0.2 lock their uid slots (a file each, flock'd): honoured where it exists, so
# that two versions grading on one machine never share a uid (each would kill the other's workers).
_LEGACY_LOCKS = Path(tempfile.gettempdir()) / "transformer-grader-uids"


class UidSlot:
    """A uid no other worker on this machine holds, until release: the slot is an abstract Unix
    socket's name (bound by one process at a time, gone with it, no file left anywhere)."""

    def __init__(self) -> None:
        start = os.getpid() % (UID_SLOTS - 1)
        for i in range(UID_SLOTS - 1):
            slot = (start + i) % (UID_SLOTS - 1)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.bind(f"\0transformer-grader-uid-{UID_BASE + slot}")
            except OSError:  # EADDRINUSE: another worker's
                sock.close()
                continue
            legacy = _legacy_lock(slot)
            if legacy == -1:
                sock.close()
                continue
            self.uid, self._sock, self._legacy = UID_BASE + slot, sock, legacy
            return
        raise RuntimeError("every sandbox uid is in use")

    def release(self) -> None:
        self._sock.close()
        if self._legacy is not None:
            os.close(self._legacy)


def _legacy_lock(slot: int) -> int | None:
    """The older graders' lock of `slot`, taken (its fd), -1 if one of them holds it, None where
    none has run here (nothing is created then)."""
    if not _LEGACY_LOCKS.is_dir():
        return None
    try:
        fd = os.open(_LEGACY_LOCKS / str(slot), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return -1
    return fd


def kill_until_gone(find: Callable[[], list[int]]) -> None:
    """SIGKILL what `find` returns until it returns nothing: one that forked while being killed,
    or whose children come to us, is caught in a later round."""
    for _ in range(50):
        pids = find()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # gone already
                pass
        time.sleep(0.02)


def _processes() -> Iterator[tuple[int, str, int]]:
    """(pid, state, parent pid) of every process in /proc (state "Z": a zombie)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(entry.name), fields[0], int(fields[1])


def _descendants(pid: int) -> list[int]:
    """Every live process below `pid`, by parent links in /proc (workers in sessions of their
    own included)."""
    children: dict[int, list[int]] = {}
    for child, state, parent in _processes():
        if state != "Z":
            children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and everything below it. It is stopped first, so it neither starts more
    nor dies before its children are found (an orphan would leave the tree for init)."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except OSError:
        return
    kill_until_gone(functools.partial(_descendants, pid))
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _pids_of_uid(uid: int) -> list[int]:
    """Every process of `uid` (a daemon that left the process group included)."""
    pids = []
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def _cgroup_pids(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except OSError:
        return []


_PR_SET_CHILD_SUBREAPER = 36
_workers: set[int] = set()  # pids of the live workers this process started (never swept)


@functools.cache
def become_reaper() -> bool:
    """Make this process the subreaper of its descendants: a worker's orphans (a double-forked
    daemon) are then re-parented to us, not to init, and the sweep finds them as our children.
    The last wall when there is no PID namespace, cgroup or uid to kill by."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def orphans() -> list[int]:
    """Our children that are not live workers (reaping those already dead: what a killed one
    leaves comes to us in turn)."""
    me, pids = os.getpid(), []
    for pid, state, parent in _processes():
        if parent != me or pid in _workers:
            continue
        if state != "Z":
            pids.append(pid)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return pids


class Sandbox:
    """One worker's sandbox: its uid, cgroups and the command that starts it inside them."""

    def __init__(self, scratch: Path, stage: Path, limits: Limits) -> None:
        self.caps, self.scratch, self.stage, self.limits = capabilities(), scratch, stage, limits
        self.slot = UidSlot() if self.caps.uid else None
        self.cgroups: list[Path] = []
        name = f"grader-{os.getpid()}-{id(self):x}"
        try:
            if self.caps.cgroup_v1:
                for controller, parent in self.caps.cgroup_v1.items():
                    d = parent / name
                    d.mkdir()
                    self.cgroups.append(d)
                    self._set_limit(controller, d)
            elif self.caps.cgroup_v2 is not None:
                d = self.caps.cgroup_v2 / name
                d.mkdir()
                self.cgroups.append(d)
                (d / "memory.max").write_text(str(self._memory_bytes()))
                (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(limits.processes))
        except OSError:
            self._remove_cgroups()
        if self.slot is not None:
            for path in (scratch, *scratch.rglob("*")):
                os.lchown(path, self.slot.uid, self.slot.uid)
        # Nothing else would catch a daemon that left the process group.
        self.reaper = (
            self.caps.reaper and not self.caps.bwrap and not self.cgroups and self.slot is None and become_reaper()
        )

    def started(self, pid: int) -> None:
        _workers.add(pid)

    def ended(self, pid: int) -> None:
        _workers.discard(pid)

    def _memory_bytes(self) -> int:
        return (self.limits.memory_mb + 256) << 20  # the worker's own cap is RLIMIT_AS; this one covers children

    def _set_limit(self, controller: str, d: Path) -> None:
        if controller == "memory":
            (d / "memory.limit_in_bytes").write_text(str(self._memory_bytes()))
            try:
                (d / "memory.memsw.limit_in_bytes").write_text(str(self._memory_bytes()))
            except OSError:
                pass  # no swap accounting on this kernel
        else:
            (d / "pids.max").write_text(str(self.limits.processes))

    @property
    def layers(self) -> str:
        names = []
        if self.caps.bwrap:
            names.append("bwrap")
        if self.slot is not None:
            names.append("uid")
        if self.cgroups:
            names.append("cgroup")
        names.append("rlimits")
        if self.reaper:
            names.append("reaper")
        if self.caps.landlock_abi >= 1:
            names.append("landlock")
        if self.caps.seccomp:
            names.append("seccomp")
        return "+".join(names)

    def read_paths(self) -> list[str]:
        return sorted({*_python_paths(), str(self.stage), *(p for p in SYSTEM_READ if os.path.exists(p))})

    @property
    def worker_uid(self) -> int | None:
        """The uid the worker drops to itself, first thing (inside bwrap, which runs as root here
        so that it can mount root-only paths such as a Python under /root)."""
        return self.slot.uid if self.slot is not None and self.caps.bwrap else None

    def command(self, argv: list[str], info_fd: int | None = None) -> list[str]:
        """`argv` inside bwrap; `info_fd`: where bwrap writes the host pid of what it started."""
        if not self.caps.bwrap:
            return argv
        cmd = [self.caps.bwrap, *BWRAP_ISOLATION]
        if info_fd is not None:
            cmd += ["--info-fd", str(info_fd)]
        if self.worker_uid is not None:
            cmd += list(UID_DROP_CAPS)  # for the drop; gone after it
        else:
            cmd += ["--unshare-user"]
        size = str(self.limits.scratch_mb << 20)
        cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        cmd += ["--dir", "/var/tmp", "--hostname", "sandbox"]
        return cmd + self._read_only_mounts() + self._scratch_mounts(size) + ["--", *argv]

    def _read_only_mounts(self) -> list[str]:
        """The allow-list, read-only, and the folders above it and scratch."""
        cmd: list[str] = []
        made: set[str] = set()
        for path in _outermost(self.read_paths()) + [str(self.scratch)]:
            # Parents made 0755 inside (bwrap would copy e.g. /root's 0700, which the uid cannot pass).
            for parent in reversed(Path(path).parents[:-1]):
                if str(parent) not in made and str(parent) != "/tmp":
                    made.add(str(parent))
                    cmd += ["--perms", "0755", "--dir", str(parent)]
            if path != str(self.scratch):
                cmd += ["--ro-bind", path, path]
        return cmd

    def _scratch_mounts(self, size: str) -> list[str]:
        """Scratch is a sized tmpfs, so a disk bomb fills it and not the grader's disk; the
        submission's files are bound into it read-only. What the trusted side needs back comes
        over the reply pipe."""
        scratch = str(self.scratch)
        cmd = ["--perms", "0777", "--size", size, "--tmpfs", scratch]
        for entry in sorted(self.scratch.iterdir()):
            inside = f"{scratch}/{entry.name}"
            if entry.is_dir() and not entry.is_symlink():
                cmd += ["--perms", "1777", "--dir", inside]
            elif entry.is_file() and not entry.is_symlink():
                cmd += ["--ro-bind", str(entry), inside]
        return cmd + ["--chdir", scratch]

    @property
    def cgroup_procs(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.cgroups]

    def rlimits(self) -> dict[str, tuple[int, int]]:
        """The worker's rlimits by resource name, (soft, hard)."""
        limits, cpu = self.limits, int(self.limits.cpu_s)
        out = {
            "RLIMIT_FSIZE": (limits.file_size_mb << 20,) * 2,
            "RLIMIT_NOFILE": (limits.open_files,) * 2,
            "RLIMIT_CORE": (0, 0),
            "RLIMIT_CPU": (cpu, cpu + 5),  # SIGXCPU first, then SIGKILL
        }
        if self.slot is not None:  # counted per real uid: only meaningful for the sandbox uid, set before the drop
            out["RLIMIT_NPROC"] = (limits.processes,) * 2
        return out

    def preexec(self):
        """Run in the child between fork and exec: join the cgroups, set rlimits, and without bwrap
        give up root here (the sandbox uid, or no capability at all) and set no_new_privs. In bwrap
        the worker gives up root itself, first thing (worker/main.py)."""
        procs, rlimits, bwrap = self.cgroup_procs, self.rlimits(), bool(self.caps.bwrap)
        uid = self.slot.uid if self.slot is not None and not bwrap else None

        def enter() -> None:
            for path in procs:
                with open(path, "w") as fh:
                    fh.write(str(os.getpid()))
            for name, value in rlimits.items():
                resource.setrlimit(getattr(resource, name), value)
            if not bwrap:
                give_up_root(uid)

        return enter

    def landlock_rules(self) -> dict:
        """What the worker may touch once it locks itself in (passed to it; it applies them)."""
        # Of /proc only the worker's own entry (the worker resolves /proc/self when it locks itself
        # in) and a few machine-wide files: as the grader's own uid (a laptop, no bwrap) all of /proc
        # would show the grader's environment and command line.
        return {
            "read": self.read_paths() + ["/dev", "/sys", "/proc/self", *PROC_READ],
            "write": [str(self.scratch), "/dev/null"],
        }

    def sweep(self) -> None:
        """Kill whatever is left of this worker: the cgroup's members and every process of its uid."""
        for d in self.cgroups:
            kill = d / "cgroup.kill"
            if kill.exists():
                try:
                    kill.write_text("1")
                except OSError:
                    pass
            kill_until_gone(functools.partial(_cgroup_pids, d))
        if self.slot is not None:
            kill_until_gone(functools.partial(_pids_of_uid, self.slot.uid))
        if self.reaper:
            kill_until_gone(orphans)

    def _remove_cgroups(self) -> None:
        for d in self.cgroups:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.cgroups = []

    def close(self) -> None:
        self.sweep()
        self._remove_cgroups()
        if self.slot is not None:
            self.slot.release()
            self.slot = None
