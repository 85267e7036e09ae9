"""The report's training plot as a small SVG drawn from the numbers: the losses the student's loop
recorded, the reference's run on the same data, the held-out losses before and after, the target
and the entropy floor.

matplotlib drew it before, at 0.6 CPU-s to import in every `grade` process and 0.2 s per plot;
this is a few milliseconds. Every string in it is ours or a formatted number, and escaped anyway.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from graders.scoring.results import Training

WIDTH, HEIGHT = 700, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 46  # the axes' margins inside the picture
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'


@dataclass
class Mark:
    """One legend entry: a line (`points`, maybe gapped by None) or a single marker."""

    label: str
    color: str
    points: Sequence[tuple[float, float | None]]
    dash: str = ""
    width: float = 1.2
    marker: str = ""  # "o", "s" or "D": drawn at each point, no line


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """About `count` round values (1, 2, 2.5 or 5 times a power of ten apart) covering [low, high]."""
    span = high - low if high > low else abs(high) or 1.0
    raw = span / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def _marks(t: Training) -> list[Mark]:
    steps = t.steps or (len(t.recorded_losses) if t.recorded_losses else 1)
    marks = []
    if t.recorded_losses:
        marks.append(
            Mark("your train() recorded (training batches)", "#4477aa", list(enumerate(t.recorded_losses, start=1)))
        )
    if t.reference_losses:
        marks.append(
            Mark(
                "reference train(), same data and seed",
                "#aa3377",
                list(enumerate(t.reference_losses, start=1)),
                dash="5 3",
                width=1,
            )
        )
    if t.reference_final_loss is not None:
        at = len(t.reference_losses or ()) or steps
        marks.append(
            Mark(
                f"reference held-out loss after: {t.reference_final_loss:.3f}",
                "#aa3377",
                [(at, t.reference_final_loss)],
                marker="D",
            )
        )
    if t.initial_loss is not None:
        marks.append(Mark(f"held-out loss before: {t.initial_loss:.3f}", "#228833", [(0, t.initial_loss)], marker="o"))
        target = t.initial_loss - t.required_improvement
        marks.append(
            Mark(f"target: {target:.3f} or lower", "#ccbb44", [(0, target), (steps, target)], dash="5 3", width=1)
        )
    if t.final_loss is not None:
        marks.append(Mark(f"held-out loss after: {t.final_loss:.3f}", "#ee6677", [(steps, t.final_loss)], marker="s"))
    marks.append(
        Mark(f"entropy floor of the data: {t.floor:.3f}", "#777777", [(0, t.floor), (steps, t.floor)], dash="1.5 2.5")
    )
    return marks


class _Axes:
    """Data to picture coordinates."""

    def __init__(self, xs: Iterable[float], ys: Iterable[float]):
        xs, ys = list(xs), list(ys)
        pad = (max(xs) - min(xs)) * 0.025 or 0.5  # markers at the ends stay inside the frame
        self.x0, self.x1 = min(xs) - pad, max(xs) + pad
        pad = (max(ys) - min(ys)) * 0.06 or 0.5
        self.y0, self.y1 = min(ys) - pad, max(ys) + pad

    def x(self, v: float) -> float:
        return LEFT + (v - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, v: float) -> float:
        return TOP + (self.y1 - v) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)


def _text(x: float, y: float, s: str, size: int = 11, anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" {FONT} {extra}>{escape(s)}</text>'


def _frame(ax: _Axes) -> list[str]:
    """Grid, ticks, their labels and the axis titles."""
    out = []
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    for v in nice_ticks(ax.x0, ax.x1):
        x = ax.x(v)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#e6e6e6"/>')
        out.append(_text(x, bottom + 15, f"{v:g}", 10))
    for v in nice_ticks(ax.y0, ax.y1):
        y = ax.y(v)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e6e6e6"/>')
        out.append(_text(LEFT - 6, y + 3.5, f"{v:g}", 10, anchor="end"))
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" fill="none" stroke="#444"/>')
    out.append(_text((LEFT + right) / 2, HEIGHT - 8, "optimisation step"))
    mid = (TOP + bottom) / 2
    out.append(_text(16, mid, "cross-entropy (nats)", extra=f'transform="rotate(-90 16 {mid:.1f})"'))
    return out


def _marker(kind: str, x: float, y: float, color: str) -> str:
    if kind == "o":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{color}"/>'
    if kind == "s":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{color}"/>'
    corners = ((x, y - 4.5), (x + 4.5, y), (x, y + 4.5), (x - 4.5, y))  # a diamond
    return f'<path d="M{"L".join(f"{a:.1f} {b:.1f}" for a, b in corners)}Z" fill="{color}"/>'


def _draw(mark: Mark, ax: _Axes) -> list[str]:
    if mark.marker:
        return [_marker(mark.marker, ax.x(x), ax.y(y), mark.color) for x, y in mark.points if y is not None]
    runs: list[list[str]] = [[]]
    for x, y in mark.points:  # a None (a loss that was not finite) breaks the line
        if y is None or not math.isfinite(y):
            runs.append([])
        else:
            runs[-1].append(f"{ax.x(x):.1f},{ax.y(y):.1f}")
    dash = f' stroke-dasharray="{mark.dash}"' if mark.dash else ""
    return [
        f'<polyline points="{" ".join(r)}" fill="none" stroke="{mark.color}" stroke-width="{mark.width}"{dash}/>'
        for r in runs
        if r
    ]


def _legend(marks: list[Mark]) -> list[str]:
    width = 18 + 6.2 * max(len(m.label) for m in marks)
    x, y = WIDTH - RIGHT - width - 8, TOP + 8
    out = [
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{14 * len(marks) + 8}" fill="#fff" '
        'fill-opacity="0.85" stroke="#ccc"/>'
    ]
    for i, mark in enumerate(marks):
        cy = y + 11 + 14 * i
        if mark.marker:
            out.append(_marker(mark.marker, x + 14, cy, mark.color))
        else:
            dash = f' stroke-dasharray="{mark.dash}"' if mark.dash else ""
            out.append(
                f'<line x1="{x + 5:.1f}" y1="{cy:.1f}" x2="{x + 23:.1f}" y2="{cy:.1f}" stroke="{mark.color}" '
                f'stroke-width="{mark.width + 0.3}"{dash}/>'
            )
        out.append(_text(x + 29, cy + 3, mark.label, 9, anchor="start"))
    return out


def training_svg(t: Training) -> bytes | None:
    """The plot, or None when the run left nothing to draw."""
    if not t.recorded_losses and t.initial_loss is None and t.final_loss is None:
        return None
    marks = _marks(t)
    points = [(x, y) for m in marks for x, y in m.points if y is not None and math.isfinite(y)]
    ax = _Axes((x for x, _ in points), (y for _, y in points))
    body = _frame(ax) + [s for m in marks for s in _draw(m, ax)] + _legend(marks)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}"><rect width="100%" height="100%" fill="#fff"/>'
    )
    return (head + "".join(body) + "</svg>").encode()
