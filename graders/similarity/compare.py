"""The class compared: pair scores over all required files, ranked, and for the pairs shown the
matching regions mapped back to source lines."""

import time
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from graders.similarity.index import FLOOR, FileComparison, Starter, compare_file, default_common
from graders.similarity.sources import SourceFile, Submission
from graders.similarity.winnow import Fingerprints

GAP = 3  # fingerprints apart (on both sides) that still belong to one matching region
# Lines apart that still belong to one region: starter code between two matches has no fingerprints
# left (removed), so fingerprints adjacent in the list may be a whole given method apart.
LINE_GAP = 3


@dataclass
class Region:
    a: tuple[int, int]  # first and last line in the first file
    b: tuple[int, int]


@dataclass
class FileMatch:
    name: str
    score: float
    shared: int
    size_a: int
    size_b: int
    mode: str  # "ast" or "tokens"
    regions: list[Region]
    a: SourceFile | None
    b: SourceFile | None

    def lines(self, side: str) -> list[tuple[int, int]]:
        return [getattr(r, side) for r in self.regions]


@dataclass
class Pair:
    rank: int
    a: str
    b: str
    score: float
    files: list[FileMatch]


@dataclass
class Comparison:
    students: list[str]
    compared: int  # submissions with at least one file compared
    pairs_total: int  # pairs of those
    pairs_sharing: int  # pairs with at least one shared fingerprint
    pairs: list[Pair]  # the reported ones, best first
    histogram: list[tuple[str, int]]  # pair scores of the whole class, binned
    not_compared: dict[str, str]  # student -> why (rejected, or no file usable)
    problems: dict[str, dict[str, str]]  # student -> file -> why that file was not compared
    notes: list[str]
    common: int | None
    timings: dict[str, float] = field(default_factory=dict)
    pairs_over: int = 0  # pairs scoring min_score or more: `pairs` lists `limit` of them at most


def regions(fa: Fingerprints, fb: Fingerprints, common: np.ndarray) -> list[Region]:
    """Runs of fingerprints the two files share, in the first file's order, each with its lines
    on both sides (a fingerprint found twice in the second file is paired with its first place)."""
    shared = np.setdiff1d(np.intersect1d(fa.hashes, fb.hashes), common)
    first_b: dict[int, int] = {}
    for j in np.nonzero(np.isin(fb.hashes, shared))[0].tolist():
        first_b.setdefault(int(fb.hashes[j]), j)
    found: list[list[int]] = []  # [last i, last j, a lo, a hi, b lo, b hi]
    for i in np.nonzero(np.isin(fa.hashes, shared))[0].tolist():
        j = first_b[int(fa.hashes[i])]
        run = found[-1] if found else None
        a_lo, a_hi, b_lo, b_hi = int(fa.lo[i]), int(fa.hi[i]), int(fb.lo[j]), int(fb.hi[j])
        near = run and a_lo <= run[3] + LINE_GAP and run[4] - LINE_GAP <= b_lo <= run[5] + LINE_GAP
        if run and near and i - run[0] <= GAP and 0 < j - run[1] <= GAP:
            run[:] = [i, j, min(run[2], a_lo), max(run[3], a_hi), min(run[4], b_lo), max(run[5], b_hi)]
        else:
            found.append([i, j, a_lo, a_hi, b_lo, b_hi])
    return [Region((r[2], r[3]), (r[4], r[5])) for r in found]


def _file_match(fc: FileComparison, scores: np.ndarray, i: int, j: int) -> FileMatch | None:
    if fc.shared[i, j] <= 0:
        return None
    mode = fc.mode(i, j)
    ea, eb = fc.entries[i], fc.entries[j]
    assert ea is not None and eb is not None  # a pair sharing fingerprints has the file on both sides
    fa, fb = ea.fingerprints(mode, fc.starter), eb.fingerprints(mode, fc.starter)
    return FileMatch(
        fc.name,
        float(scores[i, j]),
        int(fc.shared[i, j]),
        int(fc.size_a[i, j]),
        int(fc.size_a[j, i]),
        mode,
        regions(fa, fb, fc.common[mode]),
        ea.source,
        eb.source,
    )


def _histogram(values: np.ndarray) -> list[tuple[str, int]]:
    edges = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    counts = np.histogram(np.clip(values, 0, 1), bins=edges)[0]
    return [(f"{lo:.1f}–{hi:.1f}", int(c)) for (lo, hi), c in zip(pairwise(edges), counts, strict=True)]


def compare(
    submissions: list[Submission],
    starters: dict[str, SourceFile],
    files: tuple[str, ...],
    min_score: float = 0.3,
    limit: int = 1000,
    common: int | None = -1,
) -> Comparison:
    """Score every pair of `submissions` on `files`; the pairs scoring at least `min_score`, at
    most `limit` of them, are reported with their regions. `common` -1: default_common."""
    started = time.perf_counter()
    usable = [s for s in submissions if s.files]
    common = default_common(len(usable)) if common == -1 else common
    per_file = {name: compare_file(name, usable, Starter.of(starters.get(name)), common) for name in files}
    n = len(usable)
    shared = sum((fc.shared for fc in per_file.values()), np.zeros((n, n), dtype=np.float32))
    size_a = sum((fc.size_a for fc in per_file.values()), np.zeros((n, n), dtype=np.float32))
    overall = shared / np.maximum(np.minimum(size_a, size_a.T), FLOOR)
    indexed = time.perf_counter()
    iu, ju = np.triu_indices(n, 1)
    values, sharing = overall[iu, ju], shared[iu, ju] > 0
    names = [s.student for s in usable]
    picked = [k for k in np.nonzero(sharing & (values >= min_score))[0].tolist()]
    picked.sort(key=lambda k: (-values[k], names[iu[k]], names[ju[k]]))
    file_scores = {name: fc.scores() for name, fc in per_file.items()}
    pairs = []
    for rank, k in enumerate(picked[:limit], start=1):
        i, j = int(iu[k]), int(ju[k])
        found = [m for name, fc in per_file.items() if (m := _file_match(fc, file_scores[name], i, j))]
        pairs.append(Pair(rank, names[i], names[j], float(values[k]), found))
    not_compared = {
        s.student: s.rejected or "; ".join(f"{k}: {v}" for k, v in sorted(s.problems.items())) or "no file to compare"
        for s in submissions
        if not s.files
    }
    return Comparison(
        students=[s.student for s in submissions],
        compared=n,
        pairs_total=len(values),
        pairs_sharing=int(sharing.sum()),
        pairs=pairs,
        histogram=_histogram(values),
        not_compared=not_compared,
        problems={s.student: dict(s.problems) for s in usable if s.problems},
        notes=[],
        common=common,
        timings={"index_s": indexed - started, "regions_s": time.perf_counter() - indexed},
        pairs_over=len(picked),
    )
