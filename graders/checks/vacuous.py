"""Points for a property mean the code does the work. A constant is causal, permutation
equivariant and batch independent; the input handed back unchanged is all of those and leaves its
input alone. So a property check first asks, with require_work, whether the student's outputs are
non-degenerate where the reference's are, and fails saying the property holds trivially when not."""

from collections.abc import Sequence

import torch

from graders.checks.checking import fail, tolerance

# How far the outputs' scale may be from the reference's: generous, so that real mistakes (a missing
# scale, probabilities for logits) still earn their properties; a stub scaled to nothing does not.
SCALE_FACTOR = 1000.0
TRIVIAL = "the property holds trivially, so it earns nothing"


def _rms(t: torch.Tensor) -> float:
    return float(t.double().pow(2).mean().sqrt()) if t.numel() else 0.0


def _spread(ts: Sequence[torch.Tensor]) -> float:
    """The largest difference between any two of `ts` (same shapes only)."""
    return max(
        (
            float((a.double() - b.double()).abs().max())
            for i, a in enumerate(ts)
            for b in ts[i + 1 :]
            if a.shape == b.shape and a.numel()
        ),
        default=0.0,
    )


def _along(t: torch.Tensor, axis: int) -> float:
    """How much `t` varies along `axis`."""
    if t.dim() < abs(axis) or t.shape[axis] < 2:
        return 0.0
    return float((t.double() - t.double().narrow(axis, 0, 1)).abs().max())


def require_work(
    what: str,
    outs: Sequence[torch.Tensor],
    refs: Sequence[torch.Tensor],
    inputs: Sequence[torch.Tensor] = (),
    positions: int | None = -2,
    scale: bool = True,
) -> None:
    """Fail unless `outs` (the student's, on different inputs) do the work that `refs` (the
    reference's, on the same inputs) do: they depend on the input where the reference's do, vary
    along `positions` where the reference's do, are not the input handed back (`inputs`, the same
    order, where shapes match) and, with `scale`, are within SCALE_FACTOR of the reference's size."""
    tol = max(tolerance(r.double()) for r in refs)
    if len(outs) > 1 and _spread(refs) > tol and _spread(outs) <= tol:
        fail(f"{what} gives the same output for different inputs: it does not depend on its input; {TRIVIAL}")
    for out, ref in zip(outs, refs, strict=False):
        if positions is not None and _along(ref, positions) > tol and _along(out, positions) <= tol:
            fail(
                f"{what} gives the same output at every position, where the right output differs between "
                f"positions; {TRIVIAL}"
            )
    for out, ref, x in zip(outs, refs, inputs, strict=False):
        if (
            out.shape == x.shape
            and float((out - x.double()).abs().max()) <= tol
            and float((ref.double() - x.double()).abs().max()) > tol
        ):
            fail(f"{what} returns its input unchanged; {TRIVIAL}")
    size, right = max(map(_rms, outs)), max(map(_rms, refs))
    if scale and right > 0 and not right / SCALE_FACTOR <= size <= right * SCALE_FACTOR:
        fail(
            f"{what} gives outputs of size {size:.3g} where the right ones are of size {right:.3g} (more than "
            f"{SCALE_FACTOR:g} times off); {TRIVIAL}"
        )
