"""The HTML report: one self-contained file rendered from `Results` with jinja2.

Inline CSS, images as `data:` URIs, and a Content-Security-Policy that forbids scripts and every
fetch, so the page works offline and, should escaping ever fail, injected markup still cannot run.
Autoescaping is on for the whole template: everything from the submission (its file names, what
it printed, the messages that quote its errors) is hostile and must render as text.
"""

import base64
import io
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import Environment, FileSystemLoader

from graders.handgrading.marks import Mark
from graders.intake.png import read_png
from graders.reports.gradescope import captured_text, clip
from graders.reports.lossplot import training_svg
from graders.scoring.results import Results

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_CAPTURED = 20_000

env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True)


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def figure_png(fig: "Figure") -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def student_plot(results: Results, folder: Path | None) -> bytes | None:
    """The plot the student's train() saved, kept beside results.json: a plain name, a regular file
    (never followed through a link), a PNG signature, under the cap; otherwise nothing."""
    t = results.training
    if folder is None or t is None or not t.plot:
        return None
    name = t.plot
    if Path(name).name != name or name.startswith("."):
        return None
    try:
        return read_png(folder / name)
    except OSError:
        return None


def hand_totals(results: Results, hand: dict[str, Mark]) -> dict[str, float]:
    """The report's totals with the by-hand marks entered (`grade hand`): the points, the by-hand
    points still to grade, the bonus."""
    manual = [i for i in results.items if i.status == "manual"]
    marked = {i.id: hand[i.id].points or 0.0 for i in manual if i.id in hand and hand[i.id].graded}
    points = sum(p for i in manual if not i.bonus and (p := marked.get(i.id)) is not None)
    bonus = sum(p for i in manual if i.bonus and (p := marked.get(i.id)) is not None)
    left = sum(i.max_score for i in manual if not i.bonus and i.id not in marked)
    return {"score": results.score + points, "left": left, "bonus": results.bonus_score + bonus, "entered": len(marked)}


def render(results: Results, folder: Path | None = None, hand: dict[str, Mark] | None = None) -> str:
    """The report as one HTML string; `folder` is where results.json and the student's plot lie;
    `hand`, the by-hand marks entered (graders/handgrading/), by item id."""
    ours = training_svg(results.training) if results.training else None
    theirs = student_plot(results, folder)
    items = []
    for item in results.items:
        fraction = item.score / item.max_score if item.max_score else (1.0 if item.status == "passed" else 0.0)
        items.append({"item": item, "percent": round(100 * max(0.0, min(1.0, fraction)), 1)})
    captured = []
    for name, text in (("stdout", results.output.stdout), ("stderr", results.output.stderr)):
        full = captured_text(text, len(text) + 1)
        captured.append((name, clip(full, MAX_CAPTURED), len(full) > MAX_CAPTURED))
    hand = hand or {}
    totals = hand_totals(results, hand)
    return env.get_template("report.html.j2").render(
        r=results,
        hand=hand,
        totals=totals,
        items=items,
        captured=captured,
        total_percent=round(100 * min(1.0, totals["score"] / results.max_score), 1) if results.max_score else 0.0,
        plot_uri=data_uri(ours, "image/svg+xml") if ours else None,
        student_plot_uri=data_uri(theirs) if theirs else None,
        student_plot_named=bool(results.training and results.training.plot),
        # An assignment without a training run (a notebook, written answers) gets no such section.
        training_section=results.training is not None
        or any(c.name.startswith("training") for i in results.items for c in i.checks),
    )


def write_report(results: Results, folder: Path, path: Path | None = None, hand: dict[str, Mark] | None = None) -> Path:
    """Write report.html (or `path`) for results whose files lie in `folder`, with the by-hand
    marks `hand` where there are any (written whole: a browser never reads half a page)."""
    path = path or folder / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(render(results, folder, hand), encoding="utf-8")
    partial.replace(path)
    return path
