"""Winnowing (Schleimer, Wilkerson and Aiken 2003, the method of MOSS): hash every k-gram of a
stream, keep the smallest hash of every window of w consecutive k-grams. Any match of at least
w + k - 1 tokens is then found, and no match shorter than k is.

K and W are set on this repository's pairs (tests/test_similarity.py): with the AST stream a
line of code is ~10 tokens, so K = 12 ignores one-line coincidences (`x = x + self.f(self.g(x))`
is written alike by many), and W = 6 still catches any copied run of two lines or more.
"""

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from graders.similarity.normalise import Stream

K = 12
W = 6
MIN_SEGMENT = 4  # a function shorter than K tokens is one fingerprint, unless it is trivially short
_BASE = np.uint64(0x100000001B3)  # the FNV prime: an odd multiplier, arithmetic wraps mod 2**64
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@dataclass
class Fingerprints:
    """A file's selected fingerprints in stream order (a hash may repeat), each with the source
    lines its k-gram covers."""

    mode: str
    hashes: np.ndarray  # uint64
    lo: np.ndarray  # first line of the k-gram
    hi: np.ndarray  # last line of the k-gram

    def unique(self) -> np.ndarray:
        return np.unique(self.hashes)

    def without(self, removed: np.ndarray) -> "Fingerprints":
        """These fingerprints less the hashes in `removed` (sorted): e.g. the starter's."""
        keep = ~np.isin(self.hashes, removed, assume_unique=False)
        return Fingerprints(self.mode, self.hashes[keep], self.lo[keep], self.hi[keep])


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: the polynomial hash's low bits are poorly spread, and winnowing
    picks minima, so the order of hashes must look random."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * _MIX1
        h = (h ^ (h >> np.uint64(27))) * _MIX2
        return h ^ (h >> np.uint64(31))


def kgram_hashes(ids: np.ndarray, k: int = K) -> np.ndarray:
    """hash(ids[i:i+k]) for every i; a stream shorter than k gives one hash of all of it."""
    n = len(ids)
    if n < k:
        k = n
    count = n - k + 1
    h = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            h = h * _BASE + ids[j : j + count]
    return _mix(h)


def _segments(stream: Stream) -> list[tuple[int, int]]:
    bounds = [*stream.starts, len(stream.ids)]
    return [(a, b) for a, b in pairwise(bounds) if b - a >= MIN_SEGMENT]


def all_hashes(stream: Stream, k: int = K) -> np.ndarray:
    """Every k-gram hash of the stream, sorted and unique: what the starter code contributes, all
    of it, so that whatever a student's winnowing selects from starter code is removed."""
    parts = [kgram_hashes(stream.ids[a:b], k) for a, b in _segments(stream)]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)


def winnow(stream: Stream, k: int = K, w: int = W) -> Fingerprints:
    """The stream's fingerprints: per segment, the rightmost smallest hash of each window."""
    hashes, lo, hi = [], [], []
    for a, b in _segments(stream):
        h = kgram_hashes(stream.ids[a:b], k)
        span = min(k, b - a)
        if len(h) <= w:
            picked = np.array([len(h) - 1 - int(np.argmin(h[::-1]))])
        else:
            windows = sliding_window_view(h, w)
            picked = np.unique(np.arange(len(windows)) + (w - 1 - np.argmin(windows[:, ::-1], axis=1)))
        hashes.append(h[picked])
        lo.append(sliding_window_view(stream.lo[a:b], span)[picked].min(axis=1))
        hi.append(sliding_window_view(stream.hi[a:b], span)[picked].max(axis=1))
    if not hashes:
        empty = np.zeros(0, dtype=np.int64)
        return Fingerprints(stream.mode, np.zeros(0, dtype=np.uint64), empty, empty)
    return Fingerprints(stream.mode, np.concatenate(hashes), np.concatenate(lo), np.concatenate(hi))
