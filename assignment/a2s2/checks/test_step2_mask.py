"""Step 2: causal_mask, and the mask argument of scaled_dot_product_attention."""

import a2s2_fingerprints as fp
import torch
from a2s2_checklib import A2S2, generator, randn
from hypothesis import given
from a2s2_attend import AXES, FN, Case, attend, cases, explicit, what

from graders.checks.checking import assert_close, diagnose, expect_tensor, fail


def student_mask(nb: A2S2, T: int) -> torch.Tensor:
    """causal_mask(T) as a bool tensor: bool, or numbers that are all 0 or 1."""
    out = expect_tensor(nb.call("causal_mask", T), (T, T), f"causal_mask({T})", floating=False)
    if out.dtype != torch.bool:
        if not bool(((out == 0) | (out == 1)).all()):
            fail(f"causal_mask({T}) has values other than 0 and 1 ({out.dtype}): it must be a bool tensor, True where "
                 "a query may attend (an additive 0 / -inf mask is another convention)")
        out = out != 0
    return out


def test_causal_mask_values(nb: A2S2):
    for T in (1, 2, 5, 7):
        out = student_mask(nb, T)
        right = torch.tril(torch.ones(T, T, dtype=torch.bool))
        if not torch.equal(out, right):
            i, j = (int(a) for a in (out != right).nonzero()[0])
            fail(f"causal_mask({T})[{i}, {j}] is {bool(out[i, j])}: query {i} may attend to key {j} exactly when "
                 f"{j} <= {i}", where=f"row {i}, column {j}", diagnosis=diagnose(out.double(), fp.causal_masks(T)))


def _applied_cases(nb: A2S2):
    """(q, k, v, mask, what the mask is) where no detail of step 1 matters: one key per query and per
    key one query (a permutation), then q = 0 with every row and column allowing 3 keys."""
    gen = generator(nb.seed, 21)
    q, k, v = randn(gen, 2, 5, 4), randn(gen, 2, 5, 4), randn(gen, 2, 5, 3)
    perm = torch.randperm(5, generator=gen)
    one = torch.zeros(5, 5, dtype=torch.bool)
    one[torch.arange(5), perm] = True
    yield q, k, v, one, "a mask that lets each query see exactly one key"
    rows = torch.arange(6)[:, None]
    band = torch.zeros(6, 6, dtype=torch.bool)
    for shift in (0, 2, 3):
        band[rows, (rows + shift) % 6] = True
    yield torch.zeros(2, 6, 4, dtype=torch.float64), randn(gen, 2, 6, 4), randn(gen, 2, 6, 3), band, \
        "q = 0 (equal scores) and a mask that lets each query see 3 keys"


def test_mask_applied(nb: A2S2):
    for q, k, v, mask, said in _applied_cases(nb):
        out = attend(nb, q, k, v, mask)
        assert_close(out, nb.ref.scaled_dot_product_attention(q, k, v, mask), f"{what(q, k, v, ', mask')} with {said}",
                     axes=AXES[3], fingerprints=lambda: fp.masked(q, k, v, mask))


def random_mask(case: Case, base: int) -> torch.Tensor:
    """Each query sees at least one key; with T_q == T_k, the causal mask."""
    if case.tq == case.tk:
        return torch.tril(torch.ones(case.tq, case.tk, dtype=torch.bool))
    mask = torch.rand(case.tq, case.tk, generator=generator(base, case.seed, 22)) < 0.5
    mask[torch.arange(case.tq), torch.arange(case.tq) % case.tk] = True
    return mask


@given(case=cases())
@explicit
def test_masked_attention_agrees(nb: A2S2, case: Case):
    q, k, v = case.tensors(nb.seed)
    mask = random_mask(case, nb.seed)
    out = attend(nb, q, k, v, mask)
    assert_close(out, nb.ref.scaled_dot_product_attention(q, k, v, mask), what(q, k, v, ", mask"),
                 axes=AXES[q.dim()], fingerprints=lambda: fp.masked(q, k, v, mask))


def test_masked_attention_causal(nb: A2S2):
    q, k, v = Case((2,), 6, 6, 4, 3, 23).tensors(nb.seed)
    mask = student_mask(nb, 6)
    out = attend(nb, q, k, v, mask)
    q2, k2, v2 = Case((2,), 6, 6, 4, 3, 24).tensors(nb.seed)
    ref = nb.ref.scaled_dot_product_attention
    nb.does_work(f"{FN} with causal_mask(6)", [out, attend(nb, q2, k2, v2, mask)],
                 [ref(q, k, v, ref_mask := torch.tril(torch.ones(6, 6, dtype=torch.bool))), ref(q2, k2, v2, ref_mask)])
    for t in (1, 3):
        later = [x.clone() for x in (q, k, v)]
        for x, other in zip(later, (q2, k2, v2)):
            x[:, t + 1:] = other[:, t + 1:]
        moved = attend(nb, *later, mask)
        assert_close(moved[:, :t + 1], out[:, :t + 1],
                     f"{FN} with causal_mask(6) at positions 0..{t} when only positions after {t} changed (the future "
                     "must not leak in)", axes=AXES[3])
