"""OUT/sources.json: where each student's submission of a batch came from, so that later passes
over the class (`grade similarity BATCH_OUT`) find the submitted files without being told the
input folder again."""

import json
from pathlib import Path

SOURCES_FILE = "sources.json"


def write_sources(out: Path, assignment: str, students: dict[str, Path]) -> Path:
    """Absolute paths: the batch may have been run from another working directory."""
    path = out / SOURCES_FILE
    out.mkdir(parents=True, exist_ok=True)
    data = {"assignment": assignment, "students": {s: str(p.resolve()) for s, p in sorted(students.items())}}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def read_sources(out: Path) -> tuple[str, dict[str, Path]]:
    """The batch's assignment and its students' submissions; ValueError if the file is not one."""
    try:
        data = json.loads((out / SOURCES_FILE).read_text(encoding="utf-8"))
        students = {str(s): Path(p) for s, p in data["students"].items()}
        return str(data["assignment"]), students
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{out / SOURCES_FILE}: not a batch's list of sources ({type(e).__name__}: {e})") from None
