"""Step 4: SelfAttention.forward: its wiring (with the grader's stand-in pieces), the whole against the
reference, causality and the handout's Q2 prefix permutation."""

from dataclasses import dataclass

import a2s2_fingerprints as fp
import torch
from a2s2_checklib import A2S2, generator, randn
from hypothesis import example, given
from hypothesis import strategies as st

from graders.checks.checking import CheckFailure, assert_close, not_applicable, tolerance
from graders.execution.client import StudentError
from graders.execution.worker import standins

PIECES = type("Pieces", (), {k: staticmethod(v) for k, v in standins.NOTEBOOK_PIECES.items()})
CLS = "SelfAttention"


@dataclass(frozen=True)
class Case:
    d_model: int
    n_heads: int
    batch: int
    length: int
    seed: int

    def __repr__(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, x of shape ({self.batch}, {self.length}, {self.d_model})"


@st.composite
def cases(draw) -> Case:
    d_model, n_heads = draw(st.sampled_from(((12, 3), (16, 1), (8, 8), (15, 5), (16, 4))))
    return Case(d_model, n_heads, draw(st.integers(1, 3)), draw(st.integers(2, 7)), draw(st.integers(0, 2**16)))


EXPLICIT = (Case(12, 3, 2, 5, 1), Case(16, 4, 2, 6, 2), Case(8, 8, 1, 4, 3))


def explicit(test):
    for case in reversed(EXPLICIT):
        test = example(case=case)(test)
    return test


def built(nb: A2S2, case: Case, salt: int = 0) -> tuple[torch.nn.Module, torch.Tensor]:
    """The student's SelfAttention built with random weights; the reference with them, and an input."""
    state, ref = nb.ref_attention(case.d_model, case.n_heads, case.seed + salt)
    nb.build(CLS, [case.d_model, case.n_heads], state)
    return ref, randn(generator(nb.seed, case.seed, salt), case.batch, case.length, case.d_model)


def with_pieces(ref: torch.nn.Module, x: torch.Tensor, pieces) -> torch.Tensor:
    """What SelfAttention's wiring gives with `pieces` (the reference's or the grader's stand-ins)."""
    H, T = ref.n_heads, x.shape[1]
    q, k, v = (pieces.split_heads(proj(x), H) for proj in (ref.q_proj, ref.k_proj, ref.v_proj))
    return ref.out_proj(pieces.merge_heads(pieces.scaled_dot_product_attention(q, k, v, pieces.causal_mask(T))))


def _agrees_whole(nb: A2S2, ref: torch.nn.Module, x: torch.Tensor) -> bool:
    try:
        out = nb.forward(x)
    except (CheckFailure, StudentError):
        return False
    expected = ref(x).detach()
    return float((out - expected).abs().max()) <= tolerance(expected)


@given(case=cases())
@explicit
def test_self_attention_wiring(nb: A2S2, case: Case):
    ref, x = built(nb, case)
    with torch.no_grad():
        expected = with_pieces(ref, x, PIECES)
    try:
        out = nb.forward(x, pieces=True)
        assert_close(out, expected, "SelfAttention.forward with the grader's stand-in split_heads, causal_mask, "
                     f"scaled_dot_product_attention and merge_heads in your notebook ({case})",
                     fingerprints=lambda: fp.self_attention(ref, x, PIECES))
    except (CheckFailure, StudentError):
        if not _agrees_whole(nb, ref, x):
            raise
        not_applicable("your SelfAttention.forward does not call the notebook's split_heads, causal_mask, "
                       "scaled_dot_product_attention and merge_heads (it computes them its own way), and it matches "
                       "the reference: it was checked whole")


@given(case=cases())
@explicit
def test_self_attention_agrees(nb: A2S2, case: Case):
    ref, x = built(nb, case, 1)
    out = nb.forward(x)
    with torch.no_grad():
        assert_close(out, ref(x), f"SelfAttention.forward ({case})", fingerprints=lambda: fp.self_attention(ref, x, nb.ref))


def _second(nb: A2S2, ref: torch.nn.Module, x: torch.Tensor, out: torch.Tensor, what: str) -> None:
    """The outputs must do the reference's work before a property of them earns anything."""
    other = randn(generator(nb.seed, 41), *x.shape)
    with torch.no_grad():
        nb.does_work(what, [out, nb.forward(other)], [ref(x), ref(other)], [x, other])


def test_self_attention_causal(nb: A2S2):
    case = Case(12, 3, 2, 6, 42)
    ref, x = built(nb, case, 2)
    out = nb.forward(x)
    _second(nb, ref, x, out, "SelfAttention.forward")
    for t in (0, 3):
        later = x.clone()
        later[:, t + 1:] = randn(generator(nb.seed, 43, t), case.batch, case.length - t - 1, case.d_model)
        assert_close(nb.forward(later)[:, :t + 1], out[:, :t + 1],
                     f"SelfAttention.forward at positions 0..{t} when only positions after {t} changed (no position "
                     "may see the future)")


def test_self_attention_prefix_permutation(nb: A2S2):
    case = Case(12, 3, 2, 6, 44)
    ref, x = built(nb, case, 3)
    out = nb.forward(x)
    _second(nb, ref, x, out, "SelfAttention.forward")
    t = case.length - 1
    perm = torch.cat([torch.randperm(t, generator=generator(nb.seed, 45)), torch.tensor([t])])
    assert_close(nb.forward(x[:, perm])[:, t], out[:, t],
                 f"output at the last position {t} after permuting positions 0..{t - 1} (attention alone has no notion "
                 "of order, so it should not change)", axes=("batch",))
