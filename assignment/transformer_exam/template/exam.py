"""Transformer Architecture exam: the two code answers, 1(c) and 4(b).

Submit this file as exam.py beside answers.yaml. The grader imports it and calls the two functions
below on random float32 tensors, comparing them with a reference: keep their names and arguments.
Without this file the code parts (9 points) get 0.
"""

import math  # noqa: F401  (you may need it)

import torch


def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """1(c). Scaled dot-product attention.

    Q: (..., n, d_k), K: (..., m, d_k), V: (..., m, d_v); any leading (batch, head) dimensions.
    mask: None, or a float tensor of 0s and 1s broadcastable to (..., n, m), such as
        torch.tril(torch.ones(L, L)): 1 where a query may attend to a key, 0 where it may not.
        Every row keeps at least one key.
    Returns the (..., n, d_v) output.
    """
    raise NotImplementedError


def causal_masked_softmax(scores: torch.Tensor) -> torch.Tensor:
    """4(b). The causal mask and the masked softmax.

    scores: (..., L, L) raw attention scores, query positions by key positions.
    Returns the (..., L, L) attention weights: position i attends only to positions j <= i (the
    others get weight 0), and each position's weights sum to 1.
    """
    raise NotImplementedError
