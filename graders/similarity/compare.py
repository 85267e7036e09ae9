"""The class compared: pair scores over all required files, ranked, and for the pairs shown the
matching regions mapped back to source lines."""

import time
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from graders.similarity.index import Common, FileComparison, Starter, class_floor, compare_file
from graders.similarity.removed import FileRemoved, removed_from
from graders.similarity.sources import SourceFile, Submission
from graders.similarity.winnow import Fingerprints

GAP = 3  # fingerprints apart (on both sides) that still belong to one matching region
# Lines apart that still belong to one region: starter code between two matches has no fingerprints
# left (removed), so fingerprints adjacent in the list may be a whole given method apart.
LINE_GAP = 3
DEFAULT_COMMON = Common()


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
    regions: list[Region] | None  # None: not looked for (a pair past the `limit` with regions)
    a: SourceFile | None
    b: SourceFile | None

    def lines(self, side: str) -> list[tuple[int, int]]:
        return [getattr(r, side) for r in self.regions or []]


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
    pairs: list[Pair]  # every pair scoring min_score or more, best first
    histogram: list[tuple[str, int]]  # pair scores of the whole class, binned
    not_compared: dict[str, str]  # student -> why (rejected, or no file usable)
    problems: dict[str, dict[str, str]]  # student -> file -> why that file was not compared
    notes: list[str]
    common: Common
    common_limit: int | None  # a fingerprint held by more submissions than this was removed
    floor: float  # the least denominator of a pair's score
    removed: list[FileRemoved] = field(default_factory=list)
    near_empty: dict[str, int] = field(default_factory=dict)  # student -> own fingerprints, under the floor
    starter: str = ""  # the starter removed, and why that one (set by run.py)
    with_regions: int = 0  # the first this many of `pairs` have their matched lines
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def pairs_over(self) -> int:
        return len(self.pairs)


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


def _file_match(fc: FileComparison, scores: np.ndarray, i: int, j: int, find_regions: bool) -> FileMatch | None:
    if fc.shared[i, j] <= 0:
        return None
    mode = fc.mode(i, j)
    ea, eb = fc.entries[i], fc.entries[j]
    assert ea is not None and eb is not None  # a pair sharing fingerprints has the file on both sides
    found = None
    if find_regions:
        fa, fb = ea.fingerprints(mode, fc.starter), eb.fingerprints(mode, fc.starter)
        found = regions(fa, fb, fc.common[mode])
    return FileMatch(
        fc.name,
        float(scores[i, j]),
        int(fc.shared[i, j]),
        int(fc.size_a[i, j]),
        int(fc.size_a[j, i]),
        mode,
        found,
        ea.source,
        eb.source,
    )


def _histogram(values: np.ndarray) -> list[tuple[str, int]]:
    edges = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    counts = np.histogram(np.clip(values, 0, 1), bins=edges)[0]
    return [(f"{lo:.1f}–{hi:.1f}", int(c)) for (lo, hi), c in zip(pairwise(edges), counts, strict=True)]


def _scores(per_file: dict[str, FileComparison], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Every pair's shared fingerprints and score over all files together, each submission's own
    fingerprints, and the floor used."""
    shared = sum((fc.shared for fc in per_file.values()), np.zeros((n, n), dtype=np.float32))
    size_a = sum((fc.size_a for fc in per_file.values()), np.zeros((n, n), dtype=np.float32))
    own = sum((fc.sizes for fc in per_file.values()), np.zeros(n))
    floor = class_floor(own)
    return shared, shared / np.maximum(np.minimum(size_a, size_a.T), floor), own, floor


def _not_compared(submissions: list[Submission]) -> dict[str, str]:
    return {
        s.student: s.rejected or "; ".join(f"{k}: {v}" for k, v in sorted(s.problems.items())) or "no file to compare"
        for s in submissions
        if not s.files
    }


def compare(
    submissions: list[Submission],
    starters: dict[str, SourceFile],
    files: tuple[str, ...],
    min_score: float = 0.3,
    limit: int = 1000,
    common: Common | None = DEFAULT_COMMON,
) -> Comparison:
    """Score every pair of `submissions` on `files`; every pair scoring at least `min_score` is
    listed, the first `limit` of them with their matching regions. `common` None: nothing removed
    as common to the class."""
    started = time.perf_counter()
    usable = [s for s in submissions if s.files]
    n = len(usable)
    cap = common.limit(n) if common else None
    per_file = {name: compare_file(name, usable, Starter.of(starters.get(name)), cap) for name in files}
    shared, overall, own, floor = _scores(per_file, n)
    indexed = time.perf_counter()
    iu, ju = np.triu_indices(n, 1)
    values, sharing = overall[iu, ju], shared[iu, ju] > 0
    names = [s.student for s in usable]
    picked = [k for k in np.nonzero(sharing & (values >= min_score))[0].tolist()]
    picked.sort(key=lambda k: (-values[k], names[iu[k]], names[ju[k]]))
    file_scores = {name: fc.scores() for name, fc in per_file.items()}
    pairs = []
    for rank, k in enumerate(picked, start=1):
        i, j = int(iu[k]), int(ju[k])
        found = [m for name, fc in per_file.items() if (m := _file_match(fc, file_scores[name], i, j, rank <= limit))]
        pairs.append(Pair(rank, names[i], names[j], float(values[k]), found))
    return Comparison(
        students=[s.student for s in submissions],
        compared=n,
        pairs_total=len(values),
        pairs_sharing=int(sharing.sum()),
        pairs=pairs,
        histogram=_histogram(values),
        not_compared=_not_compared(submissions),
        problems={s.student: dict(s.problems) for s in usable if s.problems},
        notes=[],
        common=common or Common(1.0, 0),
        common_limit=cap,
        floor=floor,
        removed=[removed_from(fc, names, starters.get(name)) for name, fc in per_file.items()],
        with_regions=min(limit, len(pairs)),
        near_empty={names[i]: int(own[i]) for i in np.nonzero(own < floor)[0].tolist()},
        timings={"index_s": indexed - started, "regions_s": time.perf_counter() - indexed},
    )
