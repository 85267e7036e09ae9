"""Warnings without points: habits that break training or deployment but not the graded maths.
They apply only to code that works: an unfinished method gets its feedback from its own item."""

import torch
from a3_checklib import A3, Case, generator, tokens

from graders.checks.checking import CheckFailure, expect_tensor, fail, not_applicable
from graders.execution.client import StudentError

CASE = Case(12, 3, 2, 6, 17, 2, 6, 4)
SHAPE = (CASE.batch, CASE.length, CASE.vocab_size)


def _working(a3: A3, method: str, *args, shape, train_mode: bool = False, seed: int = 0) -> torch.Tensor:
    """Build the student's Transformer and run `method`; not applicable unless it returns a valid output."""
    state, _ = a3.weights("Transformer", CASE)
    try:
        a3.build("Transformer", CASE, state, train_mode=train_mode)
        out = a3.call("m", "Transformer", method, *args, seed=seed)["out"]
        return expect_tensor(out, shape, f"Transformer.{method}", floating=method == "forward")
    except (StudentError, CheckFailure):
        not_applicable(f"Transformer.{method} does not work yet")


def test_warn_deterministic_train_mode(a3: A3):
    ids = tokens(CASE, generator(CASE, 1, a3.seed))
    first = _working(a3, "forward", ids, shape=SHAPE, train_mode=True, seed=1)
    second = expect_tensor(a3.call("m", "Transformer", "forward", ids, seed=2)["out"], SHAPE, "forward")
    if not torch.equal(first, second):
        fail("in train mode, forward gives different logits for the same input (dropout or other "
             "randomness?); the assignment's model has none")


def test_warn_device_safe(a3: A3):
    ids = tokens(CASE, generator(CASE, 3, a3.seed))
    _working(a3, "forward", ids, shape=SHAPE)
    calls = a3.worker.request("factory_audit", "Transformer.forward", handle="m", method="forward",
                              args=[ids.numpy()])["calls"]
    if calls:
        fail(f"forward creates tensors with {', '.join(calls)} without device=, so they stay on the CPU and "
             "the model fails on a GPU: pass device=x.device, or register them as buffers")


def test_warn_generate_past_context(a3: A3):
    prompt = tokens(CASE, generator(CASE, 2, a3.seed))
    _working(a3, "generate", prompt[:, :3], 2, shape=(CASE.batch, 5))
    try:
        a3.call("m", "Transformer", "generate", prompt, 3)
    except StudentError as e:
        fail("generate fails once the sequence is longer than context_length: feed forward only the last "
             f"context_length tokens. {e}")
