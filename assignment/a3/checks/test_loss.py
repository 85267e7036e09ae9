"""3(b)ii Transformer.get_loss_on_batch."""

import math
from typing import Callable

import a3_fingerprints as fp
import torch
from a3_checklib import A3, Case, cases, explicit, generator, next_token_loss, standin_or_full, tokens
from hypothesis import given

from graders.checks.checking import (CheckFailure, assert_close, expect_tensor, fail, shape_diagnosis,
                              tolerance)
from graders.scoring.results import Diagnosis
from graders.checks.vacuous import require_work

CLS = "Transformer"
WHAT = "Transformer.get_loss_on_batch"


def _value(out: dict, shapes=()) -> torch.Tensor:
    """The loss as a float64 scalar: a 0-d (or one-element) tensor, or a plain float; `shapes`
    explains a loss that was not reduced."""
    if out.get("kind") == "float":
        return torch.tensor(float(out["value"]), dtype=torch.float64)
    if out.get("kind") != "tensor" or "array" not in out:
        fail(f"{WHAT} returned {out.get('kind')}, expected a scalar tensor")
    t = torch.from_numpy(out["array"]).double()
    if tuple(out["shape"]) == (1,) and not out["requires_grad"]:
        fail(f"{WHAT} returned a shape (1,) tensor not connected to the model: not implemented "
             "(this is what the unfilled starter returns)")
    if t.numel() != 1:
        fail(f"{WHAT} returned shape {tuple(out['shape'])}, expected a scalar (the mean over all predictions)",
             diagnosis=shape_diagnosis(tuple(out["shape"]), shapes))
    if not torch.isfinite(t).all():
        fail(f"{WHAT} returned {float(t.reshape(()))}")
    return t.reshape(())


def _loss(a3: A3, ids: torch.Tensor, **kw) -> dict:
    return a3.call("m", CLS, "get_loss_on_batch", ids, **kw)


@given(case=cases(min_length=2))
@explicit
def test_loss_agrees(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    ids = tokens(case, generator(case, 1, a3.seed))
    a3.build(CLS, case, state)
    got = _value(_loss(a3, ids)["out"], fp.loss_shapes(case.batch, case.length))
    assert_close(got, next_token_loss(ref(ids), ids).detach(), f"{WHAT} value", axes=(),
                 fingerprints=lambda: fp.loss(ref, ids))


def _full_loss_agrees(a3: A3, case: Case, state, ref, ids: torch.Tensor) -> Callable[[], bool]:
    """For standin_or_full: the student's whole model gives the reference's loss on `ids`."""
    def check() -> bool:
        a3.build(CLS, case, state)
        expected = next_token_loss(ref(ids), ids)
        return abs(float(_value(_loss(a3, ids)["out"]) - expected)) <= tolerance(expected)
    return check


@given(case=cases(min_length=2))
@explicit
def test_loss_isolated(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    gen = generator(case, 2, a3.seed)
    ids = tokens(case, gen)
    logits = 3 * torch.randn(case.batch, case.length, case.vocab_size, generator=gen)
    with standin_or_full(WHAT, "a stand-in forward", _full_loss_agrees(a3, case, state, ref, ids)):
        a3.build(CLS, case, state)
        a3.swap("m", "", kind="fixed_logits", method="forward", logits=logits)
        got = _value(_loss(a3, ids)["out"])
        expected = next_token_loss(logits, ids)
        if abs(float(got - expected)) > 1e-4 * max(1.0, float(expected)):
            fail(f"{WHAT} with a stand-in forward gave {float(got):.4f}; the next-token cross entropy of those "
                 f"logits is {float(expected):.4f}: compare the logits at positions 0..T-2 with the tokens at "
                 "1..T-1", measured=abs(float(got - expected)))


@given(case=cases(min_length=2))
@explicit
def test_loss_gradients(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    ids = tokens(case, generator(case, 3, a3.seed))
    a3.build(CLS, case, state)
    reply = _loss(a3, ids, grad=True)
    expected = next_token_loss(ref(ids), ids)

    def detached() -> Diagnosis | None:
        try:  # the value is right, only the graph is cut
            right = abs(float(_value(reply["out"]) - expected)) <= tolerance(expected)
        except CheckFailure:
            right = False
        return fp.known("loss_detached") if right else None

    if "grad_error" in reply:
        fail(f"{WHAT}: {reply['grad_error']}; a detached loss (e.g. built from .item()) cannot train the model",
             diagnosis=detached())
    expected.backward()
    grads = reply.get("grads", {})
    if not grads:
        fail(f"after backward no gradient reached any parameter of the model: {WHAT} is not computed from "
             "the model's output", diagnosis=detached())
    scale = max(float(p.grad.abs().max()) for p in ref.parameters() if p.grad is not None)
    for name, p in ref.named_parameters():
        if p.grad is None:
            continue
        if name not in grads:
            fail(f"after backward no gradient reached {name}")
        got = expect_tensor(grads[name], tuple(p.shape), f"the gradient of {name}")
        err = float((got - p.grad).abs().max())
        tol = 1e-4 * scale
        if err > tol:
            fail(f"the gradient of {name} differs from the reference's by up to {err:.3g} (tolerance {tol:.1g})",
                 measured=err, tolerance=tol, where=name)


def test_loss_mean(a3: A3):
    """With uniform logits every prediction costs log V, so the mean is log V whatever B and T."""
    for batch, length in ((1, 2), (3, 5), (2, 8)):
        case = Case(12, 3, 1, 8, 13, batch, length, 9)
        state, ref = a3.weights(CLS, case)
        ids = tokens(case, generator(case, 4, a3.seed))
        with standin_or_full(WHAT, "a stand-in forward", _full_loss_agrees(a3, case, state, ref, ids)):
            a3.build(CLS, case, state)
            a3.swap("m", "", kind="fixed_logits", method="forward", logits=torch.zeros(batch, length, case.vocab_size))
            got = float(_value(_loss(a3, ids)["out"]))
            want = math.log(case.vocab_size)
            if abs(got - want) > 1e-4 * want:
                fail(f"with uniform logits over {case.vocab_size} tokens every prediction costs log "
                     f"{case.vocab_size} = {want:.4f}, so the mean over B·(T-1) = {batch * (length - 1)} predictions "
                     f"is {want:.4f}; got {got:.4f} for B={batch}, T={length}")
            _depends_on_logits(a3, case, ids, got, want)


def _depends_on_logits(a3: A3, case: Case, ids: torch.Tensor, got: float, want: float) -> None:
    """A loss that returns log V whatever the logits passes the uniform case trivially."""
    logits = 3 * torch.randn(case.batch, case.length, case.vocab_size, generator=generator(case, 5, a3.seed))
    a3.swap("m", "", kind="fixed_logits", method="forward", logits=logits)
    other = _value(_loss(a3, ids)["out"])
    require_work(WHAT, [torch.tensor(got, dtype=torch.float64), other],
                 [torch.tensor(want, dtype=torch.float64), next_token_loss(logits, ids)], positions=None)
