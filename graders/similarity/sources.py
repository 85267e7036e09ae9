"""What is compared: each submission's required files, read the way grading reads them, and the
assignment's starter code.

A submission goes through intake (`graders.intake.submission.take_in`: its zip reader, path guards, bomb
checks and size caps) into a temporary folder that is deleted as soon as the text is read. Intake
is asked not to parse the files (every required file passed as a "notebook"): a file that does not
parse is still compared, at token level, where grading would refuse it.
"""

import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from graders.checks.notebook import NotebookError, read_cells
from graders.intake.submission import take_in
from graders.paths import REPO
from graders.similarity.normalise import Unit
from graders.spec import Spec, assignment_dir

A3_TEMPLATE = REPO / "student_template"  # A3's template is the students' own repo (graders/template.py)


@dataclass
class SourceFile:
    name: str  # the required file it stands for (A2S1.py)
    taken: str  # the file as submitted (A2S1.ipynb)
    text: str  # what staff are shown: the file, or a .ipynb's code cells one after another
    units: list[Unit]  # what is parsed: the module, or each code cell


@dataclass
class Submission:
    student: str
    files: dict[str, SourceFile] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # a required file not compared, and why
    rejected: str | None = None  # nothing could be read


def _notebook(name: str, taken: str, text: str, path: Path) -> SourceFile:
    """A notebook's code cells (shell and magic lines are `pass`, as when it is graded). A .py
    export is shown as submitted, each cell parsed at its own lines; an .ipynb is shown as its
    code cells under `# In[n]:` headers."""
    cells = [c for c in read_cells(path) if not c.skipped]
    if not taken.endswith(".ipynb"):
        return SourceFile(name, taken, text, [Unit(c.source, c.first_line - 1) for c in cells])
    lines: list[str] = []
    units = []
    for cell in cells:
        lines.append(f"# In[{cell.number}]:")
        units.append(Unit(cell.source, len(lines)))
        lines.extend(cell.source.rstrip("\n").split("\n"))
        lines.append("")
    return SourceFile(name, taken, "\n".join(lines) + "\n", units)


def source_file(name: str, path: Path, notebook: bool) -> SourceFile:
    """One file as compared; raises NotebookError or UnicodeDecodeError if it cannot be read."""
    text = path.read_text(encoding="utf-8")
    if notebook:
        return _notebook(name, path.name, text, path)
    return SourceFile(name, path.name, text, [Unit(text)])


def read_submission(student: str, source: Path, spec: Spec) -> Submission:
    """The student's required files, read through intake into a temporary folder (never run)."""
    sub = Submission(student)
    with tempfile.TemporaryDirectory(prefix="similarity-") as tmp:
        intake = take_in(
            source, spec.required_files, Path(tmp) / "submission", spec.alternatives, notebooks=spec.required_files
        )  # no parse check here: see the module's docstring
        if intake.rejected:
            sub.rejected = intake.rejected
            return sub
        sub.problems.update(intake.problems)
        for name, path in intake.files.items():
            try:
                sub.files[name] = source_file(name, path, name in spec.notebooks)
            except (NotebookError, UnicodeDecodeError, OSError) as e:
                sub.problems[name] = str(e)
    return sub


def template_dir(spec: Spec) -> Path:
    """Where the assignment's starter code is: `assignment/NAME/template/`, or for A3 the
    student template repo."""
    own = assignment_dir(spec) / "template"
    return own if own.is_dir() or spec.assignment != "a3" else A3_TEMPLATE


@dataclass
class StarterChoice:
    path: Path  # a folder or a zip
    origin: str  # why this one: "--starter", "the spec's starter", "the assignment's template"


def choose_starter(spec: Spec, given: Path | None = None) -> StarterChoice:
    """`--starter` if given, else the spec's `starter` (relative to the assignment's folder),
    else the assignment's template. ValueError if the one chosen is neither a folder nor a zip."""
    if given is not None:
        choice = StarterChoice(given, "--starter")
    elif spec.starter:
        choice = StarterChoice(assignment_dir(spec) / spec.starter, f"the spec's starter ({spec.starter})")
    else:
        choice = StarterChoice(template_dir(spec), "the assignment's template")
    if not (choice.path.is_dir() or (choice.path.is_file() and zipfile.is_zipfile(choice.path))):
        raise ValueError(f"{choice.origin}: {choice.path} is not a folder or a zip")
    return choice


def _read_folder(spec: Spec, folder: Path, shown: Path) -> tuple[dict[str, SourceFile], list[str]]:
    found, notes = {}, []
    for name in spec.required_files:
        path = next((folder / n for n in spec.accepted(name) if (folder / n).is_file()), None)
        if path is None:
            notes.append(f"{name}: no starter code in {shown}; compared whole")
            continue
        try:
            found[name] = source_file(name, path, name in spec.notebooks)
        except (NotebookError, UnicodeDecodeError, OSError) as e:
            notes.append(f"{name}: the starter's {path.name} in {shown} cannot be read ({e}); compared whole")
    return found, notes


def read_starter(spec: Spec, source: Path | None = None) -> tuple[dict[str, SourceFile], list[str]]:
    """The starter's version of each required file, from a folder or a zip (a zip through intake,
    as a submission: its checks, a top folder allowed), and a note for each required file that
    has none (it is then compared whole)."""
    source = source or template_dir(spec)
    if source.is_dir():
        return _read_folder(spec, source, source)
    with tempfile.TemporaryDirectory(prefix="starter-") as tmp:
        intake = take_in(source, spec.required_files, Path(tmp) / "s", spec.alternatives, notebooks=spec.required_files)
        if intake.rejected:
            raise ValueError(f"the starter {source}: {intake.rejected}")
        return _read_folder(spec, Path(tmp) / "s", source)
