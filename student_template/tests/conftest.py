"""Helpers of the public tests: the snapshot files in data/ and comparisons with readable messages.

data/ holds one small configuration (config.json), random weights for it (weights.pt: LayerNorms
and biases are random too, unlike the default init) and inputs with the staff solution's outputs
(cases.pt). All tests run on the CPU.
"""

import json
from pathlib import Path

import pytest
import torch

from model_solution import ModelConfig

DATA = Path(__file__).parent / "data"
CONFIG = ModelConfig(**json.loads((DATA / "config.json").read_text()))
torch.set_num_threads(1)  # the tensors are tiny: more threads only add overhead
WEIGHTS = torch.load(DATA / "weights.pt", map_location="cpu", weights_only=True)
CASES = torch.load(DATA / "cases.pt", map_location="cpu", weights_only=True)


def load(cls: type, prefix: str = "") -> torch.nn.Module:
    """An instance of `cls` (built from CONFIG) holding the weights under `prefix` in weights.pt."""
    module = cls(CONFIG)
    state = {k[len(prefix):]: v for k, v in WEIGHTS.items() if k.startswith(prefix)}
    module.load_state_dict(state)  # fails if an attribute name or shape differs from the assignment's
    return module.eval()


def check_tensor(got, shape: tuple[int, ...], what: str) -> None:
    if not isinstance(got, torch.Tensor):
        pytest.fail(f"{what} returned {type(got).__name__}, expected a tensor of shape {shape}")
    if tuple(got.shape) != tuple(shape):
        hint = " (the starter's placeholder `return torch.empty(1)`: not implemented yet)" \
            if tuple(got.shape) == (1,) else ""
        pytest.fail(f"{what} returned shape {tuple(got.shape)}, expected {tuple(shape)}{hint}")


def check_close(got, expected: torch.Tensor, what: str) -> None:
    """`got` matches `expected` up to float32 rounding: max |difference| <= 1e-4 · max(1, max |expected|)."""
    check_tensor(got, tuple(expected.shape), what)
    if not got.is_floating_point():
        pytest.fail(f"{what} returned dtype {got.dtype}, expected floating point")
    got = got.detach().double()
    expected = expected.double()
    if not torch.isfinite(got).all():
        pytest.fail(f"{what} returned NaN or inf")
    tolerance = 1e-4 * max(1.0, float(expected.abs().max()))
    error = (got - expected).abs()
    if error.numel() and float(error.max()) > tolerance:
        worst = tuple(int(i) for i in torch.nonzero(error == error.max())[0])
        pytest.fail(f"{what} differs from the expected output by up to {float(error.max()):.3g} "
                    f"(tolerance {tolerance:.1g}); worst at index {worst}: got {float(got[worst]):.5f}, "
                    f"expected {float(expected[worst]):.5f}")
