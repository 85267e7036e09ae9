"""OUT/similarity.html, OUT/similarity.csv and OUT/similarity.json (what summary.html links).

The page is self-contained (the house template: inline CSS, no script, a CSP that forbids both)
and autoescaped: every line of student code is text, never markup. A pair's detail is a
<details> element with an id; the table's links open it (Chromium opens a closed <details> that a
fragment points into), so choosing a pair needs no script.
"""

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from graders.reports.html import env
from graders.reports.summary import SIMILARITY_FILE
from graders.similarity.compare import Comparison, FileMatch, Pair
from graders.similarity.index import FLOOR, FLOOR_SHARE
from graders.similarity.winnow import K, W

MAX_SHOWN_LINES = 3000  # per file side; a longer file is cut in the page (the CSV has every line)
_COLUMNS = [
    "rank",
    "student_a",
    "student_b",
    "pair_score",
    "file",
    "file_score",
    "shared_fingerprints",
    "a_fingerprints",
    "b_fingerprints",
    "compared_as",
    "a_matched_lines",
    "b_matched_lines",
    "starter",
]


@dataclass(frozen=True)
class StarterShown:
    path: str  # as staff know it
    origin: str  # "--starter", "the spec's starter (...)", "the assignment's template"


def _cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text  # no formulas in spreadsheets


def _ranges(ranges: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return " ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in merged)


def write_csv(comparison: Comparison, path: Path, starter: StarterShown) -> Path:
    """One row per pair and file that share fingerprints, best pair first: every pair over the
    threshold; past the first `with_regions`, the matched lines say they were not looked for."""
    not_listed = f"(not listed: past the top {comparison.with_regions})"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(_COLUMNS)
        for pair in comparison.pairs:
            for m in pair.files:
                listed = m.regions is not None
                writer.writerow(
                    [
                        pair.rank,
                        _cell(pair.a),
                        _cell(pair.b),
                        f"{pair.score:.3f}",
                        m.name,
                        f"{m.score:.3f}",
                        m.shared,
                        m.size_a,
                        m.size_b,
                        m.mode,
                        _ranges(m.lines("a")) if listed else not_listed,
                        _ranges(m.lines("b")) if listed else not_listed,
                        _cell(starter.path),
                    ]
                )
    return path


def _side(match: FileMatch, side: str) -> dict:
    """The file's lines for the page, each with the matching region it belongs to (or None)."""
    source = match.a if side == "a" else match.b
    lines = source.text.splitlines() if source else []
    region_of: dict[int, int] = {}
    for number, region in enumerate(match.regions or [], start=1):
        lo, hi = getattr(region, side)
        for line in range(lo, hi + 1):
            region_of.setdefault(line, number)
    shown = [(n, text, region_of.get(n)) for n, text in enumerate(lines[:MAX_SHOWN_LINES], start=1)]
    return {"file": source.taken if source else match.name, "lines": shown, "cut": max(0, len(lines) - MAX_SHOWN_LINES)}


def _pair_view(pair: Pair) -> dict:
    files = [{"match": m, "a": _side(m, "a"), "b": _side(m, "b")} for m in pair.files]
    return {"pair": pair, "files": files}


def render(comparison: Comparison, title: str, show: int, min_score: float, starter: StarterShown) -> str:
    top = max((c for _, c in comparison.histogram), default=0) or 1
    return env.get_template("similarity.html.j2").render(
        c=comparison,
        title=title,
        min_score=min_score,
        starter=starter,
        k=K,
        w=W,
        floor=FLOOR,
        floor_share=round(100 * FLOOR_SHARE),
        views=[_pair_view(p) for p in comparison.pairs[: min(show, comparison.with_regions)]],
        shown=min(show, comparison.with_regions),
        bins=[(label, count, round(100 * count / top, 1)) for label, count in comparison.histogram],
    )


def _summary(comparison: Comparison, min_score: float, starter: StarterShown) -> dict:
    """similarity.json: what the batch summary shows."""
    return {
        "compared": comparison.compared,
        "pairs": comparison.pairs_total,
        "min_score": min_score,
        "reported": comparison.pairs_over,
        "listed": len(comparison.pairs),
        "starter": asdict(starter),
        "common_limit": comparison.common_limit,
        "floor": round(comparison.floor, 1),
        "top": [{"rank": p.rank, "a": p.a, "b": p.b, "score": round(p.score, 3)} for p in comparison.pairs[:5]],
    }


def write_outputs(
    comparison: Comparison, out: Path, title: str, show: int, min_score: float, starter: StarterShown
) -> dict[str, Path]:
    """similarity.html, similarity.csv and the summary's similarity.json in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    html = out / "similarity.html"
    html.write_text(render(comparison, title, show, min_score, starter), encoding="utf-8")
    table = write_csv(comparison, out / "similarity.csv", starter)
    summary = out / SIMILARITY_FILE
    summary.write_text(json.dumps(_summary(comparison, min_score, starter), indent=1) + "\n", encoding="utf-8")
    return {"html": html, "csv": table, "json": summary}
