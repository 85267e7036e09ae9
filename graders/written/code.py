"""The written engine's code parts: a function of the student's .py, run in the sandboxed worker on
random inputs and compared with the grader's own float64 reference, plus the properties the key's
code has (masked positions change nothing, each row of weights sums to 1).

Student code runs only in the worker; what comes back is plain data (a JSON header and raw arrays,
checked by graders.checks.checking.expect_tensor), never unpickled. A failure that matches exactly
one known mistake (no sqrt(d_k) scaling, the softmax over the wrong dimension, masked scores set to
0, the mask not applied, triu for tril, ...) names it in the check's diagnosis.
"""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

import torch

from graders.checks.checking import CheckFailure, Fingerprint, assert_close, expect_tensor, fail, tolerance
from graders.execution.client import StudentError, Worker, WorkerError
from graders.scoring.results import CheckResult, Diagnosis
from graders.written.key import CODE_CHECKS, AnswerKey, check_name

SEED = 20240624
Tensor = torch.Tensor


@dataclass
class Caller:
    """One student function, called in the worker with float32 tensors (None passes as None)."""

    worker: Worker
    module: str
    function: str

    def __call__(self, *args: Tensor | None) -> dict:
        wire = [None if a is None else a.float().contiguous().numpy() for a in args]
        # `where` is the function's name: the breaker pays a hang or a crash of it once per grade.
        reply = self.worker.request("function", self.function, module=self.module, function=self.function, args=wire)
        return reply["out"]


def _random(*shape: int, gen: torch.Generator, scale: float = 1.0) -> Tensor:
    # Rounded to float32 first: the reference sees exactly what the student's code gets.
    return (torch.randn(*shape, generator=gen) * scale).float().double()


# -- the references and the mistakes they can be made into ------------------------------------
def attention_ref(
    Q: Tensor,
    K: Tensor,
    V: Tensor,
    mask: Tensor | None = None,
    *,
    scale: str = "sqrt",
    dim: int = -1,
    fill: float = -math.inf,
    masked: bool = True,
) -> Tensor:
    d_k = Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / {"sqrt": math.sqrt(d_k), "none": 1.0, "d_k": d_k}[scale]
    if mask is not None and masked:
        scores = scores.masked_fill(mask == 0, fill)
    return torch.softmax(scores, dim=dim) @ V


def causal_ref(
    scores: Tensor, *, upper: bool = False, fill: float = -math.inf, masked: bool = True, dim: int = -1
) -> Tensor:
    size = scores.shape[-1]
    ones = torch.ones(size, size, dtype=torch.bool)
    keep = torch.triu(ones) if upper else torch.tril(ones)
    if masked:
        scores = scores.masked_fill(~keep, fill)
    return torch.softmax(scores, dim=dim)


_ZERO_FILL = (
    "matches masked scores set to 0 instead of -inf: softmax gives a score of 0 the weight e^0 / sum, not 0, "
    "so the masked positions still get attention; -inf (or a large negative number) gives them weight 0"
)
ATTENTION_MISTAKES: tuple[tuple[str, dict, str], ...] = (
    (
        "attn_no_scaling",
        dict(scale="none"),
        "matches attention without dividing the scores by sqrt(d_k): a dot product of d_k-dimensional vectors "
        "has variance d_k, and dividing by sqrt(d_k) brings it back to 1 so that the softmax does not saturate",
    ),
    (
        "attn_scaled_by_d_k",
        dict(scale="d_k"),
        "matches the scores divided by d_k instead of sqrt(d_k): the scores' standard deviation is sqrt(d_k)",
    ),
    (
        "attn_softmax_over_queries",
        dict(dim=-2),
        "matches the softmax taken over the queries (dim -2): each query's weights over the keys must sum to 1, "
        "so the softmax runs over the last dimension, the keys",
    ),
    ("attn_mask_zero", dict(fill=0.0), _ZERO_FILL),
    (
        "attn_mask_ignored",
        dict(masked=False),
        "matches attention with the mask not applied: the positions where the mask is 0 must get weight 0",
    ),
)
CAUSAL_MISTAKES: tuple[tuple[str, dict, str], ...] = (
    (
        "causal_triu",
        dict(upper=True),
        "matches an upper-triangular mask (triu): each position attends to itself and the positions after it, "
        "the future; a causal mask keeps the positions j <= i, the lower triangle (tril)",
    ),
    ("causal_mask_zero", dict(fill=0.0), _ZERO_FILL),
    (
        "causal_no_mask",
        dict(masked=False),
        "matches the softmax with no mask applied: every position attends to the future positions too",
    ),
    (
        "causal_softmax_dim",
        dict(dim=-2),
        "matches the softmax taken over dim -2 (the queries): each query position's weights over the keys "
        "must sum to 1, so the softmax runs over the last dimension",
    ),
)


def _fingerprints(mistakes: Iterable[tuple[str, dict, str]], ref: Callable[..., Tensor], *args: Tensor | None):
    return lambda: [Fingerprint(name, text, partial(ref, *args, **kw)) for name, kw, text in mistakes]


def _no_diagonal(weights: Tensor) -> Diagnosis | None:
    if torch.isnan(weights[..., 0, :]).all():
        return Diagnosis(
            id="causal_no_diagonal",
            explanation="position 0 has no position it may attend to, so its softmax is NaN: the mask hides the "
            "diagonal too, but a position may attend to itself (j <= i)",
        )
    return None


# -- attention(Q, K, V, mask) -------------------------------------------------------------------
def _qkv(
    gen: torch.Generator, q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...]
) -> tuple[Tensor, Tensor, Tensor]:
    return _random(*q, gen=gen), _random(*k, gen=gen), _random(*v, gen=gen)


def _random_mask(shape: tuple[int, ...], gen: torch.Generator) -> Tensor:
    """0/1 (float) with at least one 1 and one 0 in every row: no row is all masked or all kept."""
    mask = torch.rand(*shape, generator=gen) < 0.5
    m = shape[-1]
    keep = torch.randint(m, (*shape[:-1], 1), generator=gen)
    hide = (keep + 1 + torch.randint(m - 1, keep.shape, generator=gen)) % m
    return mask.scatter(-1, keep, True).scatter(-1, hide, False).double()


def _compare_attention(call: Caller, Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None) -> None:
    expected = attention_ref(Q, K, V, mask)
    shapes = f"Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)}"
    what = f"attention(Q, K, V{', mask' if mask is not None else ''}) with {shapes}"
    weights = (tuple(expected.shape[:-1]) + (K.shape[-2],), "attn_returns_weights", "matches the shape of the "
               "attention weights, not of the output: the weights must be applied to V")  # fmt: skip
    out = expect_tensor(call(Q, K, V, mask), tuple(expected.shape), what, shapes=[weights])
    assert_close(
        out, expected, what, axes=(), fingerprints=_fingerprints(ATTENTION_MISTAKES, attention_ref, Q, K, V, mask)
    )


def check_attention_unmasked(call: Caller) -> None:
    gen = torch.Generator().manual_seed(SEED)
    for q, k, v in (
        ((5, 64), (5, 64), (5, 64)),
        ((2, 6, 16), (2, 9, 16), (2, 9, 4)),
        ((2, 3, 4, 8), (2, 3, 7, 8), (2, 3, 7, 5)),
    ):
        _compare_attention(call, *_qkv(gen, q, k, v), None)


def check_attention_masked(call: Caller) -> None:
    gen = torch.Generator().manual_seed(SEED + 1)
    for q, k, v, mask in (
        ((2, 6, 16), (2, 6, 16), (2, 6, 16), (6, 6)),
        ((2, 3, 4, 8), (2, 3, 7, 8), (2, 3, 7, 5), (2, 1, 4, 7)),
    ):
        _compare_attention(call, *_qkv(gen, q, k, v), _random_mask(mask, gen))


def check_attention_causal(call: Caller, size: int = 6, t: int = 2) -> None:
    """With a causal mask, the output up to position t must not change when only the keys and
    values after t change; and it must change when the value at position 0 does (not vacuous)."""
    gen = torch.Generator().manual_seed(SEED + 2)
    Q, K, V = _qkv(gen, (2, size, 16), (2, size, 16), (2, size, 16))
    mask = torch.tril(torch.ones(size, size, dtype=torch.float64))
    what = f"attention(Q, K, V, mask) with the causal mask tril(ones({size}, {size}))"
    out = expect_tensor(call(Q, K, V, mask), tuple(Q.shape), what)
    K2, V2 = K.clone(), V.clone()
    K2[:, t + 1 :], V2[:, t + 1 :] = _random(2, size - t - 1, 16, gen=gen), _random(2, size - t - 1, 16, gen=gen)
    changed = (expect_tensor(call(Q, K2, V2, mask), tuple(Q.shape), what) - out)[:, : t + 1].abs().max()
    if float(changed) > tolerance(out):
        fail(
            f"{what}: changing only the keys and values after position {t} changed the output at positions "
            f"0 to {t} by up to {float(changed):.3g}: the masked (future) positions still get some weight",
            measured=float(changed),
            tolerance=tolerance(out),
        )
    V3 = V.clone()
    V3[:, 0] += 1.0  # position 0 attends only to itself: its output moves by exactly 1
    moved = (expect_tensor(call(Q, K, V3, mask), tuple(Q.shape), what) - out)[:, 0].abs().max()
    if float(moved) < 1e-3:
        fail(
            f"{what}: the output at position 0 did not move when the value at position 0 (the only one it may "
            "attend to) moved by 1: it does not depend on its input as attention does, so the causal property "
            "holds trivially and earns nothing"
        )


# -- causal_masked_softmax(scores) --------------------------------------------------------------
def _weights(call: Caller, scores: Tensor) -> Tensor:
    what = f"causal_masked_softmax(scores) with scores {tuple(scores.shape)}"
    return expect_tensor(call(scores), tuple(scores.shape), what, nan=_no_diagonal)


def check_causal_matches(call: Caller) -> None:
    gen = torch.Generator().manual_seed(SEED + 3)
    for shape in ((5, 5), (2, 3, 6, 6), (1, 1), (3, 8, 8)):
        scores = _random(*shape, gen=gen, scale=2.0)
        got = _weights(call, scores)
        what = f"causal_masked_softmax(scores) with scores {shape}"
        assert_close(
            got, causal_ref(scores), what, axes=(), fingerprints=_fingerprints(CAUSAL_MISTAKES, causal_ref, scores)
        )


def _require_work(call: Caller, scores: Tensor, weights: Tensor, gen: torch.Generator) -> None:
    """The weights must change with the scores: a constant is causal and may sum to 1 by row, and
    earns nothing."""
    change = (_weights(call, scores + _random(*scores.shape, gen=gen)) - weights).abs().max()
    if float(change) < 1e-3:
        fail(
            "causal_masked_softmax(scores): the weights did not change when the scores did: it does not "
            "depend on its input as a softmax does, so the property holds trivially and earns nothing"
        )


def check_causal_future_zero(call: Caller, size: int = 7) -> None:
    gen = torch.Generator().manual_seed(SEED + 4)
    scores = _random(2, size, size, gen=gen, scale=3.0)
    weights = _weights(call, scores)
    future = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    leak = weights.abs() * future
    if float(leak.max()) > 1e-6:
        _, i, j = (int(x) for x in (leak == leak.max()).nonzero()[0])
        fail(
            f"causal_masked_softmax(scores): position {i} gives weight {float(leak.max()):.3g} to the later position "
            f"{j}: a causal mask gives every future position weight exactly 0 (the softmax of -inf, or of a large "
            "negative number, is 0; of 0 it is not)",
            measured=float(leak.max()),
            tolerance=1e-6,
        )
    other = torch.where(future, _random(2, size, size, gen=gen, scale=3.0), scores)
    changed = float((_weights(call, other) - weights).abs().max())
    if changed > 1e-6:
        fail(
            "causal_masked_softmax(scores): changing only the scores of future positions (j > i) changed the "
            f"weights by up to {changed:.3g}: they must not take part in the softmax at all",
            measured=changed,
            tolerance=1e-6,
        )
    _require_work(call, scores, weights, gen)


def check_causal_rows(call: Caller, size: int = 6) -> None:
    gen = torch.Generator().manual_seed(SEED + 5)
    scores = _random(2, size, size, gen=gen, scale=3.0)
    weights = _weights(call, scores)
    off = (weights.sum(-1) - 1).abs()
    if float(off.max()) > 1e-4 or float(weights.min()) < 0:
        _, i = (int(x) for x in (off == off.max()).nonzero()[0])
        fail(
            f"causal_masked_softmax(scores): the weights of position {i} sum to {float(weights.sum(-1)[0, i]):.4g}, "
            "not 1 (or some are negative): each query position's weights over the keys form a distribution, so "
            "the softmax runs over the last dimension",
            measured=float(off.max()),
            tolerance=1e-4,
        )
    _require_work(call, scores, weights, gen)


CHECKS: dict[str, Callable[[Caller], None]] = {
    "attention_unmasked": check_attention_unmasked,
    "attention_masked": check_attention_masked,
    "attention_causal": check_attention_causal,
    "causal_softmax_matches": check_causal_matches,
    "causal_softmax_future_zero": check_causal_future_zero,
    "causal_softmax_rows": check_causal_rows,
}
assert set(CHECKS) == set(CODE_CHECKS), "graders/written/key.py's CodeCheck and CHECKS must name the same checks"


def _run(check: Callable[[Caller], None], call: Caller, base: dict) -> CheckResult:
    try:
        check(call)
    except CheckFailure as e:
        return CheckResult(
            status="failed",
            message=e.message,
            measured=e.measured,
            tolerance=e.tolerance,
            where=e.where,
            diagnosis=e.diagnosis,
            **base,
        )
    except StudentError as e:
        return CheckResult(status="failed", message=str(e), **base)
    except WorkerError as e:
        return CheckResult(status="failed", message=f"{call.function}(): {e}", **base)
    return CheckResult(status="passed", message="agrees with the reference", **base)


def code_results(key: AnswerKey, module: str, worker: Worker | None, broken: str | None) -> dict[str, CheckResult]:
    """Every code part's result by check name; `broken` (the .py is missing, or its import failed)
    fails them all with that reason."""
    results: dict[str, CheckResult] = {}
    for q, p in key.code_parts():
        assert p.code is not None  # code_parts() gives only those
        name = check_name(q, p)
        base = dict(name=name, title=p.rubric, weight=p.weight)
        if broken is not None or worker is None:
            results[name] = CheckResult(status="failed", message=f"{q.id}: {broken}", **base)
            continue
        worker.begin_check(p.rubric)  # the last part's failure must not short-circuit this one
        results[name] = _run(CHECKS[p.code.check], Caller(worker, module, p.code.function), base)
    return results
