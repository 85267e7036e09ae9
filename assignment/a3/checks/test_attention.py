"""3(a)iii CausalAttention.forward, and the handout's Q2 symmetries."""

import a3_fingerprints as fp
import torch
from a3_checklib import A3, Case, activations, assert_prefix_unchanged, cases, explicit, generator
from hypothesis import given

from graders.checks.checking import CheckFailure, assert_close, expect_tensor, fail, not_applicable, tolerance
from graders.execution.client import StudentError

CLS = "CausalAttention"


def _explain(case: Case, length: int | None = None) -> dict:
    """What a wrong shape or NaNs in the output mean."""
    return dict(shapes=fp.attention_shapes(case.batch, length or case.length, case.d_model, case.n_heads),
                nan=fp.attention_nan)


@given(case=cases())
@explicit
def test_attention_agrees(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    x = activations(case, generator(case, 1, a3.seed))
    out = a3.output(CLS, "forward", case, state, x.float(), shape=tuple(x.shape), **_explain(case))
    assert_close(out, ref(x.double()).detach(), "CausalAttention.forward",
                 fingerprints=lambda: fp.attention(ref, x.double()))


@given(case=cases(min_length=2))
@explicit
def test_attention_causal(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    gen = generator(case, 2, a3.seed)
    x = activations(case, gen)
    out = a3.output(CLS, "forward", case, state, x.float(), shape=tuple(x.shape))
    a3.does_work(CLS, "forward", case, ref, x, out)
    for t in range(case.length - 1):
        changed = x.clone()
        changed[:, t + 1:] = activations(case, gen)[:, t + 1:]
        moved = a3.rerun(CLS, "forward", changed.float(), shape=tuple(x.shape))
        assert_prefix_unchanged(moved, out, t, "output", "positions", "the causal mask lets the future in")


@given(case=cases(min_length=3))
@explicit
def test_attention_prefix_permutation(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    gen = generator(case, 3, a3.seed)
    x = activations(case, gen)
    out = a3.output(CLS, "forward", case, state, x.float(), shape=tuple(x.shape))
    a3.does_work(CLS, "forward", case, ref, x, out)
    t = case.length - 1
    perm = torch.cat([torch.randperm(t, generator=gen), torch.tensor([t])])
    moved = a3.rerun(CLS, "forward", x[:, perm].float(), shape=tuple(x.shape))
    assert_close(moved[:, t], out[:, t],
                 f"output at the last position {t} after permuting positions 0..{t - 1} (attention alone has "
                 "no notion of order, so it should not change)", axes=("batch",))


@given(case=cases(min_length=2))
@explicit
def test_attention_full_equivariance(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    gen = generator(case, 4, a3.seed)
    x = activations(case, gen)
    masked = a3.output(CLS, "forward", case, state, x.float(), shape=tuple(x.shape))
    a3.does_work(CLS, "forward", case, ref, x, masked)
    ones = torch.ones(1, 1, case.context_length, case.context_length)
    count = a3.worker.request("set_buffer", "setting causal_mask", handle="m", name="causal_mask",
                              value=ones.numpy())["count"]
    unmasked = a3.rerun(CLS, "forward", x.float(), shape=tuple(x.shape))
    if count == 0 or (unmasked - masked).abs().max() <= tolerance(masked):
        not_applicable("your attention does not read the causal_mask buffer (it builds its mask itself), "
                       "so the mask cannot be switched off")
    perm = torch.randperm(case.length, generator=gen)
    permuted = a3.rerun(CLS, "forward", x[:, perm].float(), shape=tuple(x.shape))
    assert_close(permuted, unmasked[:, perm],
                 "with causal_mask all ones, Z(PX) against P·Z(X) (attention should be permutation equivariant)")


@given(case=cases())
def test_attention_batch_independent(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    x = activations(Case(**{**case.__dict__, "batch": max(case.batch, 2)}), generator(case, 5, a3.seed))
    out = a3.output(CLS, "forward", case, state, x.float(), shape=tuple(x.shape))
    a3.does_work(CLS, "forward", case, ref, x, out)
    for b in range(x.shape[0]):
        alone = a3.rerun(CLS, "forward", x[b:b + 1].float(), shape=(1, *x.shape[1:]))
        assert_close(alone[0], out[b], f"batch row {b} computed alone against inside a batch of {x.shape[0]} "
                     "(rows of a batch must not mix)", axes=("position",))


def test_attention_every_length(a3: A3):
    case = Case(12, 3, 1, 7, 10, 2, 7, 11)
    state, ref = a3.weights(CLS, case)
    a3.build(CLS, case, state)
    x = activations(case, generator(case, 6, a3.seed))
    for length in range(1, case.context_length + 1):
        part = x[:, :length]
        try:
            reply = a3.call("m", CLS, "forward", part.float())
        except StudentError as e:
            if length < case.context_length and _works_at_full_context(a3, ref, x):
                fail(str(e), diagnosis=fp.known("attn_mask_not_sliced"))
            raise
        out = expect_tensor(reply["out"], tuple(part.shape),
                            f"CausalAttention.forward with T = {length} (context_length {case.context_length})",
                            **_explain(case, length))
        assert_close(out, ref(part.double()).detach(),
                     f"CausalAttention.forward with T = {length} < context_length {case.context_length}"
                     if length < case.context_length else "CausalAttention.forward with T = context_length",
                     fingerprints=lambda: fp.attention(ref, part.double()))


def _works_at_full_context(a3: A3, ref, x: torch.Tensor) -> bool:
    """For a forward that crashed on a shorter input: it runs, and agrees, at T == context_length."""
    try:
        out = expect_tensor(a3.call("m", CLS, "forward", x.float())["out"], tuple(x.shape), CLS)
    except (CheckFailure, StudentError):
        return False
    expected = ref(x.double()).detach()
    return float((out - expected).abs().max()) <= tolerance(expected)


def test_attention_input_untouched(a3: A3):
    case = Case(12, 3, 1, 6, 10, 2, 5, 12)
    state, ref = a3.weights(CLS, case)
    a3.build(CLS, case, state)
    x = activations(case, generator(case, 7, a3.seed)).float()
    reply = a3.call("m", CLS, "forward", x, return_inputs=True)
    out = expect_tensor(reply["out"], tuple(x.shape), "CausalAttention.forward")
    after = expect_tensor(reply["inputs_after"][0], tuple(x.shape), "the input after CausalAttention.forward")
    if not torch.equal(after.float(), x):
        fail("CausalAttention.forward modified its input tensor in place", diagnosis=fp.known("attn_input_modified"))
    a3.does_work(CLS, "forward", case, ref, x.double(), out)
