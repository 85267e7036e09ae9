"""What hidden checks use to fail with feedback a student can act on."""

from typing import Any

import numpy as np
import pytest
import torch


class CheckFailure(AssertionError):
    """A check failed; `message` is the student-facing sentence, the rest goes into the report."""

    def __init__(self, message: str, measured: float | None = None, tolerance: float | None = None,
                 where: str | None = None):
        super().__init__(message)
        self.message, self.measured, self.tolerance, self.where = message, measured, tolerance, where


def fail(message: str, **extra: Any) -> None:
    raise CheckFailure(message, **extra)


def not_applicable(reason: str) -> None:
    """The check does not apply to this submission; its weight goes to the item's other checks."""
    pytest.skip(f"not applicable: {reason}")


# float32 arithmetic in a different but correct order (einsum, SDPA, a per-head loop) differs from
# the float64 reference by ~1e-6 relative; bugs differ by 1e-2 or more. Start from
# torch.testing's float32 atol (1e-5), scaled by the output's magnitude, with 10x headroom.
RTOL = 1e-4


def tolerance(expected: torch.Tensor) -> float:
    return RTOL * max(1.0, float(expected.abs().max()))


def _index_words(index: tuple[int, ...], axes: tuple[str, ...]) -> str:
    names = list(axes) + [f"dim {i}" for i in range(len(axes), len(index))]
    return ", ".join(f"{n} {i}" for n, i in zip(names, index))


def expect_tensor(out: dict, shape: tuple[int, ...], what: str, floating: bool = True) -> torch.Tensor:
    """The wire form of a returned value, checked to be a finite tensor of the right shape."""
    if out.get("kind") != "tensor":
        fail(f"{what} returned {out.get('kind')}, expected a tensor of shape {tuple(shape)}")
    got = tuple(out["shape"])
    if got != tuple(shape):
        hint = ": not implemented (this is what the unfilled starter returns)" if got in ((1,), (0,)) else ""
        fail(f"{what} returned shape {got}, expected {tuple(shape)}{hint}")
    if "array" not in out:
        fail(f"{what} returned a tensor on the {out.get('device')} device")
    t = torch.from_numpy(out["array"])
    if floating:
        if not t.is_floating_point():
            fail(f"{what} returned dtype {out['torch_dtype']}, expected a floating point tensor")
        bad = ~torch.isfinite(t)
        if bad.any():
            first = tuple(int(i) for i in bad.nonzero()[0])
            fail(f"{what} returned NaN or inf (first at index {first})")
    return t.double() if floating else t


def assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str,
                 axes: tuple[str, ...] = ("batch", "position")) -> float:
    """Max abs error of `actual` against `expected`, failing with where it is worst."""
    tol = tolerance(expected)
    err = (actual.double() - expected.double()).abs()
    worst = float(err.max()) if err.numel() else 0.0
    if worst > tol:
        index = tuple(int(i) for i in np.unravel_index(int(err.argmax()), tuple(err.shape)))
        where = _index_words(index[:len(axes)], axes) if axes else None
        at = f" at {where}" if where else ""
        fail(f"{what} differs from the reference by up to {worst:.3g}{at} (tolerance {tol:.1g})",
             measured=worst, tolerance=tol, where=where)
    return worst
