"""A property test: it holds for every input, so Hypothesis tries many random ones.

The grader checks this and several other properties of your model, on many configurations.
"""

import torch
from conftest import CONFIG, check_tensor, load
from hypothesis import given, settings
from hypothesis import strategies as st

from model_solution import CausalAttention


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(length=st.integers(2, CONFIG.context_length), data=st.data())
def test_causal_attention_ignores_the_future(length, data):
    """Changing the inputs after position t must not change any output at positions 0..t."""
    t = data.draw(st.integers(0, length - 2), label="t")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    gen = torch.Generator().manual_seed(seed)
    attention = load(CausalAttention, "backbone.0.attention.")
    x = torch.randn(2, length, CONFIG.d_model, generator=gen)
    changed = x.clone()
    changed[:, t + 1:] = torch.randn(2, length - t - 1, CONFIG.d_model, generator=gen)
    with torch.no_grad():
        out, out_changed = attention(x), attention(changed)
    check_tensor(out, tuple(x.shape), "CausalAttention.forward")
    moved = (out[:, :t + 1] - out_changed[:, :t + 1]).abs().amax(dim=(0, 2))
    assert float(moved.max()) <= 1e-5 * max(1.0, float(out.abs().max())), (
        f"the output at position {int(moved.argmax())} moved by {float(moved.max()):.3g} when only "
        f"inputs after position {t} changed: position {int(moved.argmax())} sees the future")
