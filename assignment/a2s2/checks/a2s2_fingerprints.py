"""Known A2S2 mistakes (the guide's pitfalls: shape, the transpose's axes, the softmax's axis, the
embedding size before and after split / merge), as what the mistaken code computes on the failing
case. `graders.checks.checking.diagnose` names one only when exactly one matches."""

import math
from collections.abc import Callable

import torch

from graders.checks.checking import Fingerprint
from graders.scoring.results import Diagnosis

Tensor = torch.Tensor

EXPLANATIONS = {
    # step 1
    "sdpa_no_scaling": "Your output matches attention without the 1/sqrt(d_k) scaling of the scores: q·k grows "
                       "with d_k, and unscaled scores push the softmax towards one-hot weights.",
    "sdpa_scaled_by_d": "Your output matches scores divided by d_k rather than by its square root: the spread of "
                        "q·k grows like sqrt(d_k).",
    "sdpa_softmax_over_queries": "Your output matches the softmax taken over the query axis (-2): each query's "
                                 "weights over the keys must sum to 1, so normalise along the keys, the last axis "
                                 "of q·kᵀ.",
    "sdpa_softmax_over_leading_axis": "Your output matches the softmax taken over a leading axis (batch or heads): "
                                      "each query's weights over the keys must sum to 1, so normalise along the "
                                      "last axis of q·kᵀ, whatever axes come before it.",
    "sdpa_no_softmax": "Your output matches the raw scores times v: the scores become weights only through the "
                       "softmax over the keys.",
    "sdpa_k_q_swapped": "Your output matches scores computed as k·qᵀ, the transpose of q·kᵀ: row i of the scores "
                        "holds query i's dot products with every key.",
    "sdpa_returns_weights": "Your attention returns the weights (..., T_q, T_k), not the weighted values: "
                            "multiply the weights by v to get (..., T_q, d_v).",
    "sdpa_transpose_fixed_axes": "Your attention is right for inputs with some number of leading axes but fails "
                                 "for others: the transpose of k names fixed axes (k.transpose(1, 2), k.T) where "
                                 "it must swap the last two, (-2, -1), whatever comes before (a batch, heads).",
    # step 2
    "mask_upper_triangle": "Your causal_mask is the upper triangle: row i is query i, which may see keys 0..i, "
                           "the lower triangle (diagonal included).",
    "mask_inverted": "Your causal_mask is True where a query must NOT look (the future): in this interface True "
                     "means the query may attend, so the lower triangle is True.",
    "mask_no_diagonal": "Your causal_mask leaves out the diagonal: a position may attend to itself (and position "
                        "0 sees nothing else; without the diagonal its softmax is over nothing).",
    "mask_ignored": "Your masked attention matches attention with no mask at all: the mask argument is not "
                    "applied (masked_fill returns a new tensor unless assigned, or is applied in place with _).",
    "mask_masked_to_zero": "Your masked attention matches masked scores set to 0 instead of -inf: a score of 0 "
                           "still gets weight exp(0) after the softmax, so the hidden keys leak in.",
    "mask_after_softmax": "Your masked attention matches the weights of hidden keys zeroed after the softmax "
                          "without renormalising: a query's weights then no longer sum to 1; mask the scores "
                          "before the softmax.",
    "mask_reversed": "Your masked attention matches attending exactly where the mask is False: True means the "
                     "query may attend.",
    # step 3
    "split_not_divided": "split_heads does not divide the embedding among the heads: each head gets d_model // "
                         "n_heads numbers of every position (d_head), and the split keeps the total size.",
    "split_no_transpose": "Your split matches (B, T, d_model) viewed directly as (B, n_heads, T, d_head): each "
                          "head must take its own d_head columns at every position, i.e. view as (B, T, n_heads, "
                          "d_head), then move the head axis before T.",
    "split_batch_mixed": "Your split matches (B, T, d_model) read as (n_heads, B, T, d_head): that mixes the batch "
                         "and the heads, so one sequence's head reads another sequence's numbers. Split only the "
                         "last axis into (n_heads, d_head), then move the head axis before T.",
    "split_interleaved": "Your split gives head h the columns h, h + n_heads, h + 2·n_heads, ...: head h takes the "
                         "consecutive columns h·d_head .. (h+1)·d_head - 1 (view the last axis as (n_heads, "
                         "d_head), in that order).",
    "split_head_axis_not_moved": "split_heads returns (B, T, n_heads, d_head): the head axis goes before T, "
                                 "(B, n_heads, T, d_head), so that attention runs over the positions of each head.",
    "merge_no_transpose": "Your merge matches (B, n_heads, T, d_head) reshaped straight into (B, T, d_model) "
                          "without moving the head axis back next to d_head: that mixes positions and heads.",
    "merge_wrong_order": "Your merge puts the numbers of a position in the order (d_head, n_heads), column by "
                         "column across heads: the heads go back side by side, head 0's d_head columns first "
                         "(transpose to (B, T, n_heads, d_head), then flatten the last two).",
    "merge_not_concatenated": "merge_heads returns d_head numbers per position: the heads were summed or averaged; "
                              "they go side by side, n_heads·d_head = d_model numbers.",
    "merge_not_flattened": "merge_heads returns (B, T, n_heads, d_head): flatten the last two axes into d_model.",
    # step 4
    "self_attention_no_out_proj": "Your SelfAttention matches the merged heads without out_proj applied.",
    "self_attention_no_mask": "Your SelfAttention matches attention without the causal mask: either forward does "
                              "not pass causal_mask(T) to the attention, or the attention does not apply its mask "
                              "(step 2); with it, no position sees the future.",
    "self_attention_values_not_projected": "Your SelfAttention matches values that are x itself instead of "
                                           "v_proj(x): queries, keys and values each have their own projection.",
    "self_attention_no_split": "Your SelfAttention matches one head over all of d_model: split q, k and v into "
                               "n_heads heads before the attention and merge them after.",
    # step 5
    "training_no_step": "train() took no optimizer step: the parameters never changed. Call optimizer.step() after "
                        "loss.backward() in every step.",
}


def known(name: str) -> Diagnosis:
    """The diagnosis `name`, for a check that recognises the mistake by itself."""
    return Diagnosis(id=name, explanation=EXPLANATIONS[name])


def _fp(name: str, output: Callable[[], Tensor]) -> Fingerprint:
    return Fingerprint(name, EXPLANATIONS[name], output)


def attention_with(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, scale: float | None = None,
                   softmax_dim: int = -1, fill: str = "-inf", kq: bool = False, softmax: bool = True) -> Tensor:
    """Attention in float64, one knob per mistake."""
    scores = (k @ q.transpose(-2, -1)) if kq else (q @ k.transpose(-2, -1))
    scores = scores / (math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None and fill != "after":
        allowed = mask.bool() if fill != "reversed" else ~mask.bool()
        scores = scores.masked_fill(~allowed, {"zero": 0.0}.get(fill, float("-inf")))
    weights = torch.softmax(scores, dim=softmax_dim) if softmax else scores
    if mask is not None and fill == "after":
        weights = weights * mask
    return weights @ v


def attention(q: Tensor, k: Tensor, v: Tensor) -> list[Fingerprint]:
    d = q.shape[-1]
    fps = [_fp("sdpa_no_scaling", lambda: attention_with(q, k, v, scale=1.0)),
           _fp("sdpa_scaled_by_d", lambda: attention_with(q, k, v, scale=float(d))),
           _fp("sdpa_softmax_over_queries", lambda: attention_with(q, k, v, softmax_dim=-2)),
           _fp("sdpa_no_softmax", lambda: attention_with(q, k, v, softmax=False)),
           _fp("sdpa_k_q_swapped", lambda: attention_with(q, k, v, kq=True))]
    for axis in range(q.dim() - 2):
        fps.append(_fp("sdpa_softmax_over_leading_axis", lambda a=axis: attention_with(q, k, v, softmax_dim=a)))
    return fps


def attention_shapes(q: Tensor, k: Tensor, v: Tensor) -> list[tuple[tuple[int, ...], str, str]]:
    weights = (*q.shape[:-1], k.shape[-2])
    return [(weights, "sdpa_returns_weights", EXPLANATIONS["sdpa_returns_weights"])]


def masked(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> list[Fingerprint]:
    return [_fp(name, lambda fill=fill: attention_with(q, k, v, None if fill == "none" else mask, fill=fill))
            for name, fill in (("mask_ignored", "none"), ("mask_masked_to_zero", "zero"),
                               ("mask_after_softmax", "after"), ("mask_reversed", "reversed"))]


def causal_masks(T: int) -> list[Fingerprint]:
    ones = torch.ones(T, T, dtype=torch.float64)
    return [_fp("mask_upper_triangle", lambda: torch.triu(ones)),
            _fp("mask_inverted", lambda: torch.triu(ones, 1)),
            _fp("mask_no_diagonal", lambda: torch.tril(ones, -1))]


def split(x: Tensor, n_heads: int) -> list[Fingerprint]:
    B, T, D = x.shape
    d = D // n_heads
    return [_fp("split_no_transpose", lambda: x.reshape(B, n_heads, T, d)),
            _fp("split_batch_mixed", lambda: x.reshape(n_heads, B, T, d).transpose(0, 1)),
            _fp("split_interleaved", lambda: x.reshape(B, T, d, n_heads).permute(0, 3, 1, 2))]


def split_shapes(B: int, T: int, D: int, H: int) -> list[tuple[tuple[int, ...], str, str]]:
    return [((B, H, T, D), "split_not_divided", EXPLANATIONS["split_not_divided"]),
            ((B, T, H, D // H), "split_head_axis_not_moved", EXPLANATIONS["split_head_axis_not_moved"])]


def merge(x: Tensor) -> list[Fingerprint]:
    B, H, T, d = x.shape
    return [_fp("merge_no_transpose", lambda: x.reshape(B, T, H * d)),
            _fp("merge_wrong_order", lambda: x.permute(0, 2, 3, 1).reshape(B, T, H * d))]


def merge_shapes(B: int, H: int, T: int, d: int) -> list[tuple[tuple[int, ...], str, str]]:
    return [((B, T, d), "merge_not_concatenated", EXPLANATIONS["merge_not_concatenated"]),
            ((B, T, H, d), "merge_not_flattened", EXPLANATIONS["merge_not_flattened"])]


def self_attention(ref: torch.nn.Module, x: Tensor, pieces) -> list[Fingerprint]:
    """SelfAttention(x) with one step of its wiring wrong, from the reference's layers and pieces."""
    H, T = ref.n_heads, x.shape[1]

    def run(out_proj: bool = True, mask: bool = True, v_proj: bool = True, heads: int = H) -> Tensor:
        q, k = pieces.split_heads(ref.q_proj(x), heads), pieces.split_heads(ref.k_proj(x), heads)
        v = pieces.split_heads(ref.v_proj(x) if v_proj else x, heads)
        out = pieces.merge_heads(pieces.scaled_dot_product_attention(q, k, v, pieces.causal_mask(T) if mask else None))
        return ref.out_proj(out) if out_proj else out

    return [_fp("self_attention_no_out_proj", lambda: run(out_proj=False)),
            _fp("self_attention_no_mask", lambda: run(mask=False)),
            _fp("self_attention_values_not_projected", lambda: run(v_proj=False)),
            _fp("self_attention_no_split", lambda: run(heads=1))]
