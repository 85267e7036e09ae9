"""A notebook's cells as text to show, markdown and code alike, with an .ipynb's saved outputs:
what a TA reads for a by-hand part (graders/checks/notebook.py reads the code cells to run them).
Text only: nothing here runs, and everything is shown escaped."""

import json
import re
from dataclasses import dataclass
from pathlib import Path

_PERCENT = re.compile(r"^#\s?%%(?:\s|$)(.*)$")
_NBCONVERT = re.compile(r"^# In\[[ 0-9]*\]:\s*$")
_MARKDOWN = re.compile(r"^\s*\[(markdown|md|raw)\]", re.IGNORECASE)
MAX_OUTPUT = 5_000  # characters of a cell's saved outputs shown


@dataclass(frozen=True)
class NotebookCell:
    kind: str  # "code" or "markdown"
    text: str
    outputs: str = ""  # an .ipynb's saved outputs, as text


def _uncomment(lines: list[str]) -> str:
    """A percent-format markdown cell's text without its `# ` prefixes."""
    return "\n".join(re.sub(r"^# ?", "", line) for line in lines).strip()


def _percent(text: str) -> list[NotebookCell]:
    cells: list[tuple[str, list[str]]] = [("code", [])]
    for line in text.splitlines():
        marker = _PERCENT.match(line)
        if marker or _NBCONVERT.match(line):
            cells.append(("markdown" if marker and _MARKDOWN.match(marker.group(1)) else "code", []))
        else:
            cells[-1][1].append(line)
    return [
        NotebookCell(kind, _uncomment(lines) if kind == "markdown" else "\n".join(lines).strip())
        for kind, lines in cells
        if any(line.strip() for line in lines)
    ]


def _joined(value: object) -> str:
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _outputs(cell: dict) -> str:
    shown = []
    for out in cell.get("outputs") or []:
        if not isinstance(out, dict):
            continue
        if out.get("output_type") == "stream":
            shown.append(_joined(out.get("text")))
        elif out.get("output_type") == "error":
            shown.append(f"{out.get('ename', '')}: {out.get('evalue', '')}")
        elif isinstance(out.get("data"), dict):
            shown.append(_joined(out["data"].get("text/plain")))
    text = "\n".join(s.rstrip("\n") for s in shown if s)
    return text[:MAX_OUTPUT] + ("\n…" if len(text) > MAX_OUTPUT else "")


def _ipynb(text: str) -> list[NotebookCell]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    cells = data.get("cells") if isinstance(data, dict) else None
    found = []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") in ("code", "markdown"):
            found.append(NotebookCell(cell["cell_type"], _joined(cell.get("source")).strip(), _outputs(cell)))
    return [c for c in found if c.text or c.outputs]


def notebook_cells(path: Path) -> list[NotebookCell]:
    """Every cell of a percent-format (or nbconvert) script or an .ipynb, in order."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return _ipynb(text) if path.suffix == ".ipynb" else _percent(text)


def _plain(text: str) -> str:
    return " ".join(text.lower().replace("#", " ").split())


def section(cells: list[NotebookCell], heading: str) -> list[NotebookCell] | None:
    """The cells from the first markdown cell that names `heading` (case and spacing ignored) to
    the end of the notebook; None when no markdown cell does."""
    wanted = _plain(heading)
    for i, cell in enumerate(cells):
        if cell.kind == "markdown" and wanted in _plain(cell.text):
            return cells[i:]
    return None
