"""Known A3 mistakes, as what the mistaken code computes on the failing case.

When a check's output disagrees with the reference, `graders.checks.checking.diagnose` compares it with
each of these; the student is told the mistake only when exactly one matches. Each is written
from the pieces of the float64 reference (or the check's stand-ins) so it is one idea away from
the right computation; the explanations name the idea, not a line to paste.

Shapes and NaN patterns get their own explanations below (`*_shapes`, `attention_nan`).
"""

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F

from graders.checks.checking import Fingerprint, diagnose
from graders.scoring.results import Diagnosis

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
    "attn_heads_batch_mixed": "Your output matches heads split by viewing (B, T, d_model) as (n_heads, B, T, "
                              "d_attention): that view mixes the batch and the heads, so one sequence's head reads "
                              "another sequence's numbers. Split only the last axis, into (n_heads, d_attention), at "
                              "every position of every sequence, then move the head axis before T.",
    "attn_values_not_projected": "Your output matches attention whose values are the input itself instead of its "
                                 "projection W_v(x): queries, keys and values each have their own projection.",
    "attn_mask_not_sliced": "Your attention fails for inputs shorter than context_length but matches the reference "
                            "when T == context_length: something is sized by context_length rather than by T, "
                            "typically the causal_mask buffer used whole. Only its first T rows and columns "
                            "belong to an input of T positions.",
    "attn_input_modified": "Your CausalAttention.forward wrote into the tensor it was given: an in-place change "
                           "of x overwrites the caller's tensor, which the caller still needs (the block's "
                           "residual path, and autograd for the backward pass). Compute into new tensors.",
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
    "forward_positions_reversed": "Your logits match the position embeddings taken in reverse order (T-1 down to "
                                  "0): the token at position t gets row t of the table.",
    "forward_only_first_block": "Your logits match only the first block applied: every block of the backbone runs, "
                                "in order, each on the previous block's output.",
    "forward_lm_head_tied": "Your logits match lm_head and the token embedding sharing one weight (tied, as GPT-2 "
                            "does), both holding lm_head's weights: loading a state dict then overwrites one with "
                            "the other. The assignment's model keeps two separate tables.",
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
    "generate_argmin": "Your tokens match choosing the token with the lowest logit at each step: greedy decoding "
                       "takes the most likely token, the argmax.",
    "generate_argmax_flattened": "generate fails on a batch of several prompts but decodes each prompt right on "
                                 "its own: the next token is chosen row by row, the argmax over the vocabulary of "
                                 "each row's last logits; an argmax over the whole (B, vocab_size) block gives one "
                                 "index for the entire batch.",
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
    "loss_first_row_only": "Your loss matches the first sequence of the batch alone: the mean runs over the "
                           "predictions of every sequence, all B·(T-1) of them.",
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
    # state_dict_converter
    "utils_no_transpose": "Your converted weights match GPT-2's Conv1D weights copied without the transpose: Conv1D "
                          "stores (in, out), nn.Linear (out, in), so the four Conv1D kinds (c_attn, attn.c_proj, "
                          "mlp.c_fc, mlp.c_proj) are transposed.",
    "utils_qkv_order": "Your converted weights match the fused c_attn split in another order: its three parts are "
                       "the query, key and value projections, in that order.",
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
               project: bool = True, kq: bool = False, mask_after: bool = False, batch_mixed: bool = False,
               project_v: bool = True) -> Tensor:
    """Attention from the reference's projections, one knob per mistake."""
    B, T, D = x.shape
    d = ref.d_attention
    h = D // d

    def heads(t: Tensor) -> Tensor:
        if batch_mixed:  # the memory of (B, T, d_model) read as (n_heads, B, T, d_attention)
            return t.reshape(h, B, T, d).transpose(0, 1)
        return t.view(B, T, h, d).transpose(1, 2) if split else t.view(B, h, T, d)

    q, k, v = heads(ref.W_q(x)), heads(ref.W_k(x)), heads(ref.W_v(x) if project_v else x)
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
            a("attn_q_k_swapped", kq=True),
            a("attn_heads_batch_mixed", batch_mixed=True),
            a("attn_values_not_projected", project_v=False)]


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
            _fp("forward_blocks_not_chained", not_chained),
            _fp("forward_positions_reversed", lambda: run(tok[ids] + pos[:T].flip(0))),
            _fp("forward_only_first_block", lambda: run(embedded, order=blocks[:1])),
            # One tensor for both tables: loading the state writes lm_head's weights last, into both.
            _fp("forward_lm_head_tied", lambda: run(head[ids] + pos[:T]))]


def forward_small_ids(rerun: Callable[[Tensor], Tensor], tok: Tensor, pos: Tensor, blocks: list[Fn], final_norm: Fn,
                      head: Tensor, ids: Tensor) -> Diagnosis | None:
    """For a forward that crashed: the same input with every token id below context_length, where a
    position table looked up by token ids can run (`rerun` gives the student's logits). Only that
    mistake explains the crash, so only its diagnosis is told."""
    small = ids % min(len(pos), len(tok))
    if torch.equal(small, ids):
        return None
    found = diagnose(rerun(small), forward(tok, pos, blocks, final_norm, head, small))
    return found if found is not None and found.id == "forward_positions_from_tokens" else None


def logits_shapes(batch: int, length: int, d_model: int) -> list[tuple[tuple[int, ...], str, str]]:
    return [((batch, length, d_model), "forward_no_lm_head", EXPLANATIONS["forward_no_lm_head"])]


# -- Transformer.generate -----------------------------------------------------------------------
def generate(model: torch.nn.Module, prompt: Tensor, n: int) -> list[Fingerprint]:
    """Mistaken decoders run on the reference model (token ids compared exactly: as float, within
    the tolerance of integers)."""
    def decode(position: int, pick: Callable = torch.argmax) -> Tensor:
        x = prompt
        for _ in range(n):
            x = torch.cat([x, pick(model(x)[:, position], -1, keepdim=True)], dim=1)
        return x.double()

    def no_feedback() -> Tensor:
        nxt = model(prompt)[:, -1].argmax(-1, keepdim=True)
        return torch.cat([prompt, nxt.expand(-1, n)], dim=1).double()

    return [_fp("generate_first_position", lambda: decode(0)),
            _fp("generate_no_feedback", no_feedback),
            _fp("generate_argmin", lambda: decode(-1, torch.argmin))]


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
            _fp("loss_on_probabilities", lambda: ce(F.softmax(shifted(), dim=-1), ids[:, 1:])),
            _fp("loss_first_row_only", lambda: ce(model(ids[:1, :-1]), ids[:1, 1:]))]


def loss_shapes(batch: int, length: int) -> list[tuple[tuple[int, ...], str, str]]:
    text = EXPLANATIONS["loss_not_reduced"]
    return [((batch, length - 1), "loss_not_reduced", text), ((batch * (length - 1),), "loss_not_reduced", text)]


# -- utils.state_dict_converter -----------------------------------------------------------------
def flat_state(state: dict[str, Tensor]) -> Tensor:
    """A state dict as one vector (keys sorted; each tensor's rank and shape, then its values), so
    that two dicts match within the tolerance only with the same keys, shapes and values."""
    parts = []
    for key in sorted(state):
        t = state[key].double()
        parts += [torch.tensor([float(t.dim()), *map(float, t.shape)], dtype=torch.float64), t.reshape(-1)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


_QKV = ("W_q", "W_k", "W_v")


def converter(ours: dict[str, Tensor], hf: dict[str, Tensor], n_layers: int) -> list[Fingerprint]:
    """Mistaken conversions of `hf`, from `ours` (what the right conversion gives) and `hf` itself."""
    def edited(change: Callable[[dict, str, str], None]) -> Callable[[], Tensor]:
        def run() -> Tensor:
            out = dict(ours)
            for i in range(n_layers):
                change(out, f"backbone.{i}.", f"transformer.h.{i}.")
            return flat_state(out)
        return run

    def rows_untransposed(out: dict, mine: str, theirs: str) -> None:
        # The transpose skipped, then the fused (in, 3·out) weight chunked along its rows.
        for name in ("attention.W_o", "mlp.fc1", "mlp.fc2"):
            out[f"{mine}{name}.weight"] = ours[f"{mine}{name}.weight"].T
        for name, part in zip(_QKV, hf[f"{theirs}attn.c_attn.weight"].chunk(3, dim=0)):
            out[f"{mine}attention.{name}.weight"] = part

    def all_untransposed(out: dict, mine: str, theirs: str) -> None:
        # c_attn split along its output columns, each part kept as Conv1D stores it.
        for name in ("attention.W_o", "mlp.fc1", "mlp.fc2") + tuple(f"attention.{n}" for n in _QKV):
            out[f"{mine}{name}.weight"] = ours[f"{mine}{name}.weight"].T

    def order(perm: tuple[int, ...]) -> Callable[[dict, str, str], None]:
        def change(out: dict, mine: str, theirs: str) -> None:
            for kind in ("weight", "bias"):
                for name, src in zip(_QKV, perm):
                    out[f"{mine}attention.{name}.{kind}"] = ours[f"{mine}attention.{_QKV[src]}.{kind}"]
        return change

    perms = ((1, 0, 2), (0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1))
    return [_fp("utils_no_transpose", edited(rows_untransposed)), _fp("utils_no_transpose", edited(all_untransposed))] \
        + [_fp("utils_qkv_order", edited(order(p))) for p in perms]


# -- 3(b)iii: the training run -------------------------------------------------------------------
# AdamW moves a weight by at most about lr per step, and its most-moved weights by about that: the
# reference's run (lr 3e-3, 100 steps) moves its most-moved weight by 0.31 = 1.04·lr·steps, the same
# run at lr 1e-5 by 0.0012. "Far less than lr implies" is under 1/30 of lr·steps: 9x above the
# 1e-5 run, 30x below the reference's.
LR_SHORTFALL = 30
# A correct loop's record is its own loss: recomputed by the grader on the first batch at the
# initial weights it agrees exactly (shuffled batches: 0.2%), and over the last 5 steps at the
# final weights within 2% of the first loss (the last steps' progress); a made-up curve that falls
# while the weights stand still is off by 50%. Disagreeing is over 10%: 5x either way.
LOSS_GAP = 0.1
LAST_STEPS = 5


@dataclass
class TrainingEvidence:
    """What the grader recomputed about a training run that failed to lower the loss enough."""

    moved: float  # the largest change of any parameter between the initial and final weights
    grads_reach: bool  # the student's get_loss_on_batch gives the parameters a nonzero gradient
    recorded: tuple[float, float] | None  # the record's first loss, and mean of its last LAST_STEPS
    recomputed: tuple[float, float] | None  # the same, by the student's loss on those weights and batches
    lr: float
    steps: int

    @property
    def gap(self) -> float:
        """How far the record is from the recomputation, in nats (0 without a record)."""
        if self.recorded is None or self.recomputed is None:
            return 0.0
        return max(abs(a - b) for a, b in zip(self.recorded, self.recomputed))


def training(e: TrainingEvidence) -> Diagnosis | None:
    """The loop mistake the run shows, when exactly one fits. Each is what the mistaken loop leaves
    behind: a loop that records made-up losses leaves a record its own loss disagrees with; one
    that never steps leaves the weights as they were and a record that agrees; one whose learning
    rate is not the one given leaves weights moved by a small fraction of lr·steps."""
    disagree = e.recomputed is not None and e.gap > LOSS_GAP * max(1.0, abs(e.recomputed[0]))
    implied = e.lr * e.steps
    matched = {}
    if disagree:
        matched["training_losses_not_the_models"] = _losses_text(e)
    if not disagree and e.moved == 0 and e.grads_reach:
        matched["training_params_unchanged"] = (
            "The parameters never changed: the weights train() ended with are exactly the ones it started with, "
            "although your get_loss_on_batch does give them gradients. A gradient changes nothing by itself: each "
            "step ends with the optimizer's update, which is what moves the weights.")
    if not disagree and 0 < e.moved < implied / LR_SHORTFALL:
        matched["training_lr_ignored"] = (
            f"The parameters moved far less than the learning rate implies: over {e.steps} steps no weight changed "
            f"by more than {e.moved:.2g}, while AdamW moves its most-moved weights by about the learning rate per "
            f"step, about {implied:.2g} at learning_rate={e.lr:g}. The optimizer is to use the learning rate "
            "train() is given.")
    if len(matched) != 1:
        return None
    [(name, text)] = matched.items()
    return Diagnosis(id=name, explanation=text)


def _losses_text(e: TrainingEvidence) -> str:
    (first, last), (first_again, last_again) = e.recorded, e.recomputed
    still = " The weights never changed, so no step updated the model either." if e.moved == 0 else ""
    return (f"Your recorded losses disagree with the grader's recomputation by {e.gap:.3g} nats: your "
            f"get_loss_on_batch, run by the grader on the weights train() started with and its first batch, gives "
            f"{first_again:.3f} (your record: {first:.3f}), and on the weights it ended with, over the last "
            f"{LAST_STEPS} steps' batches, {last_again:.3f} (your record: {last:.3f}). The curve is to record, "
            f"each step, the loss that step computed and backpropagated.{still}")


def training_diagnosis(a3: Any, reply: dict) -> Diagnosis | None:
    """For a run that did not lower the loss enough: the loop mistake it shows (`a3`: the check's
    A3; `reply`: the train reply), computed only then."""
    from a3_checklib import Case, training_data  # the checks' library, which itself needs none of this

    tr = a3.grade.spec.training
    case = Case(**tr.model.model_dump(), batch=tr.batch_size, length=tr.model.context_length, seed=0)
    names = [n for n, _ in a3.ref_module("Transformer", case).named_parameters()]
    _, data, _ = training_data(a3.grade)
    return training(training_evidence(a3, case, reply, data, names, tr.batch_size, tr.learning_rate, tr.max_steps))


def training_evidence(a3: Any, case: Any, reply: dict, data: Tensor, names: Iterable[str], batch_size: int,
                      lr: float, steps: int) -> TrainingEvidence:
    """Recompute, with the student's own model and loss in the worker, what the run's record says:
    `case` is the training config, `names` the assignment's parameter names. What cannot be
    recomputed is left out."""
    initial, final = (_arrays(reply.get(key, {})) for key in ("initial", "final"))
    shared = [k for k in names if k in initial and k in final and initial[k].shape == final[k].shape]
    moved = max((float((final[k].double() - initial[k].double()).abs().max()) for k in shared), default=math.nan)
    record = _record(reply)
    evidence = TrainingEvidence(moved, False, None, None, lr, steps)
    try:
        a3.build("Transformer", case, initial, handle="training")
        first = a3.call("training", "Transformer", "get_loss_on_batch", data[:batch_size], grad=True)
        evidence.grads_reach = any(bool(abs(g["array"]).max() > 0) for g in first.get("grads", {}).values()
                                   if "array" in g)
        if record is None or len(record) * batch_size > len(data):
            return evidence
        a3.build("Transformer", case, final, handle="training")
        last = range(max(0, len(record) - LAST_STEPS), len(record))
        again = [_scalar(a3.call("training", "Transformer", "get_loss_on_batch",
                                 data[j * batch_size:(j + 1) * batch_size])["out"]) for j in last]
        evidence.recorded = (record[0], sum(record[j] for j in last) / len(last))
        evidence.recomputed = (_scalar(first["out"]), sum(again) / len(again))
    except Exception:  # noqa: BLE001  a recomputation that fails explains nothing; the failure stands
        pass
    return evidence


def _arrays(wire: dict) -> dict[str, Tensor]:
    return {k: torch.from_numpy(v["array"]) for k, v in wire.items() if isinstance(v, dict) and "array" in v}


def _record(reply: dict) -> list[float] | None:
    """The losses train() last asked to plot, when there are some and all are finite numbers."""
    losses = (reply.get("recorded") or {}).get("losses")
    if not losses or not all(isinstance(x, float) and math.isfinite(x) for x in losses):
        return None
    return losses


def _scalar(out: dict) -> float:
    if out.get("kind") == "float":
        return float(out["value"])
    if out.get("kind") != "tensor" or "array" not in out or out["array"].size != 1:
        raise ValueError("not a scalar loss")
    value = float(out["array"].reshape(()))
    if not math.isfinite(value):
        raise ValueError("not a finite loss")
    return value
