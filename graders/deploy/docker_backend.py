"""`grade batch --backend docker`: each submission graded in a container of the grading image
(docker/Dockerfile), through the Docker SDK for Python. The strong sandbox where bubblewrap does not
exist (a TA's macOS laptop): no network, memory, CPU and PID caps, a read-only root with a tmpfs
/tmp, the submission mounted read-only, a fresh results folder the only writable mount, every
capability dropped but the five the grader's uid drop needs, and the container removed afterwards.

Inside, the grader is root and runs student code as the sandbox uid, as on Gradescope. What comes
back is data only: results.json, read with a size cap and validated by `Results`, and the training
plot if it is a PNG; report.html is rendered here from the validated results, never taken as sent
(deploy/accept.py, shared with the Dask engine).
"""

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.deploy.accept import accept_results
from graders.deploy.refusal import refused
from graders.spec import Limits

SOURCE = "/autograder/source"
SUBMISSION = "/autograder/submission"
RESULTS = "/autograder/results"
PYTHON = "/opt/grader-venv/bin/python"
# chown: scratch to the sandbox uid; setuid/setgid: the drop; kill: that uid's processes;
# dac_override: read the submission and write results owned by the user on the host.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID")
LABEL = "transformer-grader"
MAX_LOG_BYTES = 200_000


class DockerUnavailable(Exception):
    """No Docker engine to talk to (or no SDK); the message says which and what to do."""


@dataclass(frozen=True)
class ContainerLimits:
    memory_mb: int
    cpus: float
    pids: int
    tmp_mb: int

    @classmethod
    def for_spec(cls, limits: Limits, cpus: float = 1.0, memory_mb: int | None = None) -> "ContainerLimits":
        # The worker's RLIMIT_AS, the trusted side's torch, and /tmp (a tmpfs counts as memory).
        tmp_mb = 4 * limits.scratch_mb
        return cls(
            memory_mb=memory_mb or limits.memory_mb + tmp_mb + 1024,
            cpus=cpus,
            pids=2 * limits.processes + 128,
            tmp_mb=tmp_mb,
        )


def container_kwargs(
    image: str, submission: Path, results: Path, assignment: str, limits: ContainerLimits, grade_args: list[str]
) -> dict[str, Any]:
    """The keyword arguments of `client.containers.run` for one grade (a pure function: the tests
    check every setting here, without an engine)."""
    from docker.types import Mount

    target = SUBMISSION + (".zip" if submission.is_file() else "")
    return dict(
        image=image,
        entrypoint=[PYTHON, "-m", "graders.cli"],
        command=[target, "--out", RESULTS, "--quiet", "--assignment", assignment, *grade_args],
        detach=True,
        user="0:0",  # root inside, so that student code runs as the sandbox uid; see CAPABILITIES
        environment={
            "GRADER_SANDBOX": "container",
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "PYTHONPATH": SOURCE,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        working_dir="/tmp",
        network_mode="none",
        network_disabled=True,
        read_only=True,
        tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"},
        mounts=[
            Mount(target=target, source=str(submission.resolve()), type="bind", read_only=True),
            Mount(target=RESULTS, source=str(results.resolve()), type="bind", read_only=False),
        ],
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",  # the same: no swap on top
        nano_cpus=int(limits.cpus * 1e9),
        pids_limit=limits.pids,
        cap_drop=["ALL"],
        cap_add=list(CAPABILITIES),
        security_opt=["no-new-privileges:true"],
        privileged=False,
        ipc_mode="private",
        init=True,  # reaps whatever the grader's own sweep leaves
        hostname="grader",
        labels={LABEL: "batch"},
    )


def connect() -> Any:
    """A client of a reachable engine, or DockerUnavailable saying why."""
    try:
        import docker
    except ImportError as e:
        raise DockerUnavailable(f"the Docker SDK for Python is not installed ({e}); run make install") from None
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as e:  # DockerException, a refused or missing socket: all mean "no engine here"
        raise DockerUnavailable(
            f"no Docker engine reachable ({type(e).__name__}: {str(e)[:300]}); start Docker or set DOCKER_HOST"
        ) from None
    return client


def grade_in_container(
    client: Any,
    image: str,
    source: Path,
    out: Path,
    assignment: str,
    limits: ContainerLimits,
    grade_args: list[str],
    timeout: float,
) -> str:
    """One submission in its own container: "graded", "grader error", or why there is no report.
    Never raises."""
    import requests

    out.mkdir(parents=True, exist_ok=True)
    # A fresh folder for the container to write, inside OUT (Docker Desktop shares the user's folders).
    staging = Path(tempfile.mkdtemp(prefix=".container-", dir=out.parent))
    container = None
    try:
        container = client.containers.run(**container_kwargs(image, source, staging, assignment, limits, grade_args))
        try:
            code = container.wait(timeout=timeout).get("StatusCode")
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return f"the container took longer than {timeout:g} s"
        finally:
            logs = container.logs(stdout=True, stderr=True)
            (out / "grade.log").write_bytes(logs[-MAX_LOG_BYTES:])
        refusal = refused(code, logs)
        if refusal:
            return refusal
        try:
            results = accept_results(staging, out)
        except (OSError, ValueError) as e:
            return f"the container (exit {code}) left no usable results.json: {str(e)[:300]}"
        return "graded" if code == 0 and results.grader_error is None else "grader error"
    except Exception as e:  # the engine's errors (image not found, API errors): this submission's outcome
        return f"could not run the container: {type(e).__name__}: {str(e)[:300]}"
    finally:
        if container is not None:
            try:
                container.remove(force=True)  # killed first if still running
            except Exception:
                pass
        shutil.rmtree(staging, ignore_errors=True)
