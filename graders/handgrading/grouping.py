"""Groups of identical or near-identical answers, graded in one action.

Two answers are in one group when their text is the same once case, spacing and punctuation are
set aside, or when their word 3-grams overlap by at least NEAR (Jaccard), linked transitively
(single linkage over the exact groups). Blank answers form one group of their own."""

import difflib
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

NEAR = 0.8  # Jaccard of word 3-grams: a changed word or two in a paragraph, not a different answer
_WORD = re.compile(r"[^\W_]+|[^\w\s]", re.UNICODE)  # words, and each symbol on its own (=, ^, +)
_PUNCTUATION = {".", ",", ";", ":", "!", "?", "'", '"', "(", ")", "-", "–"}


@dataclass(frozen=True)
class Group:
    id: str
    members: tuple[str, ...]  # students, sorted; the first is the group's representative
    exact: bool  # every member's text is the same (once normalised)
    blank: bool


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _PUNCTUATION]


def normalised(text: str) -> str:
    return " ".join(words(text))


def _shingles(tokens: list[str]) -> frozenset[str]:
    if len(tokens) < 3:
        return frozenset(tokens)
    return frozenset(" ".join(tokens[i : i + 3]) for i in range(len(tokens) - 2))


def _find(parent: dict[str, str], x: str) -> str:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _near_links(texts: list[str]) -> dict[str, str]:
    """Union-find over the distinct normalised texts, joined where near-identical."""
    parent = {t: t for t in texts}
    shingles = {t: _shingles(t.split()) for t in texts if t}
    for a, b in combinations([t for t in texts if t], 2):
        sa, sb = shingles[a], shingles[b]
        # |A & B| / |A | B| cannot reach NEAR when the sizes differ too much: skip the intersection.
        if min(len(sa), len(sb)) < NEAR * max(len(sa), len(sb)):
            continue
        if len(sa & sb) >= NEAR * len(sa | sb):
            parent[_find(parent, a)] = _find(parent, b)
    return parent


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """b against a, word by word: (op, text) with op "same", "del" (only in a) or "ins" (only in b)."""
    wa, wb = a.split(), b.split()
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("same", " ".join(wa[i1:i2])))
            continue
        if i2 > i1:
            out.append(("del", " ".join(wa[i1:i2])))
        if j2 > j1:
            out.append(("ins", " ".join(wb[j1:j2])))
    return out


def group_answers(texts: Mapping[str, str]) -> list[Group]:
    """`texts`: student -> answer text. The groups, largest first (then by their first student)."""
    norm = {s: normalised(t) for s, t in texts.items()}
    distinct = sorted(set(norm.values()))
    parent = _near_links(distinct)
    clusters: dict[str, list[str]] = {}
    for student in sorted(norm):
        clusters.setdefault(_find(parent, norm[student]), []).append(student)
    groups = []
    for members in clusters.values():
        first = members[0]
        digest = hashlib.sha256("\0".join(members).encode()).hexdigest()[:12]
        groups.append(Group(digest, tuple(members), len({norm[m] for m in members}) == 1, not norm[first]))
    return sorted(groups, key=lambda g: (-len(g.members), g.members[0]))
