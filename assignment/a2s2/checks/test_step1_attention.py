"""Step 1: scaled_dot_product_attention without a mask, and the handout's Q2 permutation property."""

import a2s2_fingerprints as fp
import torch
from a2s2_attend import AXES, FN, Case, attend, cases, explicit, what
from a2s2_checklib import A2S2, generator
from hypothesis import given

from graders.checks.checking import assert_close


@given(case=cases())
@explicit
def test_sdpa_agrees(nb: A2S2, case: Case):
    q, k, v = case.tensors(nb.seed)
    out = attend(nb, q, k, v)
    assert_close(out, nb.ref.scaled_dot_product_attention(q, k, v), what(q, k, v), axes=AXES[q.dim()],
                 fingerprints=lambda: fp.attention(q, k, v))


def test_sdpa_permutation(nb: A2S2):
    q, k, v = Case((2,), 5, 6, 4, 3, 5).tensors(nb.seed)
    out = attend(nb, q, k, v)
    q2, k2, v2 = Case((2,), 5, 6, 4, 3, 6).tensors(nb.seed)
    nb.does_work(FN, [out, attend(nb, q2, k2, v2)],
                 [nb.ref.scaled_dot_product_attention(q, k, v), nb.ref.scaled_dot_product_attention(q2, k2, v2)])
    gen = generator(nb.seed, 7)
    keys, queries = torch.randperm(6, generator=gen), torch.randperm(5, generator=gen)
    assert_close(attend(nb, q, k[:, keys], v[:, keys]), out,
                 f"{FN} with the keys and values permuted together (attention is a weighted sum over the keys: their "
                 "order does not matter)", axes=AXES[3])
    assert_close(attend(nb, q[:, queries], k, v), out[:, queries],
                 f"{FN} with the queries permuted, against the output's rows permuted the same way (each query is "
                 "answered on its own)", axes=AXES[3])
