"""3(a)v Transformer.forward."""

import math

import a3_fingerprints as fp
import torch
import torch.nn.functional as F
from a3_checklib import A3, agrees_with, assert_prefix_unchanged, cases, explicit, generator, standin_or_full, tokens
from hypothesis import given

from graders.checks.checking import CheckFailure, assert_close, fail, tolerance
from graders.execution.client import StudentError

CLS = "Transformer"


def _shape(case):
    return (case.batch, case.length, case.vocab_size)


@given(case=cases())
@explicit
def test_transformer_agrees(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    ids = tokens(case, generator(case, 1, a3.seed))
    parts = (ref.embeddings.weight, ref.position_embeddings.weight, list(ref.backbone), ref.final_layer_norm,
             ref.lm_head.weight)
    try:
        out = a3.output(CLS, "forward", case, state, ids, shape=_shape(case),
                        shapes=fp.logits_shapes(case.batch, case.length, case.d_model))
    except StudentError as e:
        found = _crash_diagnosis(a3, case, parts, ids) if e.where == "Transformer.forward" else None
        if found:
            fail(str(e), diagnosis=found)
        raise
    assert_close(out, ref(ids).detach(), "Transformer.forward logits", fingerprints=lambda: fp.forward(*parts, ids))


def _crash_diagnosis(a3: A3, case, parts: tuple, ids: torch.Tensor):
    """For a forward that crashed: the known mistake it is on token ids the position table can index."""
    try:
        return fp.forward_small_ids(lambda small: a3.rerun(CLS, "forward", small, shape=_shape(case)), *parts, ids)
    except (CheckFailure, StudentError):
        return None


@given(case=cases(min_layers=2))
@explicit
def test_transformer_wiring(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    gen = generator(case, 2, a3.seed)
    ids = tokens(case, gen)
    stand_ins = [(torch.randn(case.d_model, case.d_model, generator=gen) / math.sqrt(case.d_model),
                  0.3 * torch.randn(case.d_model, generator=gen)) for _ in range(case.n_layers)]
    full = agrees_with(a3, CLS, "forward", case, state, (ids,), ref(ids).detach())
    with standin_or_full("Transformer.forward", "stand-in blocks", full):
        _wiring(a3, case, state, ids, stand_ins)


def _wiring(a3: A3, case, state, ids, stand_ins) -> None:
    a3.build(CLS, case, state)
    for i, (w, b) in enumerate(stand_ins):
        a3.swap("m", f"backbone.{i}", kind="affine", weight=w, bias=b)
    stand_ins = [(w.double(), b.double()) for w, b in stand_ins]
    out = a3.rerun(CLS, "forward", ids, shape=_shape(case), shapes=fp.logits_shapes(case.batch, case.length,
                                                                                   case.d_model))
    s = {k: v.double() for k, v in state.items()}
    blocks = [lambda h, w=w, b=b: h @ w.T + b for w, b in stand_ins]

    def final_norm(h: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(h, (case.d_model,), s["final_layer_norm.weight"], s["final_layer_norm.bias"])

    tok, pos, head = s["embeddings.weight"], s["position_embeddings.weight"], s["lm_head.weight"]
    h = tok[ids] + pos[: case.length]
    for block in blocks:
        h = block(h)
    assert_close(out, final_norm(h) @ head.T, "Transformer.forward with stand-in blocks "
                 "(token + position embeddings, the blocks in order, final_layer_norm, lm_head)",
                 fingerprints=lambda: fp.forward(tok, pos, blocks, final_norm, head, ids))


@given(case=cases(min_length=2))
@explicit
def test_transformer_causal(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    gen = generator(case, 3, a3.seed)
    ids = tokens(case, gen)
    out = a3.output(CLS, "forward", case, state, ids, shape=_shape(case))
    a3.does_work(CLS, "forward", case, ref, ids, out)
    t = int(torch.randint(0, case.length - 1, (1,), generator=gen))
    changed = ids.clone()
    changed[:, t + 1:] = (ids[:, t + 1:] + 1 + torch.randint(0, case.vocab_size - 1, ids[:, t + 1:].shape,
                                                                generator=gen)) % case.vocab_size
    moved = a3.rerun(CLS, "forward", changed, shape=_shape(case))
    assert_prefix_unchanged(moved, out, t, "logits", "tokens", "the model sees the future")


@given(case=cases(min_length=3))
def test_transformer_uses_positions(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    ids = torch.full((case.batch, case.length), int(case.seed % case.vocab_size))
    out = a3.output(CLS, "forward", case, state, ids, shape=_shape(case))
    a3.does_work(CLS, "forward", case, ref, ids, out)
    spread = float((out - out[:, :1]).abs().max())
    if spread <= tolerance(out):
        fail("on a sequence of one repeated token every position gets the same logits: position "
             "embeddings are not used, and without them the model cannot tell positions apart (Q2(b))")


@given(case=cases())
def test_transformer_returns_logits(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    ids = tokens(case, generator(case, 4, a3.seed))
    out = a3.output(CLS, "forward", case, state, ids, shape=_shape(case))
    a3.does_work(CLS, "forward", case, ref, ids, out)
    if (out >= 0).all() and torch.allclose(out.sum(-1), torch.ones(()).double(), atol=1e-4):
        fail("Transformer.forward returned probabilities (each row sums to 1): return the raw logits of lm_head")
    if (out <= 0).all() and torch.allclose(out.exp().sum(-1), torch.ones(()).double(), atol=1e-4):
        fail("Transformer.forward returned log-probabilities: return the raw logits of lm_head")
