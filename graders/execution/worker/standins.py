"""Simple known modules swapped in for a student's submodules, to test one method in isolation.

The trusted side computes what a correct method does with the same stand-ins, so a student whose
attention is broken still earns the block's points for the right wiring.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Affine(nn.Module):
    """x -> x Wᵀ + b with fixed weights: a stand-in for attention, an MLP or a whole block."""

    weight: torch.Tensor  # buffers, registered below
    bias: torch.Tensor

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        # Extra arguments (a mask, a KV cache) are the student's own protocol: a stand-in ignores
        # them; a caller that needs more than a tensor back fails, and the check falls back.
        return x @ self.weight.T + self.bias


def rule_next_token(tokens: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """The token a stand-in forward makes the argmax after each prefix: depends on the whole prefix
    and on the position, so generate must feed back every new token and read the last position."""
    positions = torch.arange(tokens.shape[-1], device=tokens.device)
    return (7 * tokens.cumsum(-1) + 3 * positions + tokens + 1) % vocab_size


def rule_logits(tokens: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(B, T) -> (B, T, V) logits, uniquely maximal at rule_next_token, in no other order."""
    target = rule_next_token(tokens, vocab_size)
    vocab = torch.arange(vocab_size, device=tokens.device)
    return -0.5 * (vocab - target[..., None]).abs().float() + 0.1 * torch.cos(vocab.float())


class RuleForward:
    """A forward whose argmax follows rule_next_token; counts its calls."""

    def __init__(self, vocab_size: int):
        self.vocab_size, self.calls = vocab_size, 0

    def __call__(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        self.calls += 1
        return rule_logits(x, self.vocab_size)


class FixedLogits:
    """A forward returning given logits, cut to the input's length (a causal model's prefix)."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    def __call__(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return self.logits[: x.shape[0], : x.shape[1]].clone().requires_grad_(True)


class CausalMean(nn.Module):
    """A stand-in for a causal self-attention (B, T, d) -> (B, T, d): position t gets the mean of
    positions 0..t, projected. A training run with it grades the loop, not the attention."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        counts = torch.arange(1, x.shape[-2] + 1, device=x.device, dtype=x.dtype)
        return self.proj(x.cumsum(-2) / counts[:, None])


def next_token_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The grader's get_loss_on_batch, by A3's definition, on the student's own forward: mean cross
    entropy of the logits at positions 0..T-2 against the tokens at 1..T-1. A training run with it
    grades the loop, when the student's loss fails its own checks."""
    out = model(ids)
    logits = out[0] if isinstance(out, (tuple, list)) else out
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1).to(logits.device))


# Stand-ins for a notebook's attention pieces (A2S2), swapped into its namespace while its
# SelfAttention.forward runs, so that the check of the wiring does not depend on the pieces. None is
# the assignment's answer: the split interleaves the columns, the mask keeps every other earlier
# position, the "attention" is a plain mean over what the mask allows.
def split_interleaved(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, D = x.shape
    return x.reshape(B, T, D // n_heads, n_heads).permute(0, 3, 1, 2)


def merge_interleaved(x: torch.Tensor) -> torch.Tensor:
    B, H, T, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, d * H)


def every_other_earlier(T: int) -> torch.Tensor:
    i = torch.arange(T)
    gap = i[:, None] - i[None, :]
    return (gap >= 0) & (gap % 2 == 0)


def mean_over_mask(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    w = torch.ones(q.shape[-2], k.shape[-2], dtype=v.dtype) if mask is None else mask.to(v.dtype)
    return (w / w.sum(-1, keepdim=True)) @ (v + 0.5 * k) + 0.25 * q


NOTEBOOK_PIECES = {
    "scaled_dot_product_attention": mean_over_mask,
    "causal_mask": every_other_earlier,
    "split_heads": split_interleaved,
    "merge_heads": merge_interleaved,
}
