"""Warnings without points: habits that break training or deployment but not the graded maths."""

import torch
from a3_checklib import A3, Case, generator, tokens

from graders.checking import expect_tensor, fail
from graders.client import StudentError

CASE = Case(12, 3, 2, 6, 17, 2, 6, 4)


def test_warn_deterministic_train_mode(a3: A3):
    state, _ = a3.weights("Transformer", CASE)
    ids = tokens(CASE, generator(CASE, 1, a3.seed))
    a3.build("Transformer", CASE, state, train_mode=True)
    shape = (CASE.batch, CASE.length, CASE.vocab_size)
    first = expect_tensor(a3.call("m", "Transformer", "forward", ids, seed=1)["out"], shape, "forward")
    second = expect_tensor(a3.call("m", "Transformer", "forward", ids, seed=2)["out"], shape, "forward")
    if not torch.equal(first, second):
        fail("in train mode, forward gives different logits for the same input (dropout or other "
             "randomness?); the assignment's model has none")


def test_warn_device_safe(a3: A3):
    state, _ = a3.weights("Transformer", CASE)
    a3.build("Transformer", CASE, state)
    try:
        a3.worker.request("meta_forward", "Transformer.forward on the meta device", handle="m",
                          shape=[CASE.batch, CASE.length], vocab_size=CASE.vocab_size)
    except StudentError as e:
        fail("forward fails when the model is on another device (here 'meta'): create tensors with "
             f"device=x.device, or register them as buffers. {e}")


def test_warn_generate_past_context(a3: A3):
    state, _ = a3.weights("Transformer", CASE)
    a3.build("Transformer", CASE, state)
    prompt = tokens(CASE, generator(CASE, 2, a3.seed))
    try:
        a3.call("m", "Transformer", "generate", prompt, 3)
    except StudentError as e:
        fail("generate fails once the sequence is longer than context_length: feed forward only the last "
             f"context_length tokens. {e}")
