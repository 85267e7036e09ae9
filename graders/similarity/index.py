"""The class index: which submissions share which fingerprints, and the pair scores it gives.

Per required file there is an inverted index from fingerprint to the submissions that have it:
the incidence matrix of (submission, fingerprint), kept only for fingerprints that two or more
submissions share. Shared counts for every pair come from that matrix times its transpose (numpy's
BLAS, in column blocks), so the work grows with the shared fingerprints, never with the number of
pairs times the size of a file; a pair sharing nothing costs nothing beyond its cell.

Score of a file for a pair: shared fingerprints / the smaller side's fingerprints (containment,
as MOSS's per-side percentages, rather than Jaccard): copying a solution and adding code of one's
own keeps the score high, where Jaccard would dilute it. Its weakness, a tiny file that is wholly
contained by chance, is met by a floor on the denominator (FLOOR fingerprints, about two methods).
The floor grows with the class: at least a third of the median submission's own fingerprints, so
a submission with next to nothing of its own (an untouched starter, whose given code is removed)
cannot score high by being wholly contained in another.

Starter code is removed first, and a fingerprint held by more than Common.limit(N) submissions
(a share of the class, and never fewer than a count) is the class's, not a pair's: code most of
the class has is code they were given (a starter nobody named) or code everyone writes alike.
"""

import math
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from graders.similarity.normalise import Stream, ast_stream, token_stream
from graders.similarity.sources import SourceFile, Submission
from graders.similarity.winnow import Fingerprints, all_hashes, winnow

FLOOR = 10
FLOOR_SHARE = 1 / 3  # of the median submission's own fingerprints: the class's floor, if more than FLOOR
_BLOCK = 4096  # fingerprint columns per dense block of the incidence matrix (N x 4096 float32)
_EMPTY = np.zeros(0, dtype=np.uint64)


@dataclass(frozen=True)
class Common:
    """A fingerprint held by more than `limit(N)` of N submissions is common to the class and
    removed: more than `fraction` of them and more than `count`. The count keeps a pair (or a
    pair and one more) in a folder of five; the fraction scales to a class of 500 (MOSS's -m is a
    count alone, Dolos has either). fraction 1 removes nothing."""

    fraction: float = 0.1
    count: int = 2

    def limit(self, students: int) -> int:
        return max(self.count, math.floor(self.fraction * students))


def class_floor(sizes: np.ndarray) -> float:
    """The least denominator of a score: FLOOR, or FLOOR_SHARE of the median own size if larger."""
    present = sizes[sizes > 0]
    return max(float(FLOOR), FLOOR_SHARE * float(np.median(present))) if len(present) else float(FLOOR)


@dataclass
class Starter:
    """All k-gram hashes of the starter's file, in both stream kinds."""

    ast: np.ndarray = field(default_factory=lambda: _EMPTY)
    tokens: np.ndarray = field(default_factory=lambda: _EMPTY)

    @classmethod
    def of(cls, source: SourceFile | None) -> "Starter":
        if source is None:
            return cls()
        tree = ast_stream(source.units)
        return cls(all_hashes(tree) if tree else _EMPTY, all_hashes(token_stream(source.units)))


@dataclass
class Entry:
    """One student's file: its fingerprints (starter removed) in the AST stream, or None where it
    does not parse; the token-stream ones are made only when some file of the class needs them."""

    source: SourceFile
    ast: Fingerprints | None
    _tokens: Fingerprints | None = None

    def tokens(self, starter: Starter) -> Fingerprints:
        if self._tokens is None:
            self._tokens = winnow(token_stream(self.source.units)).without(starter.tokens)
        return self._tokens

    def fingerprints(self, mode: str, starter: Starter) -> Fingerprints:
        return self.tokens(starter) if mode == "tokens" or self.ast is None else self.ast


def fingerprint(source: SourceFile, starter: Starter) -> Entry:
    tree: Stream | None = ast_stream(source.units)
    return Entry(source, winnow(tree).without(starter.ast) if tree else None)


@dataclass
class Counts:
    shared: np.ndarray  # (N, N) float32: fingerprints each pair shares
    sizes: np.ndarray  # (N,) each submission's own fingerprints, common ones left out
    common: np.ndarray  # sorted hashes held by too many submissions to count
    holders: np.ndarray  # how many submissions hold each of `common`


def shared_counts(sets: list[np.ndarray], limit: int | None) -> Counts:
    """`sets[i]`: submission i's unique fingerprints; a hash held by more than `limit` is common.
    Pair counts through the inverted index."""
    n = len(sets)
    rows = np.concatenate([np.full(len(s), i, dtype=np.int64) for i, s in enumerate(sets)] or [np.zeros(0, np.int64)])
    hashes = np.concatenate(sets) if sets else _EMPTY
    uniq, col = np.unique(hashes, return_inverse=True)
    holders = np.bincount(col, minlength=len(uniq))
    too_common = holders > limit if limit is not None else np.zeros(len(uniq), dtype=bool)
    sizes = np.bincount(rows[~too_common[col]], minlength=n)
    keep = ((holders >= 2) & ~too_common)[col]
    rows, col = rows[keep], col[keep]
    order = np.argsort(col, kind="stable")
    rows, col = rows[order], np.unique(col[order], return_inverse=True)[1]
    shared = np.zeros((n, n), dtype=np.float32)
    bounds = np.searchsorted(col, np.arange(0, int(col.max(initial=-1)) + 1 + _BLOCK, _BLOCK))
    for a, b in pairwise(bounds):
        if a == b:
            continue
        block = np.zeros((n, _BLOCK), dtype=np.float32)
        block[rows[a:b], col[a:b] % _BLOCK] = 1.0
        shared += block @ block.T
    np.fill_diagonal(shared, 0)
    return Counts(shared, sizes, uniq[too_common], holders[too_common])


@dataclass
class FileComparison:
    """One required file across the class: shared counts and sizes per pair, and the kind of
    stream each pair was compared in (tokens where either side does not parse)."""

    name: str
    shared: np.ndarray
    size_a: np.ndarray  # (N, N): the row submission's size in the pair's stream kind
    by_tokens: np.ndarray  # (N, N) bool
    common: dict[str, np.ndarray]
    holders: dict[str, np.ndarray]  # per stream kind: how many submissions hold each common hash
    entries: list[Entry | None]
    starter: Starter
    sizes: np.ndarray  # (N,) own fingerprints in the AST stream (0: no file)
    floor: float

    def scores(self) -> np.ndarray:
        smaller = np.minimum(self.size_a, self.size_a.T)
        return self.shared / np.maximum(smaller, self.floor)

    def mode(self, i: int, j: int) -> str:
        return "tokens" if self.by_tokens[i, j] else "ast"


def _counts(entries: list[Entry | None], mode: str, starter: Starter, limit: int | None) -> Counts:
    sets = [
        e.fingerprints(mode, starter).unique() if e and (mode == "tokens" or e.ast is not None) else _EMPTY
        for e in entries
    ]
    return shared_counts(sets, limit)


def compare_file(name: str, submissions: list[Submission], starter: Starter, limit: int | None) -> FileComparison:
    """One required file across the class; `limit`: Common.limit of the class (None: keep all)."""
    entries = [fingerprint(s.files[name], starter) if name in s.files else None for s in submissions]
    n = len(entries)
    broken = np.array([e is not None and e.ast is None for e in entries], dtype=bool)
    tree = _counts(entries, "ast", starter, limit)
    size_a = np.broadcast_to(tree.sizes[:, None], (n, n)).astype(np.float32)
    by_tokens = broken[:, None] | broken[None, :]
    shared, found, held = tree.shared, {"ast": tree.common}, {"ast": tree.holders}
    if broken.any():
        flat = _counts(entries, "tokens", starter, limit)
        shared = np.where(by_tokens, flat.shared, tree.shared)
        size_a = np.where(by_tokens, flat.sizes[:, None].astype(np.float32), size_a)
        found["tokens"], held["tokens"] = flat.common, flat.holders
    sizes = np.where(broken, size_a.max(axis=1, initial=0), tree.sizes)
    return FileComparison(name, shared, size_a, by_tokens, found, held, entries, starter, sizes, class_floor(sizes))
