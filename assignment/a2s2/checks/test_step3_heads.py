"""Step 3: split_heads and merge_heads."""

import re

import a2s2_fingerprints as fp
import torch
from a2s2_checklib import A2S2, generator, randn

from graders.checks.checking import assert_close, fail
from graders.execution.client import StudentError
from graders.scoring.results import Diagnosis

# (B, T, d_model, n_heads): several heads, one head, d_head 1, a batch of 3.
SHAPES = ((2, 5, 12, 3), (3, 4, 8, 8), (2, 3, 6, 1), (2, 6, 16, 4))
_VIEW = re.compile(r"shape '\[([-0-9, ]+)\]' is invalid")


def _sizes_diagnosis(e: StudentError, B: int, T: int, D: int, H: int) -> Diagnosis | None:
    """A view or reshape that raised: the size it asked for names the pitfall (the embedding not
    divided among the heads before the split, or not restored after the merge)."""
    found = _VIEW.search(str(e.info.get("message", "")))
    if not found:
        return None
    asked = [int(n) for n in found.group(1).split(",")]
    if len(asked) == 4 and asked[-1] == D and H in asked:
        return fp.known("split_not_divided")
    if len(asked) == 3 and asked[-1] == D // H:
        return fp.known("merge_not_concatenated")
    return None


def split(nb: A2S2, x: torch.Tensor, H: int) -> torch.Tensor:
    B, T, D = x.shape
    try:
        return nb.tensor("split_heads", x, H, shape=(B, H, T, D // H),
                         what=f"split_heads(x of shape ({B}, {T}, {D}), n_heads={H})", shapes=fp.split_shapes(B, T, D, H))
    except StudentError as e:
        fail(str(e), diagnosis=_sizes_diagnosis(e, B, T, D, H))
        raise


def merge(nb: A2S2, x: torch.Tensor) -> torch.Tensor:
    B, H, T, d = x.shape
    try:
        return nb.tensor("merge_heads", x, shape=(B, T, H * d), what=f"merge_heads(x of shape ({B}, {H}, {T}, {d}))",
                         shapes=fp.merge_shapes(B, H, T, d))
    except StudentError as e:
        fail(str(e), diagnosis=_sizes_diagnosis(e, B, T, H * d, H))
        raise


def test_split_heads_agrees(nb: A2S2):
    for B, T, D, H in SHAPES:
        x = randn(generator(nb.seed, 31, D, H), B, T, D)
        out = split(nb, x, H)
        assert_close(out, nb.ref.split_heads(x, H), f"split_heads(x of shape ({B}, {T}, {D}), n_heads={H})",
                     axes=("batch", "head", "position"), fingerprints=lambda: fp.split(x, H))


def test_merge_heads_agrees(nb: A2S2):
    for B, T, D, H in SHAPES:
        x = randn(generator(nb.seed, 32, D, H), B, H, T, D // H)
        out = merge(nb, x)
        assert_close(out, nb.ref.merge_heads(x), f"merge_heads(x of shape ({B}, {H}, {T}, {D // H}))",
                     axes=("batch", "position"), fingerprints=lambda: fp.merge(x))


def test_split_merge_round_trip(nb: A2S2):
    for B, T, D, H in SHAPES[:2]:
        x = randn(generator(nb.seed, 33, D, H), B, T, D)
        back = merge(nb, split(nb, x, H))
        assert_close(back, x, f"merge_heads(split_heads(x, {H})) against x of shape ({B}, {T}, {D})")
