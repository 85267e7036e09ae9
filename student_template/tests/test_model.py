"""Snapshot tests: one per TODO, on the small configuration and random weights in data/.

Passing them is a good sign, not a grade: the grader checks many more configurations and
properties (see README.md).
"""

import torch
from conftest import CASES, check_close, check_tensor, load

from model_solution import MLP, CausalAttention, DecoderBlock, Transformer


def test_mlp_forward():
    mlp = load(MLP, "backbone.0.mlp.")
    with torch.no_grad():
        check_close(mlp(CASES["mlp_in"]), CASES["mlp_out"], "MLP.forward")


def test_causal_attention_forward():
    attention = load(CausalAttention, "backbone.1.attention.")  # the input is shorter than context_length
    with torch.no_grad():
        check_close(attention(CASES["attention_in"]), CASES["attention_out"], "CausalAttention.forward")


def test_decoder_block_forward():
    block = load(DecoderBlock, "backbone.0.")  # uses your MLP and CausalAttention: fix those first
    with torch.no_grad():
        check_close(block(CASES["block_in"]), CASES["block_out"], "DecoderBlock.forward")


def test_transformer_forward():
    model = load(Transformer)
    with torch.no_grad():
        check_close(model(CASES["forward_in"]), CASES["forward_out"], "Transformer.forward")


def test_generate_greedy():
    model = load(Transformer)
    prompt, expected = CASES["generate_in"], CASES["generate_out"]
    got = model.generate(prompt.clone(), expected.shape[1] - prompt.shape[1])
    check_tensor(got, tuple(expected.shape), "Transformer.generate")
    assert got.dtype == torch.int64, f"Transformer.generate returned dtype {got.dtype}, expected torch.int64"
    assert torch.equal(got[:, :prompt.shape[1]], prompt), "Transformer.generate changed the prompt"
    assert torch.equal(got, expected), f"Transformer.generate returned\n{got}\nexpected (greedy)\n{expected}"


def test_get_loss_on_batch():
    model = load(Transformer)
    loss = model.get_loss_on_batch(CASES["loss_in"])
    check_close(loss, CASES["loss_out"], "Transformer.get_loss_on_batch")
    assert loss.requires_grad, "the loss must be differentiable: train.py calls loss.backward()"
    loss.backward()
    assert model.lm_head.weight.grad is not None and model.embeddings.weight.grad is not None, \
        "loss.backward() left the model without gradients"
