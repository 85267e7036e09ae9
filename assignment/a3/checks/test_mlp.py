"""3(a)ii MLP.forward."""

import a3_fingerprints as fp
import torch
from a3_checklib import A3, activations, cases, explicit, generator
from hypothesis import given

from graders.checks.checking import assert_close


@given(case=cases())
@explicit
def test_mlp_agrees(a3: A3, case):
    state, ref = a3.weights("MLP", case)
    x = activations(case, generator(case, 1, a3.seed))
    out = a3.output("MLP", "forward", case, state, x.float(), shape=tuple(x.shape))
    assert_close(out, ref(x.double()).detach(), "MLP.forward", fingerprints=lambda: fp.mlp(ref, x.double()))


@given(case=cases(min_length=2))
def test_mlp_position_wise(a3: A3, case):
    state, ref = a3.weights("MLP", case)
    gen = generator(case, 2, a3.seed)
    x = activations(case, gen)
    perm = torch.randperm(case.length, generator=gen)
    out = a3.output("MLP", "forward", case, state, x.float(), shape=tuple(x.shape))
    a3.does_work("MLP", "forward", case, ref, x, out)
    permuted = a3.rerun("MLP", "forward", x[:, perm].float(), shape=tuple(x.shape))
    assert_close(permuted, out[:, perm], "MLP.forward on permuted positions (it should permute the outputs)")
