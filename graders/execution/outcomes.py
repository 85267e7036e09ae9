"""What the workers' run of a submission leaves to tell, in the words of the report: why a module
could not be imported, a module imported with postponed annotations, processes student code left
running, and what it printed."""

from graders.execution import habits
from graders.execution.client import Worker
from graders.scoring.results import Output


def describe_import_error(module: str, info: dict, problems: dict[str, str]) -> str:
    """Why `module` could not be imported, in words; `problems` are intake's, per file: a module that
    imports a file intake refused (a syntax error) is named as blocked by that file, not as missing."""
    name = f"{module}.py"
    if info.get("type") == "WorkerError":
        return f"{name} could not be imported: {info['message']}"
    loc = f", line {info['line']}" if info.get("line") else ""
    where = info.get("file") or name
    offline = habits.network_message(info, "import")
    if offline:
        return f"{name} {offline}"
    parser = habits.argparse_message(info, name)
    if parser:
        return f"{where}{loc}: {parser}"
    if info.get("type") == "SystemExit":
        return f"{name} {info['message'].replace(' was called', '')} at import ({where}{loc})"
    missing = info.get("missing_module")
    if missing and f"{missing}.py" in problems:
        return (
            f"{name} could not be graded: it imports {missing}, and {missing}.py could not be loaded "
            f"({problems[f'{missing}.py']})"
        )
    if missing:
        return (
            f"{name} failed at import ({where}{loc}): it imports '{missing}', "
            "which is not a module of the submission or of the grading environment"
        )
    return habits.with_hint(f"{name} failed at import ({where}{loc}): {info.get('type')}: {info.get('message')}", info)


def postponed_note(module: str, note: dict) -> str:
    """The warning for a module imported with postponed annotations (worker data: shown, clipped)."""
    line = note.get("line") if isinstance(note.get("line"), int) else "?"
    error, python = str(note.get("error", ""))[:300], str(note.get("python", ""))[:20]
    return (
        f"{module}.py, line {line}: evaluating an annotation failed on Python {python} ({error}). The file "
        "looks written for Python 3.14, which never evaluates annotations at import, so it was imported with "
        "postponed evaluation of annotations (as `from __future__ import annotations` does) and graded that "
        "way; nothing else about the code was changed"
    )


def left_running(workers: list[Worker]) -> list[str]:
    """A warning for each request whose student code left processes running (killed at once)."""
    found: dict[str, int] = {}
    for w in workers:
        for where, count in w.left_running.items():
            found.setdefault(where, count)
    return [
        f"your code left {n} process{'es' if n > 1 else ''} running after {where}; "
        f"{'they were' if n > 1 else 'it was'} killed before anything else ran, so grading went on as usual"
        for where, n in sorted(found.items())
    ]


def captured_output(workers: list[Worker], cap: int) -> Output:
    """What student code printed, at most `cap` characters per stream for the whole grade: the
    second worker's (the training run's, after its own import prints) follows under a rule."""

    def join(texts: list[str]) -> str:
        body = texts[0] if texts else ""  # capped by its worker already
        for more in filter(None, texts[1:]):
            room = max(0, cap - len(body))
            body += "\n--- in the second worker (training run) ---\n" + more[:room]
            if len(more) > room:
                body += f"\n[... {len(more) - room} more characters not kept]"
        return body

    started = [w for w in workers if w.starts]
    return Output(stdout=join([w.stdout.text() for w in started]), stderr=join([w.stderr.text() for w in started]))
