"""`grade`: the command course staff run."""

import argparse
import csv
import functools
import os
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from pydantic import ValidationError

from graders import __version__
from graders.deploy import docker_backend, forked_grades
from graders.deploy.docker_backend import DockerUnavailable
from graders.reports.gradescope import write_gradescope
from graders.reports.html import write_report
from graders.scoring.results import Results, Submission
from graders.execution.sandbox import kill_tree
from graders.spec import Spec, SpecError, assignment_dir, load_spec, spec_path
from graders.reports.summary import write_summary


def _table(results: Results) -> str:
    rows = [("item", "points", "max", "")]
    for item in results.items:
        if item.max_score == 0 and item.status == "passed":
            reason = "ok"
        else:
            reason = "" if item.status == "passed" else item.feedback
        rows.append((item.id, f"{item.score:g}" if not item.status == "manual" else "-", f"{item.max_score:g}",
                     (reason[:110] + "…") if len(reason) > 111 else reason))
    manual = any(i.status == "manual" and i.bonus for i in results.items)
    bonus = f"bonus {results.bonus_score:g}/{results.bonus_max:g}" + (" (graded by hand)" if manual else "")
    rows.append(("total", f"{results.score:g}", f"{results.max_score:g}", bonus if results.bonus_max else ""))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]:>{width[2]}}  {r[3]}" for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    for item in results.items:  # the first known mistake of each item, in full: it says what to fix
        diagnosis = next((c.diagnosis for c in item.checks if c.diagnosis), None)
        if diagnosis:
            lines.append(f"{item.id} diagnosis: {diagnosis.explanation}")
    return "\n".join(lines)


def fallback_results(source: Path, spec: Spec, reason: str) -> Results:
    return Results(assignment=spec.assignment, grader_version=__version__,
                   submission=Submission(name=source.name, sha256="", files=[]), score=0,
                   max_score=spec.points(), bonus_score=0, bonus_max=spec.points(bonus=True), items=[],
                   grader_error=reason)


def _write(results: Results, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(results.model_dump_json(indent=2) + "\n")
    return path


def _with_limits(spec: Spec, overrides: list[str]) -> Spec:
    """`--limit NAME=VALUE` is `--set limits.NAME=VALUE`."""
    return _with_settings(spec, [f"limits.{text}" for text in overrides], flag="--limit")


def _with_settings(spec: Spec, overrides: list[str], flag: str = "--set") -> Spec:
    """The spec with SECTION.NAME=VALUE settings replaced, validated as the spec file would be."""
    data = spec.model_dump()
    shown = [o.removeprefix("limits.") if flag == "--limit" else o for o in overrides]  # as typed
    for text, typed in zip(overrides, shown):
        path, _, value = text.partition("=")
        *parents, name = path.split(".")
        section = data
        for key in parents:
            section = section.get(key) if isinstance(section, dict) else None
        if not parents or not isinstance(section, dict) or name not in section or isinstance(section[name], (dict, list)) \
                or not value:
            names = "one of " + ", ".join(k for k, v in section.items() if not isinstance(v, (dict, list))) \
                if isinstance(section, dict) and parents else "e.g. hypothesis.max_examples or training.max_steps"
            raise ValueError(f"{flag} {typed}: expected NAME=VALUE with NAME {names}")
        section[name] = value
    try:
        return type(spec).model_validate(data)
    except ValidationError as e:
        why = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ValueError(f"{flag} {', '.join(shown)}: {why}") from None


def _report_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="grade report", description="Re-render report.html from a stored results.json.")
    parser.add_argument("results", type=Path, help="a results.json that grade wrote")
    parser.add_argument("--out", type=Path, help="the HTML file to write (default: report.html beside results.json)")
    args = parser.parse_args(argv)
    try:
        results = Results.model_validate_json(args.results.read_bytes())
    except (OSError, ValueError) as e:
        print(f"grade report: {args.results}: {e}", file=sys.stderr)
        return 2
    print(f"report: {write_report(results, args.results.parent, args.out)}")
    return 0


def _students(folder: Path) -> dict[str, Path]:
    """One submission per zip or folder in `folder` (a Gradescope export's submission_<id>/ folders
    included), by student name: the zip's stem or the folder's name; dotfiles and other files skipped."""
    found: dict[str, Path] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir() or (entry.is_file() and entry.suffix.lower() == ".zip"):
            name = entry.stem if entry.is_file() else entry.name
            found[entry.name if name in found else name] = entry
    return found


def _grade_one(source: Path, out: Path, grade_args: list[str], timeout: float) -> str:
    """Grade one submission in its own `grade` process, as single mode does; never raises. The
    process is forked from a warm one where the platform has a fork server (forked_grades)."""
    argv = [str(source), "--out", str(out), "--quiet", *grade_args]
    log = out / "grade.log"
    try:
        out.mkdir(parents=True, exist_ok=True)
        if forked_grades.available():
            returncode = forked_grades.grade_forked(argv, log, timeout)
        else:
            with open(log, "wb") as fh:
                proc = subprocess.Popen([sys.executable, "-m", "graders.cli", *argv], stdout=fh,
                                        stderr=subprocess.STDOUT)
                try:
                    returncode = proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    kill_tree(proc.pid)  # its workers too: without bwrap they would not die with it
                    proc.wait()
                    returncode = None
        _keep_tail(log, 200_000)
        if returncode is None:
            return f"grade took longer than {timeout:g} s"
        if (out / "results.json").exists():
            return "graded" if returncode == 0 else "grader error"
        return f"grade exited {returncode} without a report"
    except Exception as e:  # e.g. a fork server that could not start: that student's row says so
        return f"could not run grade: {type(e).__name__}: {e}"


def _keep_tail(path: Path, size: int) -> None:
    """A log cut to its last `size` bytes (a grade that printed without end)."""
    if path.exists() and path.stat().st_size > size:
        with open(path, "rb") as fh:
            fh.seek(-size, os.SEEK_END)
            tail = fh.read()
        path.write_bytes(tail)


def _done(path: Path) -> bool:
    """Graded already: a readable results.json without a grader error (those are retried)."""
    try:
        return Results.model_validate_json(path.read_bytes()).grader_error is None
    except (OSError, ValueError):
        return False


def _csv_cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text  # no formulas in spreadsheets


def _write_gradebook(path: Path, spec: Spec, students: dict[str, Path], graded: dict[str, Results]) -> None:
    """grades.csv: one row per student (0 and empty items where there is no readable result)."""
    ids = [i.id for i in spec.items]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "total", *ids])
        for student in students:
            r = graded.get(student)
            if r is None:
                writer.writerow([_csv_cell(student), 0, *[""] * len(ids)])
                continue
            scores = {i.id: ("" if i.status == "manual" else f"{i.score:g}") for i in r.items}
            writer.writerow([_csv_cell(student), f"{r.score:g}", *[scores.get(i, "") for i in ids]])


def _batch_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="grade batch", description="Grade a folder of submissions (zips or folders).")
    parser.add_argument("input", type=Path, help="a folder with one zip or folder per student")
    parser.add_argument("--out", type=Path, required=True, help="OUT/<student>/results.json, report.html; OUT/grades.csv")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once, each in its own process")
    parser.add_argument("--force", action="store_true", help="regrade submissions that already have a results.json")
    parser.add_argument("--assignment", default="a3")
    parser.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--backend", choices=("local", "docker"), default="local",
                        help="local: a grade process each, sandboxed here; docker: a container each (--image)")
    parser.add_argument("--image", help="the grading image (docker/README.md), with --backend docker")
    parser.add_argument("--cpus", type=float, default=1.0, help="CPUs per container (docker)")
    parser.add_argument("--memory-mb", type=int, help="memory cap per container (docker; default from the spec)")
    args = parser.parse_args(argv)
    try:
        spec = _with_limits(load_spec(spec_path(args.assignment)), args.limit)
        if not args.input.is_dir():
            raise ValueError(f"{args.input}: not a folder")
        if args.jobs < 1:
            raise ValueError("--jobs must be at least 1")
        if (args.backend == "docker") != bool(args.image):
            raise ValueError("--image goes with --backend docker, and --backend docker needs --image")
        if args.cpus <= 0 or (args.memory_mb is not None and args.memory_mb < 512):
            raise ValueError("--cpus must be positive and --memory-mb at least 512")
        grade_one = _grade_one
        if args.backend == "docker":
            client = docker_backend.connect()
            limits = docker_backend.ContainerLimits.for_spec(spec.limits, args.cpus, args.memory_mb)
            grade_one = functools.partial(docker_backend.grade_in_container, client, args.image,
                                          assignment=args.assignment, limits=limits)
    except (SpecError, ValueError) as e:
        print(f"grade batch: {e}", file=sys.stderr)
        return 2
    except DockerUnavailable as e:
        print(f"grade batch --backend docker: {e}", file=sys.stderr)
        return 2
    from tqdm import tqdm

    students = _students(args.input)
    # Submissions in parallel already keep the cores busy: a second worker each would only add its
    # start-up (an import of torch) to every grade. A container sees every core of the host, not
    # its --cpus, so it is told.
    one_worker = args.jobs > 1 or (args.backend == "docker" and args.cpus < 3)
    workers = ["--limit=workers=1"] if one_worker else []
    extra = [*workers] + [f"--limit={x}" for x in args.limit]
    if args.backend == "local":
        extra = ["--assignment", args.assignment, *extra]
    timeout = spec.limits.total_timeout_s + spec.limits.import_timeout_s + 120
    todo = {s: src for s, src in students.items() if args.force or not _done(args.out / s / "results.json")}
    failed: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=args.jobs) as pool, \
            tqdm(total=len(students), initial=len(students) - len(todo), desc="grading", unit="sub") as bar:
        futures = {pool.submit(grade_one, src, args.out / s, grade_args=extra, timeout=timeout): s
                   for s, src in todo.items()}
        for future in as_completed(futures):
            student, outcome = futures[future], future.result()
            if outcome not in ("graded", "grader error"):  # no report at all: still one, with score 0 and why
                results = fallback_results(students[student], spec, outcome)
                _write(results, args.out / student)
                write_report(results, args.out / student)
            if outcome != "graded":
                failed[student] = outcome
            bar.update()
    graded: dict[str, Results] = {}
    for student in students:
        try:
            graded[student] = Results.model_validate_json((args.out / student / "results.json").read_bytes())
        except (OSError, ValueError) as e:
            failed[student] = f"unreadable results.json: {e}"
    _write_gradebook(args.out / "grades.csv", spec, students, graded)
    # Grader errors are ours, not the student's: listed for a look, kept out of the class's numbers.
    unfinished = {s: failed.get(s) or r.grader_error for s, r in graded.items() if r.grader_error}
    unfinished.update({s: why for s, why in failed.items() if s not in graded})
    write_summary({s: r for s, r in graded.items() if s not in unfinished}, unfinished, args.out / "summary.html",
                  spec.title)
    print(f"{len(students)} submissions ({len(students) - len(todo)} already graded), {len(failed)} failed; "
          f"grades: {args.out / 'grades.csv'}, summary: {args.out / 'summary.html'}")
    for student, why in sorted(failed.items()):
        print(f"failed: {student}: {why}", file=sys.stderr)
    return 0


def _bundle_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="grade gradescope-bundle",
                                     description="Write the Gradescope autograder zip (setup.sh, run_autograder, the grader).")
    parser.add_argument("--out", type=Path, required=True, help="the zip to write, e.g. autograder.zip")
    parser.add_argument("--assignment", default="a3")
    parser.add_argument("--dir", type=Path, help="also unpack it into this folder (the Docker build context)")
    args = parser.parse_args(argv)
    from graders.deploy.bundle import write_bundle, write_folder

    try:
        spec = load_spec(spec_path(args.assignment))
        if spec.engine == "written":  # a key with a false claim must not reach the students
            key = assignment_dir(spec) / spec.key
            refused = _refused_claims(key)
            if refused:
                print(f"grade gradescope-bundle: not bundled: claims of the key not true: {', '.join(refused)} "
                      f"(grade check-key {key} says why)", file=sys.stderr)
                return 1
        path = write_bundle(spec, args.out)
        if args.dir:
            write_folder(spec, args.dir)
    except (SpecError, ValueError, OSError) as e:
        print(f"grade gradescope-bundle: {e}", file=sys.stderr)
        return 2
    print(f"bundle: {path}" + (f", unpacked in {args.dir}" if args.dir else ""))
    return 0


def _refused_claims(key_path: Path) -> list[str]:
    from graders.written.key import KeyProblem
    from graders.written.keycheck import check_key_file  # sympy and the worker client: only when bundling a key

    try:
        return [o.claim.id for o in check_key_file(key_path) if not o.true]
    except KeyProblem as e:
        raise ValueError(str(e)) from None


def _check_key_main(argv: list[str]) -> int:
    from graders.written.keycheck import main  # sympy and the worker client: only for this subcommand

    return main(argv)


SUBCOMMANDS = {"report": _report_main, "batch": _batch_main, "gradescope-bundle": _bundle_main,
               "check-key": _check_key_main}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SUBCOMMANDS and not Path(argv[0]).exists():
        return SUBCOMMANDS[argv[0]](argv[1:])
    parser = argparse.ArgumentParser(prog="grade", description="Grade submission zips (or folders). "
                                     "`grade report results.json` re-renders a report without regrading.")
    parser.add_argument("submissions", nargs="+", type=Path, help="submission.zip files or folders")
    parser.add_argument("--out", type=Path, default=Path("grade-out"),
                        help="where results.json goes (one sub-folder per submission when there are several)")
    parser.add_argument("--assignment", default="a3")
    parser.add_argument("--quiet", action="store_true", help="print only the totals")
    parser.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                        help="override one of the spec's [limits], e.g. --limit call_timeout_s=2")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.NAME=VALUE", dest="settings",
                        help="override any other setting of the spec, e.g. --set hypothesis.max_examples=3 (for "
                             "experiments: the report then says the spec was changed)")
    parser.add_argument("--only", action="append", default=[], metavar="ITEM",
                        help="grade only this item (repeatable), e.g. --only '3(b)iii'; the report then covers "
                             "just those items and says so")
    parser.add_argument("--gradescope", type=Path, metavar="PATH",
                        help="also write PATH in Gradescope's results.json format (one submission only)")
    args = parser.parse_args(argv)
    if args.gradescope and len(args.submissions) != 1:
        parser.error("--gradescope takes exactly one submission")
    try:
        spec = load_spec(spec_path(args.assignment))
        spec = _with_settings(_with_limits(spec, args.limit), args.settings)
        if args.only:
            spec = spec.only(args.only)
    except (SpecError, ValueError) as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    from graders.runner import grade  # torch and the checks: not needed by `grade report`

    status = 0
    for source in args.submissions:
        out = args.out if len(args.submissions) == 1 else args.out / source.stem
        try:
            results = grade(source, spec, out_dir=out)
        except Exception as e:  # the grader's own failure: still a report, with score 0 and why
            results = fallback_results(source, spec, f"{type(e).__name__}: {e}")
            traceback.print_exc()
            status = 1
        if args.settings:
            results.warnings.insert(0, f"the spec was changed for this grade (--set {', '.join(args.settings)}): "
                                       "not the assignment's own settings")
        if args.only:
            results.warnings.insert(0, f"partial grade: only {', '.join(args.only)} graded (grade --only); "
                                       "the score covers those items alone")
        path = _write(results, out)
        if args.gradescope:
            write_gradescope(results, args.gradescope, spec.stdout_visibility)
        try:
            html = write_report(results, out)
        except Exception:  # the HTML is a view of results.json, which is already written
            traceback.print_exc()
            html, status = None, 1
        if args.quiet:
            print(f"{source}: {results.score:g}/{results.max_score:g}")
        else:
            print(f"\n{source.name}  (sha256 {results.submission.sha256[:12]})")
            print(_table(results))
            for w in results.warnings:
                print(f"warning: {w}")
            print(f"report: {path}" + (f" and {html}" if html else ""))
        if results.grader_error:
            print(f"grader error: {results.grader_error}", file=sys.stderr)
    return status


def run() -> None:
    """The `grade` command: main(), then an exit without finalising the interpreter: tearing down
    torch, pytest and matplotlib took 1.3 s here, and everything of ours is written and closed."""
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
