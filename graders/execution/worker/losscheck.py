"""The student's get_loss_on_batch, as train() calls it, against the definition: the next-token cross
entropy of the logits the model's own forward gave in that same call (so dropout, autocast or a
KV cache change nothing). A loss that differs, or that no gradient can flow back through, tells
the trusted side that a failed training run may be the loss's doing, not the loop's (3(b)ii's bug
is then not charged to 3(b)iii again)."""

from typing import Any

import torch
import torch.nn.functional as F

RTOL = 1e-4  # as the checks' float32 tolerance: a correct loss in another order differs by ~1e-6


def input_ids(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The batch a get_loss_on_batch call was given: its first argument, or `input_ids=`."""
    ids = args[0] if args else kwargs.get("input_ids", next(iter(kwargs.values()), None))
    if isinstance(ids, torch.Tensor) and ids.dim() == 2 and not ids.is_floating_point():
        return ids
    return None


def _logits(out: Any) -> torch.Tensor | None:
    """The logits in what forward returned: the tensor itself, or the first 3-d one of a tuple
    (a forward that also returns a cache or a loss)."""
    candidates = out if isinstance(out, (tuple, list)) else (out,)
    return next((c for c in candidates if isinstance(c, torch.Tensor) and c.dim() == 3), None)


def expected(ids: torch.Tensor, out: Any) -> float | None:
    """Next-token cross entropy of the captured logits for `ids`: logits of the whole batch (positions
    0..T-2 against tokens 1..T-1) or of all but its last token (the input shifted by the student)."""
    logits = _logits(out)
    if logits is None:
        return None
    B, T = ids.shape
    if tuple(logits.shape[:2]) == (B, T):
        logits = logits[:, :-1]
    elif tuple(logits.shape[:2]) != (B, T - 1):
        return None
    with torch.no_grad():
        targets = ids[:, 1:].reshape(-1).to(logits.device)
        return float(F.cross_entropy(logits.detach().reshape(-1, logits.shape[-1]).double(), targets))


def _problem(loss: Any, want: float | None) -> dict | None:
    """How `loss` is not the definition, or None if it is (or cannot be told)."""
    if not isinstance(loss, torch.Tensor):
        return {"why": f"it returned a {type(loss).__name__}, not a tensor: nothing to backpropagate"}
    if loss.numel() != 1:
        return {"why": f"it returned shape {tuple(loss.shape)}, not one number"}
    if torch.is_grad_enabled() and loss.grad_fn is None:  # a leaf: torch.tensor(loss.item(), requires_grad=True)
        return {
            "why": "what it returned is not computed from the model's output, so no gradient reaches the "
            "model's parameters (a detached copy of the loss)"
        }
    value = float(loss.detach().reshape(()))
    if want is None:
        return None
    if not abs(value - want) <= RTOL * max(1.0, abs(want)):  # a NaN differs too
        return {"why": "value", "yours": value, "expected": want}
    return None


def compare(check: dict, call: int, loss: Any, ids: torch.Tensor | None, out: Any) -> None:
    """Into `check`: one more call compared, whether the model's forward gave logits of the batch
    in it (the grader's loss, in a second run, needs them), and the first call whose loss is not
    the definition."""
    want = expected(ids, out) if ids is not None else None
    problem = _problem(loss, want)
    if want is None and problem is None:
        return  # cannot be told: the logits were not seen, or not of the batch
    check["checked"] += 1
    check["logits"] += want is not None
    if problem is not None and check["wrong"] is None:
        check["wrong"] = {"call": call, **problem}
