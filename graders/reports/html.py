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

from graders.intake.png import read_png
from graders.reports.gradescope import captured_text, clip
from graders.scoring.results import Results

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_CAPTURED = 20_000

env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True)


def png_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def figure_png(fig: "Figure") -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def training_plot(results: Results) -> bytes | None:
    """The run drawn with matplotlib (no pyplot: no global state): the losses the student's loop
    recorded, the grader's recomputed initial and final held-out loss, the reference's own run on the
    same data, the target and the floor."""
    t = results.training
    if t is None or (not t.recorded_losses and t.initial_loss is None and t.final_loss is None):
        return None
    from matplotlib.figure import Figure  # 0.6 s to import: only when a plot is drawn

    fig = Figure(figsize=(7, 3.6), dpi=100)
    ax = fig.add_subplot()
    steps = t.steps or (len(t.recorded_losses) if t.recorded_losses else 1)
    if t.recorded_losses:
        xs = range(1, len(t.recorded_losses) + 1)
        ys = [float("nan") if v is None else v for v in t.recorded_losses]
        ax.plot(xs, ys, color="#4477aa", lw=1.2, label="your train() recorded (training batches)")
    if t.reference_losses:
        xs = range(1, len(t.reference_losses) + 1)
        ax.plot(
            xs,
            t.reference_losses,
            color="#aa3377",
            lw=1,
            ls="--",
            alpha=0.8,
            label="reference train(), same data and seed",
        )
    if t.reference_final_loss is not None:
        ax.plot(
            [len(t.reference_losses or ()) or steps],
            [t.reference_final_loss],
            "D",
            color="#aa3377",
            ms=5,
            label=f"reference held-out loss after: {t.reference_final_loss:.3f}",
        )
    if t.initial_loss is not None:
        ax.plot([0], [t.initial_loss], "o", color="#228833", ms=7, label=f"held-out loss before: {t.initial_loss:.3f}")
        target = t.initial_loss - t.required_improvement
        ax.axhline(target, color="#ccbb44", ls="--", lw=1, label=f"target: {target:.3f} or lower")
    if t.final_loss is not None:
        ax.plot([steps], [t.final_loss], "s", color="#ee6677", ms=7, label=f"held-out loss after: {t.final_loss:.3f}")
    ax.axhline(t.floor, color="#777777", ls=":", lw=1.2, label=f"entropy floor of the data: {t.floor:.3f}")
    ax.set_xlabel("optimisation step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return figure_png(fig)


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


def render(results: Results, folder: Path | None = None) -> str:
    """The report as one HTML string; `folder` is where results.json and the student's plot lie."""
    ours, theirs = training_plot(results), student_plot(results, folder)
    items = []
    for item in results.items:
        fraction = item.score / item.max_score if item.max_score else (1.0 if item.status == "passed" else 0.0)
        items.append({"item": item, "percent": round(100 * max(0.0, min(1.0, fraction)), 1)})
    captured = []
    for name, text in (("stdout", results.output.stdout), ("stderr", results.output.stderr)):
        full = captured_text(text, len(text) + 1)
        captured.append((name, clip(full, MAX_CAPTURED), len(full) > MAX_CAPTURED))
    return env.get_template("report.html.j2").render(
        r=results,
        items=items,
        captured=captured,
        total_percent=round(100 * results.score / results.max_score, 1) if results.max_score else 0.0,
        plot_uri=png_uri(ours) if ours else None,
        student_plot_uri=png_uri(theirs) if theirs else None,
        student_plot_named=bool(results.training and results.training.plot),
        # An assignment without a training run (a notebook, written answers) gets no such section.
        training_section=results.training is not None
        or any(c.name.startswith("training") for i in results.items for c in i.checks),
    )


def write_report(results: Results, folder: Path, path: Path | None = None) -> Path:
    """Write report.html (or `path`) for results whose files lie in `folder`."""
    path = path or folder / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(results, folder), encoding="utf-8")
    return path
