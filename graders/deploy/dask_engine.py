"""`grade batch --engine dask`: one Dask task per submission (deploy/dask_task.py), on an embedded
LocalCluster of worker processes, a running cluster (--scheduler), or Slurm nodes (--cluster slurm).

The submission's bytes travel with its task; what comes back is plain data, written into a staging
folder and taken in by deploy/accept.py as the Docker backend's containers are. A worker that dies
mid-grade has its task re-run elsewhere by the scheduler, at most `retries` times; after that the
submission gets a 'could not run grade' report, not the batch a crash."""

import io
import logging
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.deploy.accept import accept_results
from graders.deploy.refusal import BatchRefused, refused
from graders.intake.submission import MAX_ZIP_BYTES

MAX_LOG_BYTES = 200_000
# --cluster-opt KEY=VALUE of --cluster slurm: dask_jobqueue.SLURMCluster's keyword, and its type
# (list: the option may be repeated, one line each).
SLURM_OPTIONS: dict[str, type] = {
    "queue": str,
    "account": str,
    "cores": int,
    "processes": int,
    "memory": str,
    "walltime": str,
    "python": str,
    "job_script_prologue": list,
    "job_extra_directives": list,
    "local_directory": str,
    "interface": str,
}


@dataclass(frozen=True)
class DaskOptions:
    """Where the tasks go: `scheduler` (an address), or `cluster` ("slurm" with `cluster_opts`),
    or neither (a LocalCluster here); how often a submission whose worker died is re-run."""

    scheduler: str | None = None
    cluster: str | None = None
    cluster_opts: tuple[str, ...] = ()
    retries: int = 2


def slurm_kwargs(cluster_opts: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """SLURMCluster's keywords from KEY=VALUE strings; ValueError for an unknown key or a bad value.
    `processes` defaults to `cores`: a grade is one thread, so each core is a worker of its own."""
    kwargs: dict[str, Any] = {}
    for option in cluster_opts:
        key, sep, value = option.partition("=")
        kind = SLURM_OPTIONS.get(key.strip())
        if not sep or kind is None:
            raise ValueError(f"--cluster-opt {option!r}: expected KEY=VALUE, KEY one of {', '.join(SLURM_OPTIONS)}")
        if kind is list:
            kwargs.setdefault(key.strip(), []).append(value)
        else:
            try:
                kwargs[key.strip()] = kind(value)
            except ValueError:
                raise ValueError(f"--cluster-opt {key}: {value!r} is not a number") from None
    missing = [k for k in ("cores", "memory") if k not in kwargs]
    if missing:
        raise ValueError(f"--cluster slurm needs --cluster-opt {'=... and '.join(missing)}=...")
    kwargs.setdefault("processes", kwargs["cores"])
    return kwargs


def slurm_cluster(cluster_opts: tuple[str, ...] | list[str]) -> Any:
    """A dask_jobqueue.SLURMCluster (its scheduler runs here; no job is submitted before scale())."""
    from dask_jobqueue import SLURMCluster

    kwargs = slurm_kwargs(cluster_opts)
    # Workers that may have children: a grade is forked from a warm process (deploy/dask_task.py).
    kwargs["job_script_prologue"] = [
        "export DASK_DISTRIBUTED__WORKER__DAEMON=False",
        *kwargs.get("job_script_prologue", []),
    ]
    return SLURMCluster(**kwargs, scheduler_options={"dashboard_address": ":0"})


def submission_bytes(source: Path) -> tuple[bytes, bool]:
    """(the bytes to send, whether they are a folder zipped here). A folder is zipped in memory,
    its plain files under their relative paths, at most the intake's MAX_ZIP_BYTES in all."""
    if not source.is_dir():
        if source.stat().st_size > MAX_ZIP_BYTES:
            raise ValueError(f"{source.name} is over {MAX_ZIP_BYTES} bytes: not sent to a Dask worker")
        return source.read_bytes(), False
    buffer, total = io.BytesIO(), 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in source.rglob("*") if p.is_file() and not p.is_symlink()):
            total += path.stat().st_size
            if total > MAX_ZIP_BYTES:
                raise ValueError(f"{source.name}/ holds over {MAX_ZIP_BYTES} bytes: not sent to a Dask worker")
            z.write(path, path.relative_to(source).as_posix())
    return buffer.getvalue(), True


@dataclass
class DaskEngine:
    client: Any
    cluster: Any | None  # None: a running cluster's scheduler, not ours to close
    retries: int
    kind: str
    most_workers: int = 0

    @classmethod
    def start(cls, jobs: int, options: DaskOptions) -> "DaskEngine":
        """Connect to the scheduler, or start the cluster (`jobs` workers); print the dashboard's link."""
        import dask
        from distributed import Client, LocalCluster

        # The scheduler of a LocalCluster or a SLURMCluster runs in this process and reads it when
        # it starts (a running one is told in _allow_failures).
        # Workers that may have children: a grade is forked from a warm process (deploy/dask_task.py).
        settings = {"distributed.scheduler.allowed-failures": options.retries, "distributed.worker.daemon": False}
        with dask.config.set(settings):
            if options.scheduler:
                cluster, kind = None, f"scheduler {options.scheduler}"
                client = Client(options.scheduler, timeout=30)
            elif options.cluster == "slurm":
                cluster, kind = slurm_cluster(options.cluster_opts), "SLURMCluster"
                cluster.scale(jobs)
                client = Client(cluster)
            else:
                cluster, kind = _local_cluster(LocalCluster, jobs), "LocalCluster"
                client = Client(cluster)
        engine = cls(client, cluster, options.retries, kind)
        engine._allow_failures(options.retries)
        print(f"dask: {kind}, dashboard {client.dashboard_link}", flush=True)
        return engine

    def _allow_failures(self, retries: int) -> None:
        """A running scheduler too re-runs a task whose worker died at most `retries` times."""

        def allow(dask_scheduler: Any) -> None:  # pickled by value: the scheduler need not import graders
            dask_scheduler.allowed_failures = retries

        self.client.run_on_scheduler(allow)

    def check_sandbox(self, level: str) -> None:
        """Every worker up now can give the sandbox `level`, or BatchRefused naming the first that
        cannot (a worker that joins later refuses its first task, which stops the batch the same way)."""
        from graders.execution.policy import refusal_here

        for address, why in sorted(self.client.run(refusal_here, level).items()):
            if why:
                raise BatchRefused(f"the Dask worker {address}: {why}")

    def describe(self) -> str:
        """Which engine, and how many workers it had at most: for the class summary."""
        return f"Dask ({self.kind}), {self.most_workers} worker{'s' if self.most_workers != 1 else ''}"

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def grade(
        self, todo: dict[str, Path], out: Path, grade_args: list[str], timeout: float, bar: Any
    ) -> Iterator[tuple[str, str]]:
        """Each submission of `todo` as a task; (student, outcome) as each finishes, in the words of
        deploy/batch.py's grade_one ("graded", "grader error", or why there is no report).

        No more tasks are out than the cluster has threads: a worker that dies takes only the
        grade it was running along (the scheduler counts every task assigned to it as a death)."""
        from distributed import wait

        waiting = list(todo.items())
        pending: dict[Any, str] = {}  # future: student
        while waiting or pending:
            while waiting and len(pending) < max(1, sum(self.client.nthreads().values())):
                student, source = waiting.pop(0)
                try:
                    pending[self._submit(source, grade_args, timeout)] = student
                except (OSError, ValueError) as e:
                    yield student, f"could not run grade: {e}"
            self._progress(bar, {f.key for f in pending})
            try:
                done = wait(list(pending), timeout=1, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                continue
            for future in done:
                student = pending.pop(future)
                yield student, self._outcome(future, out / student, timeout)
                future.release()

    def _submit(self, source: Path, grade_args: list[str], timeout: float) -> Any:
        """The task of one submission, its bytes with it."""
        from graders.deploy.dask_task import grade_payload

        data, is_folder = submission_bytes(source)
        key = f"grade-{uuid.uuid4().hex}"  # unique: a rerun or a second batch is never a cached result
        return self.client.submit(grade_payload, source.name, data, is_folder, grade_args, timeout, key=key, pure=False)

    def _progress(self, bar: Any, keys: set[str]) -> None:
        processing = self.client.processing()
        running = sum(1 for tasks in processing.values() for k in tasks if k in keys)
        self.most_workers = max(self.most_workers, len(processing))
        bar.set_postfix_str(f"{running} running on {len(processing)} workers", refresh=True)

    def _outcome(self, future: Any, dest: Path, timeout: float) -> str:
        """A finished task's files taken in: "graded", "grader error" or why there is no report."""
        from distributed import KilledWorker

        try:
            payload = future.result()
        except KilledWorker:
            return (
                f"could not run grade: its Dask worker died every time ({self.retries + 1} tries); "
                "see the workers' logs (memory? the machine?)"
            )
        except Exception as e:  # the task raised on the worker's machine: this submission's outcome
            return f"could not run grade on a Dask worker: {type(e).__name__}: {str(e)[:300]}"
        return store(payload, dest, timeout)


def _local_cluster(local_cluster: Any, jobs: int) -> Any:
    """`jobs` worker processes of one thread here (processes: a grade's Python work holds the GIL)."""
    return local_cluster(
        n_workers=jobs, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR
    )


def store(payload: Any, dest: Path, timeout: float) -> str:
    """What a task sent back, written as the local backend would: grade.log, then results.json and
    the plot through accept_results (validated), report.html rendered here."""
    if not isinstance(payload, dict) or not isinstance(payload.get("files"), dict):
        return "could not run grade: a Dask worker sent back no grade"
    dest.mkdir(parents=True, exist_ok=True)
    log = payload.get("log")
    (dest / "grade.log").write_bytes(log[-MAX_LOG_BYTES:] if isinstance(log, bytes) else b"")
    returncode = payload.get("returncode")
    if returncode is None:
        return f"grade took longer than {timeout:g} s"
    refusal = refused(returncode, log if isinstance(log, bytes) else b"")
    if refusal and "results.json" not in payload["files"]:
        return refusal
    if "results.json" not in payload["files"]:
        return f"grade exited {returncode} without a report"
    staging = Path(tempfile.mkdtemp(prefix="dask-staging-"))
    try:
        for name, data in payload["files"].items():
            if (
                isinstance(name, str)
                and isinstance(data, bytes)
                and name == Path(name).name
                and name not in ("", ".", "..")
            ):
                (staging / name).write_bytes(data)
        try:
            accept_results(staging, dest)
        except (OSError, ValueError) as e:
            return f"grade exited {returncode} and left no usable results.json: {str(e)[:300]}"
        return "graded" if returncode == 0 else "grader error"
    finally:
        shutil.rmtree(staging, ignore_errors=True)
