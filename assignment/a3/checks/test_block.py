"""3(a)iv DecoderBlock.forward: agreement, and its wiring alone with stand-in attention and MLP."""

import math

import a3_fingerprints as fp
import torch
import torch.nn.functional as F
from a3_checklib import A3, activations, agrees_with, cases, explicit, generator, standin_or_full
from hypothesis import given

from graders.checks.checking import assert_close

CLS = "DecoderBlock"


@given(case=cases())
@explicit
def test_block_agrees(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    x = activations(case, generator(case, 1, a3.seed))
    out = a3.output(CLS, "forward", case, state, x.float(), shape=tuple(x.shape))
    assert_close(out, ref(x.double()).detach(), "DecoderBlock.forward",
                 fingerprints=lambda: fp.block(ref.attention, ref.mlp, ref.pre_layer_norm, ref.post_layer_norm,
                                               x.double()))


def _affine(d: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(d, d, generator=gen) / math.sqrt(d), 0.3 * torch.randn(d, generator=gen)


@given(case=cases())
@explicit
def test_block_wiring(a3: A3, case):
    state, ref = a3.weights(CLS, case)
    gen = generator(case, 2, a3.seed)
    (wa, ba), (wm, bm) = _affine(case.d_model, gen), _affine(case.d_model, gen)
    x = activations(case, gen)
    full = agrees_with(a3, CLS, "forward", case, state, (x.float(),), ref(x.double()).detach())
    with standin_or_full("DecoderBlock.forward", "stand-in attention and MLP", full):
        _wiring(a3, case, state, x, (wa, ba), (wm, bm))


def _wiring(a3: A3, case, state, x, attention_weights, mlp_weights) -> None:
    (wa, ba), (wm, bm) = attention_weights, mlp_weights
    a3.build(CLS, case, state)
    a3.swap("m", "attention", kind="affine", weight=wa, bias=ba)
    a3.swap("m", "mlp", kind="affine", weight=wm, bias=bm)
    out = a3.rerun(CLS, "forward", x.float(), shape=tuple(x.shape))

    def norm(prefix: str, h: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(h, (case.d_model,), state[f"{prefix}.weight"].double(), state[f"{prefix}.bias"].double())

    def attention(h: torch.Tensor) -> torch.Tensor:
        return h @ wa.double().T + ba.double()

    def mlp(h: torch.Tensor) -> torch.Tensor:
        return h @ wm.double().T + bm.double()

    def pre(h: torch.Tensor) -> torch.Tensor:
        return norm("pre_layer_norm", h)

    def post(h: torch.Tensor) -> torch.Tensor:
        return norm("post_layer_norm", h)

    h = x.double()
    h = h + attention(pre(h))
    h = h + mlp(post(h))
    assert_close(out, h, "DecoderBlock.forward with stand-in attention and MLP (pre-norm: "
                 "x + attention(pre_layer_norm(x)), then x + mlp(post_layer_norm(x)))",
                 fingerprints=lambda: fp.block(attention, mlp, pre, post, x.double()))
