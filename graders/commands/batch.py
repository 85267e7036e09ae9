"""`grade batch FOLDER --out OUT`: the options, checked; the grading is deploy/batch.py's."""

import argparse
import functools
import sys
from pathlib import Path

from graders.commands import options, sandbox_gate
from graders.commands.overrides import with_limits
from graders.deploy import docker_backend
from graders.deploy.batch import Batch, GradeOne, grade_one, run_batch
from graders.deploy.dask_engine import DaskOptions, slurm_kwargs
from graders.deploy.docker_backend import DockerUnavailable
from graders.deploy.regrade import regrading
from graders.similarity.run import comparable
from graders.spec import Spec, SpecError, load_spec, spec_path


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade batch", description="Grade a folder of submissions (zips or folders).")
    parser.add_argument("input", type=Path, help="a folder with one zip or folder per student")
    parser.add_argument(
        "--out", type=Path, required=True, help="OUT/<student>/results.json, report.html; OUT/grades.csv"
    )
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once, each in its own process")
    parser.add_argument("--force", action="store_true", help="regrade submissions that already have a results.json")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ITEM",
        help="grade only this item again (repeatable) for every graded submission, merged into its results.json: "
        "the other items and the by-hand marks stay",
    )
    options.add_assignment(parser)
    options.add_limit(parser, "every grade")
    parser.add_argument(
        "--backend",
        "--engine",
        choices=("local", "docker", "dask"),
        default="local",
        help="local: a grade process each, sandboxed here; docker: a container each (--image); dask: a "
        "Dask task each, on --jobs worker processes here, a running cluster (--scheduler) or Slurm (--cluster)",
    )
    parser.add_argument("--image", help="the grading image (docker/README.md), with --backend docker")
    parser.add_argument("--cpus", type=float, default=1.0, help="CPUs per container (docker)")
    parser.add_argument("--memory-mb", type=int, help="memory cap per container (docker; default from the spec)")
    parser.add_argument(
        "--similarity",
        action="store_true",
        help="also compare the class's code: OUT/similarity.html and .csv, linked from summary.html",
    )
    sandbox_gate.add_option(parser)
    dask = parser.add_argument_group("--engine dask (README: Grading on a Dask cluster)")
    dask.add_argument("--scheduler", metavar="tcp://HOST:8786", help="a running Dask scheduler to send the tasks to")
    dask.add_argument("--cluster", choices=("slurm",), help="start Dask workers as Slurm jobs (dask_jobqueue)")
    dask.add_argument(
        "--cluster-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of --cluster slurm: queue, account, cores, processes, memory, walltime, python, "
        "job_script_prologue, job_extra_directives, local_directory, interface",
    )
    dask.add_argument(
        "--retries", type=int, default=2, help="re-runs of a submission whose Dask worker died while grading it"
    )
    return parser


def _check(args: argparse.Namespace) -> None:
    if not args.input.is_dir():
        raise ValueError(f"{args.input}: not a folder")
    if args.jobs < 1:
        raise ValueError("--jobs must be at least 1")
    if (args.backend == "docker") != bool(args.image):
        raise ValueError("--image goes with --backend docker, and --backend docker needs --image")
    if args.cpus <= 0 or (args.memory_mb is not None and args.memory_mb < 512):
        raise ValueError("--cpus must be positive and --memory-mb at least 512")
    if args.backend != "dask" and (args.scheduler or args.cluster or args.cluster_opt):
        raise ValueError("--scheduler, --cluster and --cluster-opt go with --engine dask")
    if args.scheduler and args.cluster:
        raise ValueError("--scheduler or --cluster, not both")
    if args.cluster_opt and not args.cluster:
        raise ValueError("--cluster-opt goes with --cluster slurm")
    if args.cluster:
        slurm_kwargs(args.cluster_opt)  # ValueError for a bad option: before any job is submitted
    if args.retries < 0:
        raise ValueError("--retries must be at least 0")
    if args.only and args.backend != "local":
        raise ValueError("--only goes with --backend local")


def _dask(args: argparse.Namespace) -> DaskOptions | None:
    if args.backend != "dask":
        return None
    return DaskOptions(args.scheduler, args.cluster, tuple(args.cluster_opt), args.retries)


def _grader(args: argparse.Namespace, spec: Spec) -> GradeOne:
    """How one submission is graded: a grade process here, or a container (DockerUnavailable without an engine)."""
    if args.only:
        spec.only(args.only)  # SpecError for an unknown item, before anything is graded
        return regrading(grade_one, tuple(args.only))
    if args.backend != "docker":
        return grade_one
    client = docker_backend.connect()
    limits = docker_backend.ContainerLimits.for_spec(spec.limits, args.cpus, args.memory_mb)
    return functools.partial(
        docker_backend.grade_in_container, client, args.image, assignment=args.assignment, limits=limits
    )


def _sandbox_limits(args: argparse.Namespace) -> list[str]:
    """--limit options with --sandbox; in a container of the grading image bwrap cannot run, and the
    container isolates the grade: level container there, unless the TA asked for minimal."""
    limits = sandbox_gate.as_limits(args)
    if args.backend == "docker":
        if args.sandbox == "full":
            raise ValueError("--backend docker grades at --sandbox container: bwrap cannot run in its containers")
        limits.append(f"sandbox={'minimal' if args.sandbox == 'minimal' else 'container'}")
    return limits


def _local_gate(args: argparse.Namespace, spec: Spec) -> int | None:
    """Where the grades run on this machine (local, a Dask LocalCluster), its sandbox is checked
    now; a cluster's workers are checked as the engine starts, a container checks its own."""
    if args.backend == "docker" or args.scheduler or args.cluster:
        return None
    return sandbox_gate.check(spec, "grade batch")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        args.limit = _sandbox_limits(args)
        spec = with_limits(load_spec(spec_path(args.assignment)), args.limit)
        _check(args)
        if args.similarity:
            comparable(spec)  # a written assignment has no code to compare: said before grading, not after
        grader = _grader(args, spec)
    except (SpecError, ValueError) as e:
        print(f"grade batch: {e}", file=sys.stderr)
        return 2
    except DockerUnavailable as e:
        print(f"grade batch --backend docker: {e}", file=sys.stderr)
        return 2
    refused = _local_gate(args, spec)
    if refused is not None:
        return refused
    return run_batch(
        Batch(
            input=args.input,
            out=args.out,
            spec=spec,
            assignment=args.assignment,
            jobs=args.jobs,
            force=args.force,
            limits=args.limit,
            backend=args.backend,
            cpus=args.cpus,
            grade_one=grader,
            similarity=args.similarity,
            dask=_dask(args),
            only=tuple(args.only),
        )
    )
