"""What was removed before scoring, per required file, for the page to say: how much the starter
held, and which passages were common to the class (with the lines of one submission that has
them, so staff see what "common" meant in this folder)."""

from dataclasses import dataclass, field

import numpy as np

from graders.similarity.index import FileComparison
from graders.similarity.sources import SourceFile

SHOWN_PASSAGES = 3  # per file, the largest
SHOWN_LINES = 8  # per passage


@dataclass
class Passage:
    student: str  # whose file the lines are taken from
    lines: tuple[int, int]
    fingerprints: int
    holders: int  # every fingerprint of it is in at least this many submissions
    text: list[str]
    cut: int = 0  # lines of the passage not shown


@dataclass
class FileRemoved:
    name: str
    starter: str | None  # the starter's file, as staff know it (None: no starter for this file)
    starter_lines: int
    common: int  # distinct fingerprints removed as common to the class
    common_share: float  # of all the class's fingerprints of this file (starter removed first)
    passages: list[Passage] = field(default_factory=list)


def _runs(lo: np.ndarray, hi: np.ndarray, held: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Consecutive fingerprints (as lines) merged into passages: (first, last line, count, holders)."""
    out: list[list[int]] = []
    for a, b, h in zip(lo.tolist(), hi.tolist(), held.tolist(), strict=True):
        if out and a <= out[-1][1] + 1:
            out[-1][1], out[-1][2], out[-1][3] = max(out[-1][1], b), out[-1][2] + 1, min(out[-1][3], h)
        else:
            out.append([a, b, 1, h])
    return [(r[0], r[1], r[2], r[3]) for r in out]


def _passages(fc: FileComparison, names: list[str]) -> list[Passage]:
    common, holders = fc.common["ast"], fc.holders["ast"]
    best, best_count = None, 0
    for i, entry in enumerate(fc.entries):
        if entry is not None and entry.ast is not None:
            count = int(np.isin(entry.ast.hashes, common).sum())
            if count > best_count:
                best, best_count = i, count
    if best is None:
        return []
    entry = fc.entries[best]
    assert entry is not None and entry.ast is not None
    fp = entry.ast
    mask = np.isin(fp.hashes, common)
    held = holders[np.searchsorted(common, fp.hashes[mask])]
    runs = sorted(_runs(fp.lo[mask], fp.hi[mask], held), key=lambda r: (-r[2], r[0]))[:SHOWN_PASSAGES]
    lines = entry.source.text.splitlines()
    out = []
    for lo, hi, count, least in sorted(runs):
        text = lines[lo - 1 : min(hi, lo + SHOWN_LINES - 1)]
        out.append(Passage(names[best], (lo, hi), count, least, text, max(0, hi - lo + 1 - SHOWN_LINES)))
    return out


def _share(fc: FileComparison) -> float:
    before = after = 0
    for entry in fc.entries:
        if entry is not None and entry.ast is not None:
            unique = np.unique(entry.ast.hashes)
            before += len(unique)
            after += int(np.isin(unique, fc.common["ast"]).sum())
    return after / before if before else 0.0


def removed_from(fc: FileComparison, names: list[str], starter: SourceFile | None) -> FileRemoved:
    return FileRemoved(
        name=fc.name,
        starter=starter.taken if starter else None,
        starter_lines=len(starter.text.splitlines()) if starter else 0,
        common=len(fc.common["ast"]),
        common_share=_share(fc),
        passages=_passages(fc, names),
    )
