"""Known A3 mistakes, as what the mistaken code computes on the failing case.

When a check's output disagrees with the reference, `graders.checking.diagnose` compares it with
each of these; the student is told the mistake only when exactly one matches. Each is written
from the pieces of the float64 reference (or the check's stand-ins) so it is one idea away from
the right computation; the explanations name the idea, not a line to paste.

Shapes and NaN patterns get their own explanations below (`*_shapes`, `attention_nan`).
"""

import math
from typing import Callable, Iterable

import torch
import torch.nn.functional as F

from graders.checking import Fingerprint
from graders.results import Diagnosis

Tensor = torch.Tensor
Fn = Callable[[Tensor], Tensor]

EXPLANATIONS = {
    # MLP
    "mlp_no_activation": "Your output matches the MLP without its nonlinearity: two linear layers in a row are one "
                         "linear map; the GELU between fc1 and fc2 is what lets the MLP compute more.",
    "mlp_relu": "Your output matches the MLP with ReLU in place of GELU: the assignment's MLP uses the provided "
                "GELU (the tanh approximation GPT-2 uses).",
    "mlp_exact_gelu": "Your output matches the MLP with the exact (erf) GELU: GPT-2, and this assignment, use the tanh "
                      "approximation given in the GELU class; the two differ by about 1e-3.",
    "mlp_silu": "Your output matches the MLP with SiLU in place of GELU: use the provided GELU.",
    "mlp_activation_after_fc2": "Your output matches the MLP with the GELU applied after fc2: the nonlinearity "
                                "belongs between the two layers, on the 4·d_model hidden units.",
    # CausalAttention
    "attn_no_scaling": "Your output matches attention without the 1/sqrt(d_attention) scaling of the scores: "
                       "q·k grows with the head size, and unscaled scores push softmax towards one-hot weights.",
    "attn_scaled_by_d_model": "Your output matches scores scaled by 1/sqrt(d_model): each head's dot product runs "
                              "over d_attention = d_model / n_heads numbers, so scale by sqrt(d_attention).",
    "attn_scaled_by_d_attention": "Your output matches scores divided by d_attention rather than by its square "
                                  "root: the variance of q·k grows like d_attention, so its spread like sqrt(d_attention).",
    "attn_mask_inverted": "Your output matches attention in which every query sees itself and the later "
                          "positions instead of the earlier ones: the mask is the wrong triangle.",
    "attn_no_mask": "Your output matches attention with no causal mask: every position also attends to later "
                    "positions, which a language model must not see.",
    "attn_masked_to_zero": "Your output matches masked scores set to 0 instead of -inf: a score of 0 still gets "
                           "weight exp(0) after softmax, so the future leaks in; a masked score must become -inf.",
    "attn_softmax_over_queries": "Your output matches softmax taken over the query axis: each query's weights over "
                                 "the keys must sum to 1, so normalise along the keys (the last axis of q·kᵀ).",
    "attn_mask_after_softmax": "Your output matches weights of future keys zeroed after the softmax without "
                               "renormalising: then a query's weights no longer sum to 1; mask the scores before "
                               "the softmax.",
    "attn_heads_merged_without_transpose": "Your output matches heads merged straight from (B, n_heads, T, "
                                           "d_attention) into (B, T, d_model) without moving the head axis back "
                                           "next to d_attention first: that mixes positions and heads.",
    "attn_heads_split_without_transpose": "Your output matches heads split by viewing (B, T, d_model) directly as "
                                          "(B, n_heads, T, d_attention): each head must take its own d_attention "
                                          "columns at every position, i.e. (B, T, n_heads, d_attention) with the "
                                          "head axis then moved before T.",
    "attn_no_output_projection": "Your output matches attention without the output projection W_o applied after "
                                 "merging the heads.",
    "attn_q_k_swapped": "Your output matches scores computed as k·qᵀ, the transpose of q·kᵀ: row i of the scores "
                        "must hold query i's dot products with every key before the mask is applied.",
    # DecoderBlock
    "block_post_norm": "Your output matches a post-norm block (LayerNorm after each residual sum, as in the original "
                       "Transformer): GPT-2 normalises the input of each sublayer and adds the sublayer's output to "
                       "the un-normalised x.",
    "block_norms_swapped": "Your output matches the block with its two LayerNorms swapped: pre_layer_norm belongs "
                           "to the attention sublayer, post_layer_norm to the MLP.",
    "block_no_attention_residual": "Your output matches the block without the residual connection around attention: "
                                   "the attention output is added to x, not put in its place.",
    "block_no_mlp_residual": "Your output matches the block without the residual connection around the MLP: the MLP "
                             "output is added to x, not put in its place.",
    "block_residual_from_normed": "Your output matches residuals that add the normalised x instead of x itself: the "
                                  "LayerNorm's output feeds only the sublayer, the residual path keeps the raw x.",
    "block_parallel_branches": "Your output matches attention and MLP both applied to the block's input and summed "
                               "(a parallel block): in GPT-2 the MLP reads x after the attention residual.",
    "block_mlp_first": "Your output matches the block with the MLP applied before attention: attention comes first.",
    "block_no_norms": "Your output matches the block without its LayerNorms: each sublayer reads its LayerNorm'd input.",
    # Transformer.forward
    "forward_no_positions": "Your logits match a model without position embeddings: without them the model cannot "
                            "tell positions apart (the handout's Q2).",
    "forward_positions_offset": "Your logits match position embeddings of positions 1..T: positions are counted "
                                "from 0.",
    "forward_positions_from_tokens": "Your logits match the position-embedding table looked up with the token ids: "
                                     "it is indexed by the position 0..T-1 of each token.",
    "forward_no_final_norm": "Your logits match a model without the final LayerNorm before lm_head.",
    "forward_returns_probabilities": "Your output matches the softmax of the logits: forward returns the raw "
                                     "logits of lm_head (the loss applies the softmax itself).",
    "forward_returns_log_probabilities": "Your output matches log-softmax of the logits: forward returns the raw "
                                         "logits of lm_head.",
    "forward_blocks_reversed": "Your logits match the blocks applied last to first: they run in the order of the "
                               "backbone.",
    "forward_blocks_not_chained": "Your logits match every block applied to the embeddings, with only the last "
                                  "block's output kept: each block's output is the next block's input.",
    # generate
    "generate_first_position": "Your tokens match greedy decoding from the logits of the first position: the next "
                               "token comes from the logits of the last position.",
    "generate_no_feedback": "Your tokens match the prompt's next token repeated: each new token must be fed back "
                            "in before the next one is chosen.",
    "generate_samples": "generate gave different tokens for the same input and weights on two calls: its choice "
                        "depends on chance, as when it samples, while greedy decoding takes the argmax every step.",
    "generate_one_short": "generate returned one token fewer than asked for: num_new_tokens tokens are appended.",
    "generate_only_new_tokens": "generate returned only the new tokens: the prompt is returned in front of them.",
    # get_loss_on_batch
    "loss_not_shifted": "Your loss matches each position scored against its own token: position t predicts token "
                        "t+1, so the logits of 0..T-2 go with the tokens 1..T-1.",
    "loss_shifted_wrong_way": "Your loss matches the model fed tokens 1..T-1 and scored against tokens 0..T-2: the "
                              "shift runs the other way (inputs 0..T-2, targets 1..T-1).",
    "loss_sum": "Your loss matches the sum over the predictions: the assignment's loss is the mean over all "
                "B·(T-1) of them.",
    "loss_mean_over_batch_only": "Your loss matches a sum over positions averaged over the batch only: the mean "
                                 "runs over all B·(T-1) predictions.",
    "loss_on_probabilities": "Your loss matches cross entropy of softmax probabilities: cross_entropy applies "
                             "log-softmax itself and expects raw logits (either the loss applies a softmax first, "
                             "or forward returns probabilities).",
    "loss_not_reduced": "get_loss_on_batch returned one loss per prediction: the loss is their mean, a scalar.",
    "loss_detached": "The loss has the right value but no gradient reaches the model: a loss rebuilt from a Python "
                     "number (.item()) is cut off from the graph, so training would not change the weights.",
    # shapes and NaN
    "attn_heads_not_merged": "CausalAttention.forward returned (B, n_heads, T, d_attention): the heads were not "
                             "merged back into (B, T, d_model) before W_o.",
    "attn_row_fully_masked": "NaN exactly at the positions whose query sees no key at all: softmax over scores "
                             "that are all -inf is 0/0. Every query must see at least itself (the diagonal is kept).",
    "forward_no_lm_head": "Transformer.forward returned (B, T, d_model): the hidden states, before lm_head maps "
                          "them to vocab_size logits.",
}


def known(name: str) -> Diagnosis:
    """The diagnosis `name`, for a check that recognises the mistake by itself (not by output)."""
    return Diagnosis(id=name, explanation=EXPLANATIONS[name])


def _fp(name: str, output: Callable[[], Tensor]) -> Fingerprint:
    return Fingerprint(name, EXPLANATIONS[name], output)


# -- MLP.forward --------------------------------------------------------------------------------
def mlp(ref: torch.nn.Module, x: Tensor) -> list[Fingerprint]:
    fc1, fc2, gelu = ref.fc1, ref.fc2, ref.gelu
    return [_fp("mlp_no_activation", lambda: fc2(fc1(x))),
            _fp("mlp_relu", lambda: fc2(F.relu(fc1(x)))),
            _fp("mlp_exact_gelu", lambda: fc2(F.gelu(fc1(x)))),
            _fp("mlp_silu", lambda: fc2(F.silu(fc1(x)))),
            _fp("mlp_activation_after_fc2", lambda: gelu(fc2(fc1(x))))]


# -- CausalAttention.forward --------------------------------------------------------------------
def _attention(ref: torch.nn.Module, x: Tensor, *, scale: str = "sqrt_d_attention", sees: str = "past",
               fill: float = float("-inf"), softmax_dim: int = -1, split: bool = True, merge: bool = True,
               project: bool = True, kq: bool = False, mask_after: bool = False) -> Tensor:
    """Attention from the reference's projections, one knob per mistake."""
    B, T, D = x.shape
    d = ref.d_attention
    h = D // d

    def heads(t: Tensor) -> Tensor:
        return t.view(B, T, h, d).transpose(1, 2) if split else t.view(B, h, T, d)

    q, k, v = heads(ref.W_q(x)), heads(ref.W_k(x)), heads(ref.W_v(x))
    scores = (k @ q.transpose(-2, -1)) if kq else (q @ k.transpose(-2, -1))
    scores = scores / {"sqrt_d_attention": math.sqrt(d), "none": 1.0, "sqrt_d_model": math.sqrt(D),
                       "d_attention": float(d)}[scale]
    ones = torch.ones(T, T, dtype=torch.bool)
    allowed = {"past": ones.tril(), "future": ones.triu(), "all": ones}[sees]
    if mask_after:
        out = F.softmax(scores, dim=softmax_dim) * allowed
    else:
        out = F.softmax(scores.masked_fill(~allowed, fill), dim=softmax_dim)
    out = out @ v
    out = out.transpose(1, 2).reshape(B, T, D) if merge else out.reshape(B, T, D)
    return ref.W_o(out) if project else out


def attention(ref: torch.nn.Module, x: Tensor) -> list[Fingerprint]:
    def a(name: str, **knobs) -> Fingerprint:
        return _fp(name, lambda: _attention(ref, x, **knobs))

    return [a("attn_no_scaling", scale="none"),
            a("attn_scaled_by_d_model", scale="sqrt_d_model"),
            a("attn_scaled_by_d_attention", scale="d_attention"),
            a("attn_mask_inverted", sees="future"),
            a("attn_no_mask", sees="all"),
            a("attn_masked_to_zero", fill=0.0),
            a("attn_softmax_over_queries", softmax_dim=-2),
            a("attn_mask_after_softmax", mask_after=True),
            a("attn_heads_merged_without_transpose", merge=False),
            a("attn_heads_split_without_transpose", split=False),
            a("attn_heads_split_without_transpose", split=False, merge=False),
            a("attn_no_output_projection", project=False),
            a("attn_q_k_swapped", kq=True)]


def attention_shapes(batch: int, length: int, d_model: int, n_heads: int) -> list[tuple[tuple[int, ...], str, str]]:
    shape = (batch, n_heads, length, d_model // n_heads)
    return [(shape, "attn_heads_not_merged", EXPLANATIONS["attn_heads_not_merged"])]


def attention_nan(out: Tensor) -> Diagnosis | None:
    """NaN filling whole positions (every batch row, every feature) and nothing else: the pattern of
    a query row with every score masked."""
    bad = ~torch.isfinite(out)
    whole = bad.all(dim=2).all(dim=0)  # per position
    if whole.any() and torch.equal(bad.any(dim=2).any(dim=0), whole) and not whole.all():
        return known("attn_row_fully_masked")
    return None


# -- DecoderBlock.forward -----------------------------------------------------------------------
def block(attn: Fn, mlp_: Fn, pre: Fn, post: Fn, x: Tensor) -> list[Fingerprint]:
    """Mistaken wirings of one block, given its four parts (the reference's, or the check's stand-ins)."""
    def post_norm() -> Tensor:
        h = pre(x + attn(x))
        return post(h + mlp_(h))

    def from_normed() -> Tensor:
        h = pre(x)
        h = post(h + attn(h))
        return h + mlp_(h)

    def mlp_first() -> Tensor:
        h = x + mlp_(post(x))
        return h + attn(pre(h))

    def no_norms() -> Tensor:
        h = x + attn(x)
        return h + mlp_(h)

    def wired(a_norm: Fn, m_norm: Fn, attn_residual: bool = True, mlp_residual: bool = True) -> Callable[[], Tensor]:
        def run() -> Tensor:
            h = attn(a_norm(x)) + (x if attn_residual else 0)
            return mlp_(m_norm(h)) + (h if mlp_residual else 0)
        return run

    return [_fp("block_post_norm", post_norm),
            _fp("block_norms_swapped", wired(post, pre)),
            _fp("block_no_attention_residual", wired(pre, post, attn_residual=False)),
            _fp("block_no_mlp_residual", wired(pre, post, mlp_residual=False)),
            _fp("block_residual_from_normed", from_normed),
            _fp("block_parallel_branches", lambda: x + attn(pre(x)) + mlp_(post(x))),
            _fp("block_mlp_first", mlp_first),
            _fp("block_no_norms", no_norms)]


# -- Transformer.forward ------------------------------------------------------------------------
def forward(tok: Tensor, pos: Tensor, blocks: list[Fn], final_norm: Fn, head: Tensor, ids: Tensor) -> list[Fingerprint]:
    """Mistaken forwards from the parts: token and position tables, the blocks (reference or
    stand-ins), the final norm and lm_head's weight."""
    T = ids.shape[1]

    def run(h: Tensor, order: Iterable[Fn] | None = None, norm: bool = True) -> Tensor:
        for b in (blocks if order is None else order):
            h = b(h)
        return (final_norm(h) if norm else h) @ head.T

    embedded = tok[ids] + pos[:T]

    def offset() -> Tensor:
        if T >= len(pos):  # position T has no embedding: the mistaken code crashes here
            raise IndexError("position past the table")
        return run(tok[ids] + pos[1:T + 1])

    def not_chained() -> Tensor:
        h = embedded
        for b in blocks:
            h = b(embedded)
        return final_norm(h) @ head.T

    return [_fp("forward_no_positions", lambda: run(tok[ids])),
            _fp("forward_positions_offset", offset),
            _fp("forward_positions_from_tokens", lambda: run(tok[ids] + pos[ids])),
            _fp("forward_no_final_norm", lambda: run(embedded, norm=False)),
            _fp("forward_returns_probabilities", lambda: F.softmax(run(embedded), dim=-1)),
            _fp("forward_returns_log_probabilities", lambda: F.log_softmax(run(embedded), dim=-1)),
            _fp("forward_blocks_reversed", lambda: run(embedded, order=blocks[::-1])),
            _fp("forward_blocks_not_chained", not_chained)]


def logits_shapes(batch: int, length: int, d_model: int) -> list[tuple[tuple[int, ...], str, str]]:
    return [((batch, length, d_model), "forward_no_lm_head", EXPLANATIONS["forward_no_lm_head"])]


# -- Transformer.generate -----------------------------------------------------------------------
def generate(model: torch.nn.Module, prompt: Tensor, n: int) -> list[Fingerprint]:
    """Mistaken decoders run on the reference model (token ids compared exactly: as float, within
    the tolerance of integers)."""
    def decode(position: int) -> Tensor:
        x = prompt
        for _ in range(n):
            x = torch.cat([x, model(x)[:, position].argmax(-1, keepdim=True)], dim=1)
        return x.double()

    def no_feedback() -> Tensor:
        nxt = model(prompt)[:, -1].argmax(-1, keepdim=True)
        return torch.cat([prompt, nxt.expand(-1, n)], dim=1).double()

    return [_fp("generate_first_position", lambda: decode(0)),
            _fp("generate_no_feedback", no_feedback)]


def generate_shapes(batch: int, length: int, n: int) -> list[tuple[tuple[int, ...], str, str]]:
    return [((batch, length + n - 1), "generate_one_short", EXPLANATIONS["generate_one_short"]),
            ((batch, n), "generate_only_new_tokens", EXPLANATIONS["generate_only_new_tokens"])]


# -- get_loss_on_batch --------------------------------------------------------------------------
def loss(model: torch.nn.Module, ids: Tensor) -> list[Fingerprint]:
    def ce(logits: Tensor, targets: Tensor, reduction: str = "mean") -> Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction)

    shifted = lambda: model(ids[:, :-1])  # noqa: E731
    return [_fp("loss_not_shifted", lambda: ce(model(ids), ids)),
            _fp("loss_shifted_wrong_way", lambda: ce(model(ids[:, 1:]), ids[:, :-1])),
            _fp("loss_sum", lambda: ce(shifted(), ids[:, 1:], "sum")),
            _fp("loss_mean_over_batch_only", lambda: ce(shifted(), ids[:, 1:], "sum") / ids.shape[0]),
            _fp("loss_on_probabilities", lambda: ce(F.softmax(shifted(), dim=-1), ids[:, 1:]))]


def loss_shapes(batch: int, length: int) -> list[tuple[tuple[int, ...], str, str]]:
    text = EXPLANATIONS["loss_not_reduced"]
    return [((batch, length - 1), "loss_not_reduced", text), ((batch * (length - 1),), "loss_not_reduced", text)]
