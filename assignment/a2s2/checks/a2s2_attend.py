"""Calls of the student's scaled_dot_product_attention on generated cases, shared by steps 1 and 2."""

from dataclasses import dataclass

import a2s2_fingerprints as fp
import torch
from a2s2_checklib import A2S2, generator, randn, shown
from hypothesis import example
from hypothesis import strategies as st

from graders.checks.checking import CheckFailure, fail, tolerance
from graders.execution.client import StudentError
from graders.scoring.results import Diagnosis

FN = "scaled_dot_product_attention"
AXES = {2: ("query",), 3: ("batch", "query"), 4: ("batch", "head", "query")}


@dataclass(frozen=True)
class Case:
    lead: tuple[int, ...]  # batch, heads
    tq: int
    tk: int
    dk: int
    dv: int
    seed: int

    def tensors(self, base: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        gen = generator(base, self.seed, *self.lead, self.tq, self.tk)
        return (randn(gen, *self.lead, self.tq, self.dk), randn(gen, *self.lead, self.tk, self.dk),
                randn(gen, *self.lead, self.tk, self.dv))


def what(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: str = "") -> str:
    return f"{FN}(q {shown(q)}, k {shown(k)}, v {shown(v)}{mask})"


@st.composite
def cases(draw) -> Case:
    lead = draw(st.sampled_from([(), (2,), (3,), (2, 3), (1, 4)]))
    return Case(lead, draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 8)),
                draw(st.integers(1, 6)), draw(st.integers(0, 2**16)))


# A batch with T_q ≠ T_k and d_v ≠ d_k, a heads axis, a plain matrix, a square case.
EXPLICIT = (Case((2,), 5, 7, 4, 3, 1), Case((2, 3), 4, 6, 8, 5, 2), Case((), 3, 5, 2, 4, 3), Case((3,), 6, 6, 4, 4, 4))


def explicit(test):
    for case in reversed(EXPLICIT):
        test = example(case=case)(test)
    return test


def _other_ranks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """The same numbers with 1 or 0 leading axes, whichever the failing input did not have."""
    if q.dim() != 3:
        yield tuple(t.reshape(-1, *t.shape[-2:]) for t in (q, k, v))
    if q.dim() != 2:
        yield tuple(t.reshape(-1, *t.shape[-2:])[0] for t in (q, k, v))


# What a matmul or transpose says when its axes do not fit (not an unpacking of q.shape, say).
_AXES_ERRORS = ("size of tensor", "Dimension out of range", "cannot be multiplied", "must match")


def fixed_axes(nb: A2S2, e: StudentError, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Diagnosis | None:
    """For an attention that raised on axes that do not fit: it is right with another number of
    leading axes."""
    if not any(text in str(e.info.get("message", "")) for text in _AXES_ERRORS):
        return None
    for args in _other_ranks(q, k, v):
        expected = nb.ref.scaled_dot_product_attention(*args)
        try:
            out = nb.tensor(FN, *args, shape=tuple(expected.shape))
        except (CheckFailure, StudentError):
            continue
        if float((out - expected).abs().max()) <= tolerance(expected):
            return fp.known("sdpa_transpose_fixed_axes")
    return None


def attend(nb: A2S2, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *mask: torch.Tensor) -> torch.Tensor:
    """The student's attention, checked for shape and NaN; a crash is explained when it can be."""
    shape = (*q.shape[:-1], v.shape[-1])
    said = what(q, k, v, ", mask" if mask else "")
    try:
        return nb.tensor(FN, q, k, v, *mask, shape=shape, what=said, shapes=fp.attention_shapes(q, k, v))
    except StudentError as e:
        fail(str(e), diagnosis=None if mask else fixed_axes(nb, e, q, k, v))
        raise
