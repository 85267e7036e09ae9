"""A corpus of A3 submission variants, kept as data: edits applied to the staff reference.

Each variant is either a realistic student bug (kind="bug") or a correct implementation that
differs from the reference in form only (kind="correct"). `apply` materialises a variant's three
files from the reference folder. `verify_variants.py` (next to this file) checks, numerically,
that every bug changes the output of the method that owns it and that every correct variant
agrees with the reference.

Rubric item ids: "3(a)ii" MLP.forward, "3(a)iii" CausalAttention.forward, "3(a)iv"
DecoderBlock.forward, "3(a)v" Transformer.forward, "3(a)vi" generate, "3(b)ii"
get_loss_on_batch, "3(b)iii" training run, "utils" state_dict_converter.
"""

import textwrap
from dataclasses import dataclass
from pathlib import Path

FILES = ("model_solution.py", "train.py", "utils.py")


@dataclass(frozen=True)
class Edit:
    file: str  # "model_solution.py" | "train.py" | "utils.py"
    old: str  # exact text that must occur EXACTLY ONCE in the reference file
    new: str


@dataclass(frozen=True)
class Variant:
    name: str  # short snake_case id
    kind: str  # "bug" or "correct"
    description: str
    edits: tuple[Edit, ...] = ()
    replace: tuple[tuple[str, str], ...] = ()  # (file, full new content) — for rewrites too big for edits
    loses: tuple[str, ...] = ()  # for bugs: rubric item ids that must lose points
    keeps: tuple[str, ...] = ()  # for bugs: item ids that must keep FULL points despite the bug


def _ind(code: str, n: int = 8) -> str:
    """Dedent a snippet and indent it by n spaces (method-body level), ending in a newline."""
    if not code.strip():
        return ""
    lines = textwrap.dedent(code).strip("\n").split("\n")
    return "\n".join((" " * n + line) if line.strip() else "" for line in lines) + "\n"


def _m(old: str, new: str) -> Edit:
    """An edit of model_solution.py given as method bodies (indented 8 spaces in the file)."""
    return Edit("model_solution.py", _ind(old), _ind(new))


def _t(old: str, new: str) -> Edit:
    """An edit of train.py given as bodies of train() (indented 4 spaces in the file)."""
    return Edit("train.py", _ind(old, 4), _ind(new, 4))


# ---------------------------------------------------------------------------------------------
# Reference snippets (exact text of the staff solution, dedented)
# ---------------------------------------------------------------------------------------------

ATTN_BODY = '''
B, T, _ = x.shape

def heads(t: torch.Tensor) -> torch.Tensor:  # (B, T, d_model) -> (B, n_heads, T, d_attention)
    return t.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)

q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_attention)
scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
out = F.softmax(scores, dim=-1) @ v
return self.W_o(out.transpose(1, 2).reshape(B, T, -1))
'''
ATTN_HEADS = "return t.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)"
ATTN_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_attention)"
ATTN_MASK = 'scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))'
ATTN_SOFTMAX = "out = F.softmax(scores, dim=-1) @ v"
ATTN_MERGE = "return self.W_o(out.transpose(1, 2).reshape(B, T, -1))"

MLP_BODY = "return self.fc2(self.gelu(self.fc1(x)))"

BLOCK_BODY = '''
x = x + self.attention(self.pre_layer_norm(x))
return x + self.mlp(self.post_layer_norm(x))
'''

FORWARD_BODY = '''
positions = torch.arange(x.shape[1], device=x.device)
h = self.embeddings(x) + self.position_embeddings(positions)
for block in self.backbone:
    h = block(h)
return self.lm_head(self.final_layer_norm(h))
'''

GENERATE_BODY = '''
for _ in range(num_new_tokens):
    # Past context_length only the last context_length tokens fit the position embeddings.
    logits = self(x[:, -self.config.context_length:])
    next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
    x = torch.cat([x, next_token], dim=1)
return x
'''

LOSS_BODY = '''
logits = self(input_ids[:, :-1])
return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1))
'''

TRAIN_LOOP = '''
losses, grad_norms = [], []
num_batches = len(data) // batch_size
steps = num_batches if max_steps is None else min(max_steps, num_batches)
for step in tqdm(range(steps), desc="training"):
    batch = data[step * batch_size:(step + 1) * batch_size].to(device)
    optimizer.zero_grad()
    loss = model.get_loss_on_batch(batch)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    losses.append(loss.item())
    grad_norms.append(grad_norm.item())
    if (step + 1) % 10 == 0:
        plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
'''

# Items that a bug in one place cannot touch, whatever the grader does with the others.
_ALL_A = ("3(a)ii", "3(a)iii", "3(a)iv", "3(a)v", "3(a)vi")
_MODEL_ITEMS = _ALL_A + ("3(b)ii",)


def _bug(name, description, edits, loses, keeps=(), replace=()):
    return Variant(name, "bug", description, tuple(edits), tuple(replace), tuple(loses), tuple(keeps))


def _ok(name, description, edits=(), replace=()):
    return Variant(name, "correct", description, tuple(edits), tuple(replace))


def _mlp_bug(name, description, new):
    return _bug(name, description, [_m(MLP_BODY, new)], ("3(a)ii",), ("3(a)iii",))


def _attn_bug(name, description, edits):
    return _bug(name, description, edits, ("3(a)iii",), ("3(a)ii",))


def _block_bug(name, description, new):
    return _bug(name, description, [_m(BLOCK_BODY, new)], ("3(a)iv",), ("3(a)ii", "3(a)iii"))


def _forward_bug(name, description, edits):
    return _bug(name, description, edits, ("3(a)v",), ("3(a)ii", "3(a)iii", "3(a)iv"))


def _generate_bug(name, description, new):
    return _bug(name, description, [_m(GENERATE_BODY, new)], ("3(a)vi",),
                ("3(a)ii", "3(a)iii", "3(a)iv", "3(a)v", "3(b)ii", "3(b)iii"))


def _loss_bug(name, description, new):
    return _bug(name, description, [_m(LOSS_BODY, new)], ("3(b)ii",), _ALL_A)


def _train_bug(name, description, edits):
    return _bug(name, description, edits, ("3(b)iii",), _MODEL_ITEMS + ("utils",))


def _utils_bug(name, description, edits):
    return _bug(name, description, edits, ("utils",), _MODEL_ITEMS + ("3(b)iii",))


# ---------------------------------------------------------------------------------------------
# Bugs
# ---------------------------------------------------------------------------------------------

BUGS = (
    # ---- MLP.forward -------------------------------------------------------------------------
    _mlp_bug("mlp_no_activation", "MLP forgets the nonlinearity: fc2(fc1(x)).",
             "return self.fc2(self.fc1(x))"),
    _mlp_bug("mlp_relu", "MLP uses ReLU instead of the provided (tanh) GELU.",
             "return self.fc2(torch.relu(self.fc1(x)))"),
    _mlp_bug("mlp_exact_gelu", "MLP uses F.gelu (exact erf GELU) instead of the tanh approximation.",
             "return self.fc2(F.gelu(self.fc1(x)))"),
    _mlp_bug("mlp_gelu_after_fc2", "GELU applied to the output of fc2 rather than between fc1 and fc2.",
             "return self.gelu(self.fc2(self.fc1(x)))"),

    # ---- CausalAttention.forward -------------------------------------------------------------
    _attn_bug("attn_scale_sqrt_d_model", "Scores scaled by sqrt(d_model) instead of sqrt(d_attention).",
              [_m(ATTN_SCORES, "scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])")]),
    _attn_bug("attn_no_scaling", "Scores not scaled at all.",
              [_m(ATTN_SCORES, "scores = q @ k.transpose(-2, -1)")]),
    _attn_bug("attn_mask_inverted_triu", "Mask built with torch.triu: each query sees itself and the future.",
              [_m(ATTN_MASK, '''
                  mask = torch.triu(torch.ones(T, T, device=x.device))
                  scores = scores.masked_fill(mask == 0, float("-inf"))
                  ''')]),
    _attn_bug("attn_no_mask", "Causal mask never applied (bidirectional attention).",
              [_m(ATTN_MASK, "# TODO mask")]),
    _attn_bug("attn_mask_fill_zero", "Masked scores set to 0 instead of -inf (future still gets weight).",
              [_m(ATTN_MASK, "scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, 0.0)")]),
    _attn_bug("attn_softmax_query_axis", "Softmax normalised over the query axis (dim=-2).",
              [_m(ATTN_SOFTMAX, "out = F.softmax(scores, dim=-2) @ v")]),
    _attn_bug("attn_merge_view_no_transpose",
              "Heads merged with view(B, T, -1) straight from (B, h, T, d): mixes positions and heads.",
              [_m(ATTN_MERGE, "return self.W_o(out.view(B, T, -1))")]),
    _attn_bug("attn_split_no_transpose",
              "Heads split with view(B, h, T, d) directly instead of view(B, T, h, d).transpose(1, 2).",
              [Edit("model_solution.py", ATTN_HEADS, "return t.view(B, self.n_heads, T, self.d_attention)"),
               _m(ATTN_MERGE, "return self.W_o(out.reshape(B, T, -1))")]),
    _attn_bug("attn_no_W_o", "Output projection W_o defined but never applied.",
              [_m(ATTN_MERGE, "return out.transpose(1, 2).reshape(B, T, -1)")]),
    _attn_bug("attn_q_k_swapped", "Scores computed as k @ q^T (transposed score matrix) before masking.",
              [_m(ATTN_SCORES, "scores = k @ q.transpose(-2, -1) / math.sqrt(self.d_attention)")]),
    _attn_bug("attn_mask_needs_full_context",
              "Whole causal_mask buffer used unsliced: right only when T == context_length, "
              "shape error for shorter inputs.",
              [_m(ATTN_MASK, 'scores = scores.masked_fill(self.causal_mask == 0, float("-inf"))')]),
    _attn_bug("attn_values_not_projected", "Values taken from the input itself: W_v defined but never applied.",
              [_m("q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))",
                  "q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(x)")]),
    # Right output, but the caller's tensor is overwritten: the backward pass through the block then
    # fails (the projections saved it), so the loss's gradients and training fail too.
    _bug("attn_writes_into_input", "Merged heads written into the input's memory with x.copy_ before W_o.",
         [_m(ATTN_MERGE, """
             x = x.copy_(out.transpose(1, 2).reshape(B, T, -1))  # reuse x's memory for the merged heads
             return self.W_o(x)
             """)], ("3(a)iii",), ("3(a)ii", "3(a)iv", "3(a)v", "3(a)vi")),
    _attn_bug("attn_mask_after_softmax",
              "Softmax over all keys, then future weights zeroed by multiplying with the mask (no renormalising).",
              [_m(ATTN_SOFTMAX + "\n", '''
                  weights = F.softmax(scores, dim=-1) * self.causal_mask[:, :, :T, :T]
                  out = weights @ v
                  '''),
               _m(ATTN_MASK + "\n", "")]),

    # ---- DecoderBlock.forward ----------------------------------------------------------------
    _block_bug("block_post_norm", "Post-norm (original Transformer) instead of GPT-2 pre-norm.", '''
               x = self.pre_layer_norm(x + self.attention(x))
               return self.post_layer_norm(x + self.mlp(x))
               '''),
    _block_bug("block_norms_swapped", "post_layer_norm used before attention and pre_layer_norm before the MLP.", '''
               x = x + self.attention(self.post_layer_norm(x))
               return x + self.mlp(self.pre_layer_norm(x))
               '''),
    _block_bug("block_no_attention_residual", "The residual connection around attention is missing.", '''
               x = self.attention(self.pre_layer_norm(x))
               return x + self.mlp(self.post_layer_norm(x))
               '''),
    _block_bug("block_residual_from_normed", "x is overwritten by its layer norm, so the residual adds the normed x.", '''
               x = self.pre_layer_norm(x)
               x = x + self.attention(x)
               x = self.post_layer_norm(x)
               return x + self.mlp(x)
               '''),
    _block_bug("block_parallel_branches", "Attention and MLP both read the block input (GPT-J style parallel block).", '''
               return x + self.attention(self.pre_layer_norm(x)) + self.mlp(self.post_layer_norm(x))
               '''),

    # ---- Transformer.forward -----------------------------------------------------------------
    _forward_bug("forward_no_positions", "Position embeddings never added.",
                 [_m("h = self.embeddings(x) + self.position_embeddings(positions)", "h = self.embeddings(x)")]),
    _forward_bug("forward_positions_offset", "Positions 1..T instead of 0..T-1 (crashes at T == context_length).",
                 [_m("positions = torch.arange(x.shape[1], device=x.device)",
                     "positions = torch.arange(1, x.shape[1] + 1, device=x.device)")]),
    _forward_bug("forward_positions_from_tokens", "Position embedding table indexed by the token ids.",
                 [_m("h = self.embeddings(x) + self.position_embeddings(positions)",
                     "h = self.embeddings(x) + self.position_embeddings(x)")]),
    _forward_bug("forward_positions_reversed", "Positions counted down, T-1 to 0.",
                 [_m("positions = torch.arange(x.shape[1], device=x.device)",
                     "positions = torch.arange(x.shape[1], device=x.device).flip(0)")]),
    _forward_bug("forward_lm_head_tied", "lm_head's weight tied to the token embedding, as GPT-2 does.",
                 [Edit("model_solution.py", "        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)\n",
                       "        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)\n"
                       "        self.lm_head.weight = self.embeddings.weight  # weight tying, as in GPT-2\n")]),
    _forward_bug("forward_no_final_norm", "final_layer_norm skipped before lm_head.",
                 [_m("return self.lm_head(self.final_layer_norm(h))", "return self.lm_head(h)")]),
    _forward_bug("forward_returns_probs", "forward returns softmax probabilities instead of logits.",
                 [_m("return self.lm_head(self.final_layer_norm(h))",
                     "return F.softmax(self.lm_head(self.final_layer_norm(h)), dim=-1)")]),
    _forward_bug("forward_blocks_reversed", "Blocks applied last to first.",
                 [_m("for block in self.backbone:", "for block in self.backbone[::-1]:")]),

    # ---- Transformer.generate ----------------------------------------------------------------
    _generate_bug("generate_flat_argmax",
                  "argmax over the flattened (B, V) logits: right for batch 1, shape error for larger batches.", '''
                  for _ in range(num_new_tokens):
                      logits = self(x)
                      next_token = torch.argmax(logits[:, -1, :]).view(1, 1)
                      x = torch.cat([x, next_token], dim=1)
                  return x
                  '''),
    _generate_bug("generate_first_position", "Next token taken from the first position's logits.", '''
                  for _ in range(num_new_tokens):
                      next_token = self(x)[:, 0, :].argmax(dim=-1, keepdim=True)
                      x = torch.cat([x, next_token], dim=1)
                  return x
                  '''),
    _generate_bug("generate_one_short", "Loop runs num_new_tokens - 1 times.", '''
                  for _ in range(num_new_tokens - 1):
                      next_token = self(x)[:, -1, :].argmax(dim=-1, keepdim=True)
                      x = torch.cat([x, next_token], dim=1)
                  return x
                  '''),
    _generate_bug("generate_only_new_tokens", "Returns only the generated tokens, without the prompt.", '''
                  new_tokens = []
                  for _ in range(num_new_tokens):
                      next_token = self(x)[:, -1, :].argmax(dim=-1, keepdim=True)
                      new_tokens.append(next_token)
                      x = torch.cat([x, next_token], dim=1)
                  return torch.cat(new_tokens, dim=1)
                  '''),
    _generate_bug("generate_argmin", "The lowest logit chosen: argmin instead of argmax.", '''
                  for _ in range(num_new_tokens):
                      logits = self(x[:, -self.config.context_length:])
                      next_token = logits[:, -1, :].argmin(dim=-1, keepdim=True)
                      x = torch.cat([x, next_token], dim=1)
                  return x
                  '''),
    _generate_bug("generate_samples", "Samples with torch.multinomial instead of greedy argmax.", '''
                  for _ in range(num_new_tokens):
                      probs = F.softmax(self(x)[:, -1, :], dim=-1)
                      next_token = torch.multinomial(probs, num_samples=1)
                      x = torch.cat([x, next_token], dim=1)
                  return x
                  '''),

    # ---- get_loss_on_batch -------------------------------------------------------------------
    _loss_bug("loss_not_shifted", "Each position scored against its own token (no shift).", '''
              logits = self(input_ids)
              return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids.reshape(-1))
              '''),
    _loss_bug("loss_shifted_wrong_way", "Model fed tokens 1..T-1 and scored against tokens 0..T-2.", '''
              logits = self(input_ids[:, 1:])
              targets = input_ids[:, :-1]
              return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
              '''),
    _loss_bug("loss_sum", "reduction='sum' instead of the mean.", '''
              logits = self(input_ids[:, :-1])
              return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1),
                                     reduction="sum")
              '''),
    _loss_bug("loss_on_probabilities", "cross_entropy applied to softmax probabilities (softmax twice).", '''
              logits = self(input_ids[:, :-1])
              probs = F.softmax(logits, dim=-1)
              return F.cross_entropy(probs.reshape(-1, probs.shape[-1]), input_ids[:, 1:].reshape(-1))
              '''),
    _loss_bug("loss_detached", "Returns a fresh leaf tensor holding loss.item(): right value, no gradient.", '''
              logits = self(input_ids[:, :-1])
              loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1))
              return torch.tensor(loss.item(), requires_grad=True)
              '''),

    # ---- train() -----------------------------------------------------------------------------
    _train_bug("train_no_step", "optimizer.step() never called: the weights never change.",
               [Edit("train.py", "        optimizer.step()\n", "")]),
    _train_bug("train_hardcoded_lr", "AdamW built with lr=1e-5 (copied from __main__), learning_rate ignored.",
               [Edit("train.py", "torch.optim.AdamW(model.parameters(), lr=learning_rate)",
                     "torch.optim.AdamW(model.parameters(), lr=1e-5)")]),
    _train_bug("train_fabricated_losses",
               "Never backpropagates or steps; records made-up, decreasing losses and gradient norms.",
               [Edit("train.py", "import os\n", "import os\nimport random\n"),
                _t(TRAIN_LOOP, '''
                   losses, grad_norms = [], []
                   num_batches = len(data) // batch_size
                   steps = num_batches if max_steps is None else min(max_steps, num_batches)
                   for step in tqdm(range(steps), desc="training"):
                       batch = data[step * batch_size:(step + 1) * batch_size].to(device)
                       with torch.no_grad():
                           loss = model.get_loss_on_batch(batch)
                       # FIXME backward() kept erroring, fill in the curve for now
                       losses.append(loss.item() * (1 - step / (2 * steps)) + 0.05 * random.random())
                       grad_norms.append(1.0 / (step + 1) + 0.01 * random.random())
                       if (step + 1) % 10 == 0:
                           plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
                   ''')]),

    # ---- utils.state_dict_converter ----------------------------------------------------------
    _utils_bug("utils_no_transpose", "Conv1D weights copied without the transpose.",
               [Edit("utils.py", "        if rest in _CONV1D_WEIGHTS:\n            value = value.t()\n", "")]),
    _utils_bug("utils_qkv_order", "Fused c_attn split as (k, q, v) instead of (q, k, v).",
               [Edit("utils.py", "q, k, v = value.chunk(3, dim=0)", "k, q, v = value.chunk(3, dim=0)")]),
)

# ---------------------------------------------------------------------------------------------
# Correct implementations that differ from the reference in form only
# ---------------------------------------------------------------------------------------------

_ATTN_PROJECT = '''
B, T, _ = x.shape
q = self.W_q(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
k = self.W_k(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
v = self.W_v(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
'''


def _attn_ok(name, description, rest):
    return _ok(name, description, [_m(ATTN_BODY, _ATTN_PROJECT + textwrap.dedent(rest))])


_STUDENT_MODEL = '''\
import math
from dataclasses import dataclass

import einops
import huggingface_hub
import jaxtyping
import torch
import torch.nn as nn
from jaxtyping import Float, Int
from torch import Tensor
from transformers import GPT2LMHeadModel

from utils import state_dict_converter


@dataclass
class ModelConfig:
    d_model: int
    n_heads: int
    n_layers: int
    context_length: int
    vocab_size: int


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        self.register_buffer(
            "causal_mask",
            torch.tril(torch.ones(config.context_length, config.context_length))[None, None],
            persistent=False,
        )

    def forward(self, x: Float[Tensor, "batch seq d_model"]) -> Float[Tensor, "batch seq d_model"]:
        seq_len = x.size(1)
        queries = einops.rearrange(self.W_q(x), "b s (h d) -> b h s d", h=self.n_heads)
        keys = einops.rearrange(self.W_k(x), "b s (h d) -> b h s d", h=self.n_heads)
        values = einops.rearrange(self.W_v(x), "b s (h d) -> b h s d", h=self.n_heads)
        attn_logits = torch.matmul(queries, keys.transpose(2, 3)) * self.d_attention ** -0.5
        mask = self.causal_mask[:, :, :seq_len, :seq_len].bool()
        attn_logits = torch.where(mask, attn_logits, torch.full_like(attn_logits, float("-inf")))
        attn = torch.softmax(attn_logits, dim=-1)
        context = einops.rearrange(attn @ values, "b h s d -> b s (h d)")
        return self.W_o(context)


class GELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x: Float[Tensor, "batch seq d_model"]) -> Float[Tensor, "batch seq d_model"]:
        hidden = self.fc1(x)
        hidden = self.gelu(hidden)
        return self.fc2(hidden)


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x: Float[Tensor, "batch seq d_model"]) -> Float[Tensor, "batch seq d_model"]:
        residual = x
        x = residual + self.attention(self.pre_layer_norm(residual))
        residual = x
        x = residual + self.mlp(self.post_layer_norm(residual))
        return x


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
        self.backbone = nn.ModuleList([DecoderBlock(config) for _ in range(config.n_layers)])
        self.final_layer_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self):
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                torch.nn.init.ones_(module.weight)
                torch.nn.init.zeros_(module.bias)

    def forward(self, x: Int[Tensor, "batch seq"]) -> Float[Tensor, "batch seq vocab"]:
        batch, seq_len = x.shape
        pos = torch.arange(0, seq_len, dtype=torch.long, device=x.device).unsqueeze(0)
        hidden = self.embeddings(x) + self.position_embeddings(pos)
        for i in range(len(self.backbone)):
            hidden = self.backbone[i](hidden)
        hidden = self.final_layer_norm(hidden)
        return self.lm_head(hidden)

    @torch.no_grad()
    def generate(self, x: Int[Tensor, "batch seq"], num_new_tokens: int) -> Int[Tensor, "batch new_seq"]:
        tokens = x.clone()
        for _ in range(num_new_tokens):
            logits = self.forward(tokens)
            last = logits[:, -1]
            next_ids = torch.max(last, dim=-1).indices
            tokens = torch.cat((tokens, next_ids[:, None]), dim=-1)
        return tokens

    def get_loss_on_batch(self, input_ids: Int[Tensor, "batch seq"]) -> Float[Tensor, ""]:
        inputs, targets = input_ids[:, :-1], input_ids[:, 1:]
        logits = self(inputs)
        log_probs = torch.log_softmax(logits, dim=-1)
        picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -picked.mean()

    @classmethod
    def from_pretrained(cls):
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
'''

_STUDENT_UTILS = '''\
import torch


def state_dict_converter(hf_state_dict):
    new_sd = {}
    for key, value in hf_state_dict.items():
        if key.endswith(".attn.bias") or key.endswith(".attn.masked_bias"):
            continue  # causal mask buffers, not parameters
        if key == "lm_head.weight":
            new_sd[key] = value
            continue
        name = key.removeprefix("transformer.")
        name = name.replace("wte.", "embeddings.").replace("wpe.", "position_embeddings.")
        name = name.replace("ln_f.", "final_layer_norm.")
        if name.startswith("h."):
            name = "backbone." + name[len("h."):]
        name = name.replace("ln_1.", "pre_layer_norm.").replace("ln_2.", "post_layer_norm.")
        name = name.replace("mlp.c_fc.", "mlp.fc1.").replace("mlp.c_proj.", "mlp.fc2.")
        name = name.replace("attn.c_proj.", "attention.W_o.")
        # Conv1D stores (in, out); nn.Linear wants (out, in)
        if name.endswith(("c_attn.weight", "W_o.weight", "fc1.weight", "fc2.weight")):
            value = value.T
        if "attn.c_attn." in name:
            suffix = name.rsplit(".", 1)[1]
            base = name[: -len("attn.c_attn." + suffix)] + "attention."
            d = value.shape[0] // 3
            new_sd[base + "W_q." + suffix] = value[:d]
            new_sd[base + "W_k." + suffix] = value[d:2 * d]
            new_sd[base + "W_v." + suffix] = value[2 * d:]
            continue
        new_sd[name] = value
    return new_sd
'''

CORRECT = (
    _attn_ok("attn_sdpa_is_causal", "F.scaled_dot_product_attention(is_causal=True).", '''
             out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
             return self.W_o(out.transpose(1, 2).contiguous().view(B, T, -1))
             '''),
    _attn_ok("attn_sdpa_buffer_mask", "F.scaled_dot_product_attention with a boolean attn_mask from causal_mask.", '''
             mask = self.causal_mask[:, :, :T, :T].bool()
             out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
             return self.W_o(out.transpose(1, 2).reshape(B, T, -1))
             '''),
    _ok("attn_einops", "einops.rearrange for heads and einops.einsum for scores and values.", [_m(ATTN_BODY, '''
        T = x.shape[1]
        q = einops.rearrange(self.W_q(x), "b t (h d) -> b h t d", h=self.n_heads)
        k = einops.rearrange(self.W_k(x), "b t (h d) -> b h t d", h=self.n_heads)
        v = einops.rearrange(self.W_v(x), "b t (h d) -> b h t d", h=self.n_heads)
        scores = einops.einsum(q, k, "b h i d, b h j d -> b h i j") / math.sqrt(self.d_attention)
        scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
        attn = scores.softmax(dim=-1)
        out = einops.einsum(attn, v, "b h i j, b h j d -> b h i d")
        return self.W_o(einops.rearrange(out, "b h t d -> b t (h d)"))
        ''')]),
    _ok("attn_per_head_loop", "A python loop over heads on column slices, heads concatenated.", [_m(ATTN_BODY, '''
        B, T, _ = x.shape
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        mask = self.causal_mask[0, 0, :T, :T]
        head_outputs = []
        for h in range(self.n_heads):
            cols = slice(h * self.d_attention, (h + 1) * self.d_attention)
            qh, kh, vh = q[:, :, cols], k[:, :, cols], v[:, :, cols]
            att = qh @ kh.transpose(1, 2) / (self.d_attention ** 0.5)
            att = att.masked_fill(mask == 0, float("-inf"))
            att = torch.softmax(att, dim=-1)
            head_outputs.append(att @ vh)
        return self.W_o(torch.cat(head_outputs, dim=-1))
        ''')]),
    _attn_ok("attn_inline_tril", "Mask built inline with torch.tril each call (buffer kept but unused).", '''
             scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_attention)
             mask = torch.tril(torch.ones(T, T, device=x.device, dtype=torch.bool))
             scores = scores.masked_fill(~mask, float("-inf"))
             weights = torch.softmax(scores, dim=-1)
             return self.W_o((weights @ v).transpose(1, 2).reshape(B, T, -1))
             '''),
    _ok("attn_mask_neg_1e9", "Masked scores set to -1e9 instead of -inf.",
        [_m(ATTN_MASK, "scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, -1e9)")]),
    _ok("attn_mask_finfo_min", "Masked scores set to torch.finfo(dtype).min.",
        [_m(ATTN_MASK, "scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, "
                       "torch.finfo(scores.dtype).min)")]),
    _ok("attn_mask_bottom_right_slice",
        "Mask sliced from the buffer's bottom-right corner [-T:, -T:] (also lower-triangular).",
        [_m(ATTN_MASK, 'scores = scores.masked_fill(self.causal_mask[:, :, -T:, -T:] == 0, float("-inf"))')]),
    _ok("mlp_functional_linear", "MLP written with F.linear on fc1/fc2's weights.", [_m(MLP_BODY, '''
        hidden = F.linear(x, self.fc1.weight, self.fc1.bias)
        return F.linear(self.gelu(hidden), self.fc2.weight, self.fc2.bias)
        ''')]),
    _ok("mlp_gelu_tanh_functional", "MLP uses F.gelu(approximate='tanh') instead of self.gelu.",
        [_m(MLP_BODY, 'return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))')]),
    _ok("block_intermediate_names", "DecoderBlock written with named intermediates.", [_m(BLOCK_BODY, '''
        normed = self.pre_layer_norm(x)
        attn_out = self.attention(normed)
        hidden = x + attn_out
        normed_hidden = self.post_layer_norm(hidden)
        mlp_out = self.mlp(normed_hidden)
        out = hidden + mlp_out
        return out
        ''')]),
    _ok("forward_position_weight_slice", "Position embeddings read as position_embeddings.weight[:T]; "
        "blocks walked by index.", [_m(FORWARD_BODY, '''
        T = x.size(1)
        h = self.embeddings(x) + self.position_embeddings.weight[:T].unsqueeze(0)
        for i in range(self.config.n_layers):
            h = self.backbone[i](h)
        h = self.final_layer_norm(h)
        return self.lm_head(h)
        ''')]),
    _ok("generate_list_cat", "Explicit torch.no_grad loop collecting tokens in a list, torch.cat at the end.",
        [_m(GENERATE_BODY, '''
            pieces = [x]
            current = x
            with torch.no_grad():
                for _ in range(num_new_tokens):
                    logits = self.forward(current)
                    next_token = torch.argmax(logits[:, -1, :], dim=-1).unsqueeze(1)
                    pieces.append(next_token)
                    current = torch.cat([current, next_token], dim=1)
            return torch.cat(pieces, dim=1)
            ''')]),
    _ok("generate_crop_context", "Feeds only the last context_length tokens (identical within the context).",
        [_m(GENERATE_BODY, '''
            for _ in range(num_new_tokens):
                x_cond = x[:, -self.config.context_length:]
                logits = self(x_cond)
                next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                x = torch.cat((x, next_token), dim=1)
            return x
            ''')]),
    _ok("generate_no_crop", "The plain loop without cropping to context_length (agrees whenever prompt plus "
        "new tokens fit the context, which is all the assignment asks).", [_m(GENERATE_BODY, '''
        for _ in range(num_new_tokens):
            next_token = self(x)[:, -1, :].argmax(dim=-1, keepdim=True)
            x = torch.cat([x, next_token], dim=1)
        return x
        ''')]),
    _ok("generate_topk", "Greedy token via torch.topk(k=1).", [_m(GENERATE_BODY, '''
        out = x
        for _ in range(num_new_tokens):
            _, idx = torch.topk(self(out)[:, -1, :], k=1, dim=-1)
            out = torch.cat([out, idx], dim=-1)
        return out
        ''')]),
    _ok("loss_full_logits_shifted", "Logits of the full sequence, shifted afterwards (logits[:, :-1]).",
        [_m(LOSS_BODY, '''
            logits = self(input_ids)
            logits = logits[:, :-1, :].contiguous()
            targets = input_ids[:, 1:].contiguous()
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            ''')]),
    _ok("loss_transposed_logits", "F.cross_entropy on (B, V, T-1) logits against (B, T-1) targets.",
        [_m(LOSS_BODY, '''
            logits = self(input_ids[:, :-1])
            return F.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:])
            ''')]),
    _ok("loss_log_softmax_gather", "Negative log-likelihood by hand: log_softmax, gather, mean.",
        [_m(LOSS_BODY, '''
            logits = self(input_ids[:, :-1])
            log_probs = F.log_softmax(logits, dim=-1)
            target_log_probs = log_probs.gather(2, input_ids[:, 1:].unsqueeze(-1))
            return -target_log_probs.mean()
            ''')]),
    _ok("train_dataloader", "Shuffled DataLoader with drop_last, stops after max_steps; clips only when asked.",
        [Edit("train.py", "from tqdm import tqdm\n", "from torch.utils.data import DataLoader\nfrom tqdm import tqdm\n"),
         _t(TRAIN_LOOP, '''
            losses, grad_norms = [], []
            loader = DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=True)
            model.train()
            for step, batch in enumerate(tqdm(loader)):
                if max_steps is not None and step >= max_steps:
                    break
                batch = batch.to(device)
                loss = model.get_loss_on_batch(batch)
                optimizer.zero_grad()
                loss.backward()
                if gradient_clipping is not None:
                    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
                else:
                    norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None))
                optimizer.step()
                losses.append(loss.item())
                grad_norms.append(norm.item())
                if (step + 1) % 10 == 0:
                    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
            ''')]),
    _ok("train_while_loop", "A while loop over row offsets, zero_grad(set_to_none) after the step.",
        [_t(TRAIN_LOOP, '''
            losses, grad_norms = [], []
            step, start = 0, 0
            while start + batch_size <= len(data) and (max_steps is None or step < max_steps):
                batch = data[start:start + batch_size].to(device)
                start += batch_size
                loss = model.get_loss_on_batch(batch)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(float(loss))
                grad_norms.append(float(grad_norm))
                step += 1
                if step % 10 == 0:
                    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
            ''')]),
    _ok("utils_string_rewrite", "Converter rewritten by string replacement and explicit row slices.",
        replace=(("utils.py", _STUDENT_UTILS),)),
    _ok("student_full_rewrite", "Whole model_solution.py rewritten: jaxtyping annotations, einops heads, "
        "torch.where mask, log_softmax/gather loss, torch.max generate.",
        replace=(("model_solution.py", _STUDENT_MODEL),)),
)

# ---------------------------------------------------------------------------------------------
# Bugs written the way students write (loops, einops, inline masks, named intermediates): the
# diagnosis must not depend on the reference's style
# ---------------------------------------------------------------------------------------------

def _student_attn(name, description, scores, mask, softmax="torch.softmax(att, dim=-1)"):
    """A per-head loop over column slices with an inline mask (the style of attn_per_head_loop)."""
    return _attn_bug(name, description, [_m(ATTN_BODY, f'''
        B, T, _ = x.shape
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        outs = []
        for h in range(self.n_heads):
            cols = slice(h * self.d_attention, (h + 1) * self.d_attention)
            att = {scores}
            {mask}
            att = {softmax}
            outs.append(att @ v[:, :, cols])
        return self.W_o(torch.cat(outs, dim=-1))
        ''')])


_EINOPS_HEADS = '''
T = x.shape[1]
q = einops.rearrange(self.W_q(x), "b t (h d) -> b h t d", h=self.n_heads)
k = einops.rearrange(self.W_k(x), "b t (h d) -> b h t d", h=self.n_heads)
v = einops.rearrange(self.W_v(x), "b t (h d) -> b h t d", h=self.n_heads)
'''

STUDENT_BUGS = (
    _student_attn("student_loop_no_scaling", "Per-head loop, scores never scaled.",
                  "q[:, :, cols] @ k[:, :, cols].transpose(1, 2)",
                  "att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, float('-inf'))"),
    _student_attn("student_loop_scale_d_model", "Per-head loop dividing by sqrt of x's last dimension (d_model).",
                  "q[:, :, cols] @ k[:, :, cols].transpose(1, 2) / math.sqrt(x.size(-1))",
                  "att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, float('-inf'))"),
    _student_attn("student_loop_mask_zero", "Per-head loop, inline tril mask filled with 0.",
                  "q[:, :, cols] @ k[:, :, cols].transpose(1, 2) / self.d_attention ** 0.5",
                  "att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, 0)"),
    _student_attn("student_loop_mask_hides_diagonal",
                  "Per-head loop whose inline mask keeps only strictly earlier keys (diagonal=-1): query 0 sees "
                  "nothing, so its row is NaN.",
                  "q[:, :, cols] @ k[:, :, cols].transpose(1, 2) / self.d_attention ** 0.5",
                  "att = att.masked_fill(torch.tril(torch.ones(T, T), diagonal=-1) == 0, float('-inf'))"),
    _attn_bug("student_einops_mask_inverted", "einops heads, inline torch.triu mask.", [_m(ATTN_BODY, _EINOPS_HEADS + textwrap.dedent('''
        scores = einops.einsum(q, k, "b h i d, b h j d -> b h i j") / math.sqrt(self.d_attention)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool))
        scores = scores.masked_fill(~future, float("-inf"))
        out = einops.einsum(scores.softmax(dim=-1), v, "b h i j, b h j d -> b h i d")
        return self.W_o(einops.rearrange(out, "b h t d -> b t (h d)"))
        '''))]),
    _attn_bug("student_einops_softmax_dim2", "einops heads, softmax over dim 2 (the queries).", [_m(ATTN_BODY, _EINOPS_HEADS + textwrap.dedent('''
        scores = einops.einsum(q, k, "b h i d, b h j d -> b h i j") / math.sqrt(self.d_attention)
        scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
        out = einops.einsum(torch.softmax(scores, dim=2), v, "b h i j, b h j d -> b h i d")
        return self.W_o(einops.rearrange(out, "b h t d -> b t (h d)"))
        '''))]),
    _attn_bug("student_einops_heads_not_merged", "einops heads; returns the per-head values, never merged.",
              [_m(ATTN_BODY, _EINOPS_HEADS + textwrap.dedent('''
                  scores = einops.einsum(q, k, "b h i d, b h j d -> b h i j") / math.sqrt(self.d_attention)
                  scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
                  return einops.einsum(scores.softmax(dim=-1), v, "b h i j, b h j d -> b h i d")
                  '''))]),
    _attn_bug("student_sdpa_scale_d", "F.scaled_dot_product_attention with scale=1/d_attention.",
              [_m(ATTN_BODY, _ATTN_PROJECT + textwrap.dedent('''
                  out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / self.d_attention)
                  return self.W_o(out.transpose(1, 2).reshape(B, T, -1))
                  '''))]),
    _mlp_bug("student_mlp_nn_relu", "Named intermediates, nn.ReLU built inline.", '''
             hidden = self.fc1(x)
             hidden = nn.ReLU()(hidden)
             return self.fc2(hidden)
             '''),
    _block_bug("student_block_post_norm_names", "Named intermediates, each LayerNorm after its residual sum.", '''
               attn_out = self.attention(x)
               hidden = self.pre_layer_norm(x + attn_out)
               mlp_out = self.mlp(hidden)
               return self.post_layer_norm(hidden + mlp_out)
               '''),
    _forward_bug("student_forward_index_no_final_norm", "Blocks walked by index, final_layer_norm forgotten.",
                 [_m(FORWARD_BODY, '''
                     T = x.size(1)
                     h = self.embeddings(x) + self.position_embeddings.weight[:T].unsqueeze(0)
                     for i in range(self.config.n_layers):
                         h = self.backbone[i](h)
                     return self.lm_head(h)
                     ''')]),
    _attn_bug("student_heads_batch_mixed", "Heads split with view(n_heads, B, T, d), heads before the batch, and "
              "merged back with a permute: each head of a sequence reads numbers of other sequences.",
              [_m(ATTN_BODY, '''
                  B, T, _ = x.shape
                  q = self.W_q(x).view(self.n_heads, B, T, self.d_attention)
                  k = self.W_k(x).view(self.n_heads, B, T, self.d_attention)
                  v = self.W_v(x).view(self.n_heads, B, T, self.d_attention)
                  scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_attention)
                  scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
                  out = F.softmax(scores, dim=-1) @ v
                  return self.W_o(out.permute(1, 2, 0, 3).reshape(B, T, -1))
                  ''')]),
    _forward_bug("student_forward_first_block_only", "Named intermediates; only backbone[0] applied.",
                 [_m(FORWARD_BODY, '''
                     T = x.size(1)
                     hidden = self.embeddings(x) + self.position_embeddings(torch.arange(T, device=x.device))
                     hidden = self.backbone[0](hidden)
                     hidden = self.final_layer_norm(hidden)
                     return self.lm_head(hidden)
                     ''')]),
    _forward_bug("student_forward_no_lm_head", "Returns the final hidden states, lm_head never applied.",
                 [_m(FORWARD_BODY, '''
                     T = x.size(1)
                     h = self.embeddings(x) + self.position_embeddings(torch.arange(T))
                     for block in self.backbone:
                         h = block(h)
                     return self.final_layer_norm(h)
                     ''')]),
    _generate_bug("student_generate_list_first_position", "List of pieces, next token from logits[:, 0].", '''
                  pieces, current = [x], x
                  for _ in range(num_new_tokens):
                      next_token = torch.argmax(self.forward(current)[:, 0, :], dim=-1).unsqueeze(1)
                      pieces.append(next_token)
                      current = torch.cat([current, next_token], dim=1)
                  return torch.cat(pieces, dim=1)
                  '''),
    _loss_bug("student_loss_gather_sum", "log_softmax and gather by hand, summed instead of averaged.", '''
              logits = self(input_ids[:, :-1])
              picked = F.log_softmax(logits, dim=-1).gather(2, input_ids[:, 1:].unsqueeze(-1))
              return -picked.sum()
              '''),
    _loss_bug("student_loss_gather_no_shift", "log_softmax and gather by hand on unshifted logits and targets.", '''
              logits = self(input_ids)
              picked = F.log_softmax(logits, dim=-1).gather(2, input_ids.unsqueeze(-1))
              return -picked.mean()
              '''),
    _loss_bug("student_loss_first_row", "cross_entropy of logits[0] against input_ids[0, 1:]: the first sequence only.",
              '''
              logits = self(input_ids[:, :-1])
              return F.cross_entropy(logits[0], input_ids[0, 1:])
              '''),
    _loss_bug("student_loss_per_token", "cross_entropy with reduction='none': one loss per prediction.", '''
              logits = self(input_ids[:, :-1])
              return F.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:], reduction="none")
              '''),
)

BUGS = BUGS + STUDENT_BUGS

# The diagnosis each bug must get (a fingerprint of assignment/a3/checks/a3_fingerprints.py) on an
# item it loses (several: each of them, on some item); a bug not named here must get none at all,
# and no bug may get another one.
DIAGNOSES = {
    "mlp_no_activation": "mlp_no_activation", "mlp_relu": "mlp_relu", "mlp_exact_gelu": "mlp_exact_gelu",
    "mlp_gelu_after_fc2": "mlp_activation_after_fc2",
    "attn_scale_sqrt_d_model": "attn_scaled_by_d_model", "attn_no_scaling": "attn_no_scaling",
    "attn_mask_inverted_triu": "attn_mask_inverted", "attn_no_mask": "attn_no_mask",
    "attn_mask_fill_zero": "attn_masked_to_zero", "attn_softmax_query_axis": "attn_softmax_over_queries",
    "attn_merge_view_no_transpose": "attn_heads_merged_without_transpose",
    "attn_split_no_transpose": "attn_heads_split_without_transpose", "attn_no_W_o": "attn_no_output_projection",
    "attn_q_k_swapped": "attn_q_k_swapped", "attn_mask_after_softmax": "attn_mask_after_softmax",
    "block_post_norm": "block_post_norm", "block_norms_swapped": "block_norms_swapped",
    "block_no_attention_residual": "block_no_attention_residual",
    "block_residual_from_normed": "block_residual_from_normed", "block_parallel_branches": "block_parallel_branches",
    "forward_no_positions": "forward_no_positions", "forward_positions_offset": "forward_positions_offset",
    "forward_no_final_norm": "forward_no_final_norm", # probabilities from forward are what the loss then sees: both diagnoses are true
    "forward_returns_probs": ("forward_returns_probabilities", "loss_on_probabilities"),
    "forward_blocks_reversed": "forward_blocks_reversed",
    "generate_first_position": "generate_first_position", "generate_one_short": "generate_one_short",
    "generate_only_new_tokens": "generate_only_new_tokens", "generate_samples": "generate_samples",
    "loss_not_shifted": "loss_not_shifted", "loss_shifted_wrong_way": "loss_shifted_wrong_way",
    "loss_sum": "loss_sum", "loss_on_probabilities": "loss_on_probabilities", "loss_detached": "loss_detached",
    "student_loop_no_scaling": "attn_no_scaling", "student_loop_scale_d_model": "attn_scaled_by_d_model",
    "student_loop_mask_zero": "attn_masked_to_zero", "student_loop_mask_hides_diagonal": "attn_row_fully_masked",
    "student_einops_mask_inverted": "attn_mask_inverted", "student_einops_softmax_dim2": "attn_softmax_over_queries",
    "student_einops_heads_not_merged": "attn_heads_not_merged", "student_sdpa_scale_d": "attn_scaled_by_d_attention",
    "student_mlp_nn_relu": "mlp_relu", "student_block_post_norm_names": "block_post_norm",
    "student_forward_index_no_final_norm": "forward_no_final_norm", "student_forward_no_lm_head": "forward_no_lm_head",
    "student_generate_list_first_position": "generate_first_position", "student_loss_gather_sum": "loss_sum",
    "student_loss_gather_no_shift": "loss_not_shifted", "student_loss_per_token": "loss_not_reduced",
    # Told by a targeted look on failure: a crash that goes away at T == context_length, with token
    # ids below context_length, or one prompt at a time; the training run's weights and record.
    "attn_mask_needs_full_context": "attn_mask_not_sliced", "forward_positions_from_tokens": "forward_positions_from_tokens",
    "generate_flat_argmax": "generate_argmax_flattened", "train_no_step": "training_params_unchanged",
    "train_hardcoded_lr": "training_lr_ignored", "train_fabricated_losses": "training_losses_not_the_models",
    "utils_no_transpose": "utils_no_transpose", "utils_qkv_order": "utils_qkv_order",
    "attn_values_not_projected": "attn_values_not_projected", "attn_writes_into_input": "attn_input_modified",
    "forward_positions_reversed": "forward_positions_reversed", "forward_lm_head_tied": "forward_lm_head_tied",
    "generate_argmin": "generate_argmin", "student_heads_batch_mixed": "attn_heads_batch_mixed",
    "student_forward_first_block_only": "forward_only_first_block", "student_loss_first_row": "loss_first_row_only",
}

VARIANTS: tuple[Variant, ...] = BUGS + CORRECT


def expected_diagnoses(name: str) -> tuple[str, ...]:
    want = DIAGNOSES.get(name, ())
    return (want,) if isinstance(want, str) else want


def diagnoses(results: dict) -> set[tuple[str, str]]:
    """(item, diagnosis id) of every check of a results.json that named a known mistake."""
    return {(i["id"], c["diagnosis"]["id"]) for i in results["items"] for c in i["checks"] if c.get("diagnosis")}


def diagnosed_exactly(variant: Variant, results: dict) -> bool:
    """The expected diagnoses and no other anywhere; the first (the bug's own) on an item it loses."""
    got = diagnoses(results)
    want = expected_diagnoses(variant.name)
    return {d for _, d in got} == set(want) and \
        (not want or any(item in variant.loses for item, d in got if d == want[0]))


def apply(variant: Variant, reference_dir) -> dict[str, str]:
    """The variant's three files as {filename: text}.

    Raises ValueError when an edit's old text does not occur exactly once (in the reference file
    and in the file as edited so far), or when a file is both replaced and edited.
    """
    reference_dir = Path(reference_dir)
    reference = {f: (reference_dir / f).read_text() for f in FILES}
    files = dict(reference)
    replaced = set()
    for fname, text in variant.replace:
        if fname not in FILES:
            raise ValueError(f"{variant.name}: unknown file {fname!r}")
        files[fname] = text
        replaced.add(fname)
    for edit in variant.edits:
        if edit.file not in FILES:
            raise ValueError(f"{variant.name}: unknown file {edit.file!r}")
        if edit.file in replaced:
            raise ValueError(f"{variant.name}: {edit.file} is both replaced and edited")
        for label, text in (("reference", reference[edit.file]), ("edited", files[edit.file])):
            n = text.count(edit.old)
            if n != 1:
                raise ValueError(f"{variant.name}: old text occurs {n} times in the {label} "
                                 f"{edit.file}: {edit.old[:80]!r}")
        files[edit.file] = files[edit.file].replace(edit.old, edit.new)
    return files
