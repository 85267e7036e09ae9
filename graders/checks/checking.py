"""What hidden checks use to fail with feedback a student can act on."""

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

from graders.scoring.results import Diagnosis


class Fingerprint(NamedTuple):
    """A known mistake: its name, the explanation a student gets, and the output the mistaken code
    gives on the failing case (computed only when a check fails). Several fingerprints may share a
    name: two codings of one mistake."""

    id: str
    explanation: str
    output: Callable[[], torch.Tensor]


class CheckFailure(AssertionError):
    """A check failed; `message` is the student-facing sentence, the rest goes into the report."""

    def __init__(
        self,
        message: str,
        measured: float | None = None,
        tolerance: float | None = None,
        where: str | None = None,
        diagnosis: Diagnosis | None = None,
    ):
        super().__init__(message)
        self.message, self.measured, self.tolerance, self.where = message, measured, tolerance, where
        self.diagnosis = diagnosis


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


def diagnose(actual: torch.Tensor, fingerprints: Iterable[Fingerprint]) -> Diagnosis | None:
    """The one known mistake whose output `actual` matches within the checks' tolerance, or None
    when none or several do: a diagnosis is shown only when it cannot be the wrong one. A mistake
    whose code cannot run on this case (an index past the table, a shape that does not fit)
    matches nothing."""
    matched: dict[str, str] = {}
    for fp in fingerprints:
        if fp.id in matched:
            continue
        try:
            with torch.no_grad():
                expected = fp.output().double()
            if (
                expected.shape == actual.shape
                and expected.numel()
                and torch.isfinite(expected).all()
                and float((actual.double() - expected).abs().max()) <= tolerance(expected)
            ):
                matched[fp.id] = fp.explanation
        except Exception:  # a fingerprint that cannot run here matches nothing, and never fails a check
            continue
    return _only(matched)


def shape_diagnosis(got: tuple[int, ...], patterns: Iterable[tuple[tuple[int, ...], str, str]]) -> Diagnosis | None:
    """The explanation of a wrong shape, from (shape, id, explanation) patterns; a shape two
    patterns share explains nothing."""
    return _only({name: text for shape, name, text in patterns if tuple(shape) == tuple(got)})


def _only(matched: dict[str, str]) -> Diagnosis | None:
    """The diagnosis when exactly one mistake (id -> explanation) fits; in doubt, none."""
    if len(matched) != 1:
        return None
    [(name, explanation)] = matched.items()
    return Diagnosis(id=name, explanation=explanation)


def _index_words(index: tuple[int, ...], axes: tuple[str, ...]) -> str:
    names = list(axes) + [f"dim {i}" for i in range(len(axes), len(index))]
    return ", ".join(f"{n} {i}" for n, i in zip(names, index, strict=False))


def expect_tensor(
    out: dict,
    shape: tuple[int, ...],
    what: str,
    floating: bool = True,
    shapes: Iterable[tuple[tuple[int, ...], str, str]] = (),
    nan: Callable[[torch.Tensor], Diagnosis | None] | None = None,
) -> torch.Tensor:
    """The wire form of a returned value, checked to be a finite tensor of the right shape.
    `shapes` explains known wrong shapes (see shape_diagnosis); `nan` explains where NaNs are."""
    if out.get("kind") != "tensor":
        fail(f"{what} returned {out.get('kind')}, expected a tensor of shape {tuple(shape)}")
    got = tuple(out["shape"])
    if got != tuple(shape):
        hint = ": not implemented (this is what the unfilled starter returns)" if got in ((1,), (0,)) else ""
        fail(f"{what} returned shape {got}, expected {tuple(shape)}{hint}", diagnosis=shape_diagnosis(got, shapes))
    if "array" not in out:
        fail(f"{what} returned a tensor on the {out.get('device')} device")
    t = torch.from_numpy(out["array"])
    if floating:
        if not t.is_floating_point():
            fail(f"{what} returned dtype {out['torch_dtype']}, expected a floating point tensor")
        bad = ~torch.isfinite(t)
        if bad.any():
            first = tuple(int(i) for i in bad.nonzero()[0])
            fail(f"{what} returned NaN or inf (first at index {first})", diagnosis=nan(t) if nan else None)
    return t.double() if floating else t


def assert_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    what: str,
    axes: tuple[str, ...] = ("batch", "position"),
    fingerprints: Callable[[], Iterable[Fingerprint]] | None = None,
) -> float:
    """Max abs error of `actual` against `expected`, failing with where it is worst and, when
    `fingerprints` are given and exactly one matches, the known mistake it is."""
    tol = tolerance(expected)
    err = (actual.double() - expected.double()).abs()
    worst = float(err.max()) if err.numel() else 0.0
    if worst > tol:
        index = tuple(int(i) for i in np.unravel_index(int(err.argmax()), tuple(err.shape)))
        where = _index_words(index[: len(axes)], axes) if axes else None
        at = f" at {where}" if where else ""
        fail(
            f"{what} differs from the reference by up to {worst:.3g}{at} (tolerance {tol:.1g})",
            measured=worst,
            tolerance=tol,
            where=where,
            diagnosis=diagnose(actual, fingerprints()) if fingerprints else None,
        )
    return worst
