# %% [markdown]
# # A2S2 — Building your own mini Transformer
# Work step by step: write step 1 and run test 1, then step 2 and test 2, then step 3 (and the
# self-attention of step 4) and test 3. Shapes are the usual source of bugs: every function below
# says what it takes and returns.

# %%
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# %% [markdown]
# ## Step 1: scaled dot-product attention
# `q` (..., T_q, d_k), `k` (..., T_k, d_k), `v` (..., T_k, d_v), any leading axes (batch, heads).
# Returns softmax(q·kᵀ / sqrt(d_k))·v, of shape (..., T_q, d_v): each query's weights over the
# keys sum to 1. `mask` is step 2's: leave it for now.


# %%
def scaled_dot_product_attention(q, k, v, mask=None):
    # TODO (step 1): softmax(q·kᵀ / sqrt(d_k))·v over the last two axes, whatever axes come first
    # TODO (step 2): where mask is False, the score must get no weight at all
    raise NotImplementedError("step 1")


# %% [markdown]
# ### Test 1 (given)


# %%
def test_1():
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    out = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 5, 3), f"shape {tuple(out.shape)}, expected (2, 5, 3)"
    expected = F.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(out, expected, atol=1e-5), "does not match softmax(q·kᵀ/sqrt(d_k))·v"
    heads = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 2)
    assert torch.allclose(scaled_dot_product_attention(*heads), F.scaled_dot_product_attention(*heads), atol=1e-5), \
        "wrong with a heads axis: (B, n_heads, T, d) inputs"
    print("Test 1 passed")


test_1()

# %% [markdown]
# ## Step 2: causal masking
# `causal_mask(T)`: a (T, T) bool tensor, True where query i may attend to key j, i.e. j <= i.
# Then finish step 1's `mask` argument: scores where the mask is False must get no weight at all.


# %%
def causal_mask(T):
    # TODO (step 2): (T, T) bool, True where query i may attend to key j
    raise NotImplementedError("step 2")


# %% [markdown]
# ### Test 2 (given)


# %%
def test_2():
    mask = causal_mask(4)
    assert mask.shape == (4, 4) and mask.dtype == torch.bool, "causal_mask(4) must be a (4, 4) bool tensor"
    assert mask[3, 0] and not mask[0, 3], "row i is query i: it sees keys 0..i (the lower triangle)"
    torch.manual_seed(2)
    q, k, v = torch.randn(2, 6, 4), torch.randn(2, 6, 4), torch.randn(2, 6, 4)
    out = scaled_dot_product_attention(q, k, v, causal_mask(6))
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5), \
        "masked attention does not match causal attention"
    k2, v2 = k.clone(), v.clone()
    k2[:, 4:], v2[:, 4:] = 0, 0
    assert torch.allclose(scaled_dot_product_attention(q, k2, v2, causal_mask(6))[:, :4], out[:, :4], atol=1e-5), \
        "positions 0..3 changed when only positions 4 and 5 changed: the future leaks in"
    print("Test 2 passed")


test_2()

# %% [markdown]
# ## Step 3: multi-head split and merge
# `split_heads(x, n_heads)`: (B, T, d_model) -> (B, n_heads, T, d_model // n_heads); head h takes
# columns h·d_head .. (h+1)·d_head - 1 of every position. `merge_heads(x)` undoes it:
# (B, n_heads, T, d_head) -> (B, T, n_heads·d_head).


# %%
def split_heads(x, n_heads):
    # TODO (step 3): (B, T, d_model) -> (B, n_heads, T, d_model // n_heads)
    raise NotImplementedError("step 3")


def merge_heads(x):
    # TODO (step 3): (B, n_heads, T, d_head) -> (B, T, n_heads * d_head)
    raise NotImplementedError("step 3")


# %% [markdown]
# ## Step 4: self-attention
# Causal multi-head self-attention: project x to q, k, v, split each into heads, attend with the
# causal mask, merge the heads, project with out_proj. (B, T, d_model) -> (B, T, d_model).
# `__init__` is given: keep its layers and their names.


# %%
class SelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be a multiple of n_heads"
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        # TODO (step 4): use split_heads, causal_mask, scaled_dot_product_attention and merge_heads
        raise NotImplementedError("step 4")


# %% [markdown]
# ### Test 3 (given)


# %%
def test_3():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4), f"split_heads: shape {tuple(heads.shape)}, expected (2, 3, 5, 4)"
    assert torch.equal(heads[1, 2, 4], x[1, 4, 8:12]), "head 2 of position 4 should be columns 8..11"
    assert torch.equal(merge_heads(heads), x), "merge_heads(split_heads(x)) should give x back"
    attn = SelfAttention(12, 3)
    out = attn(x)
    assert out.shape == x.shape, f"SelfAttention: shape {tuple(out.shape)}, expected {tuple(x.shape)}"
    x2 = x.clone()
    x2[:, 3:] = 0
    assert torch.allclose(attn(x2)[:, :3], out[:, :3], atol=1e-5), "SelfAttention must be causal"
    print("Test 3 passed")


test_3()

# %% [markdown]
# ## Step 5: training (the scaffold is given)
# A small decoder-only Transformer built on your SelfAttention. Write `train(model, data, steps,
# lr, batch_size=16)`: `data` is an int64 tensor of token rows (N, T); take `steps` optimizer steps
# (AdamW, learning rate `lr`), each on a batch of `batch_size` rows and the loss `lm_loss(model,
# batch)`, and return the `steps` losses as a list of floats.


# %%
class Block(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class MiniTransformer(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, context_length):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(context_length, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def lm_loss(model, batch):
    """Mean next-token cross entropy: position t predicts token t + 1."""
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


# %%
def train(model, data, steps, lr, batch_size=16):
    # TODO (step 5): `steps` AdamW steps, each on `batch_size` rows of data; return the losses
    raise NotImplementedError("step 5")


# %% [markdown]
# ### The corpus (given): characters of a short text, in rows of 17 (16 inputs, 16 targets)

# %%
corpus = (
    "the cat sat on the mat. the dog sat on the log. the cat saw the dog. "
    "the dog saw the cat. a cat and a dog sat on a mat and a log. "
) * 8
chars = sorted(set(corpus))
ids = torch.tensor([chars.index(c) for c in corpus])
rows = ids.unfold(0, 17, 4)
split = int(0.8 * len(rows))
train_rows, heldout_rows = rows[:split], rows[split:]

# %%
torch.manual_seed(0)
model = MiniTransformer(len(chars), d_model=32, n_heads=2, n_layers=1, context_length=16)
losses = train(model, train_rows, steps=60, lr=3e-3)
with torch.no_grad():
    print(f"training loss {losses[0]:.2f} -> {losses[-1]:.2f}; held-out {lm_loss(model, heldout_rows):.2f}")

# %% [markdown]
# ## Step 6: mini-experiment and report (graded by hand)
# Change one thing (heads, layers, width, learning rate, steps), train both versions the same
# way, and compare their training and held-out losses. Keep the run short (under 20 s).

# %%
# TODO (step 6): your experiment


# %% [markdown]
# ### Mini-report
# TODO (step 6): what you changed and why, the training and held-out losses of both versions, what
# you conclude; then, in a few sentences each:
# 1. What is the causal mask for?
# 2. What do several heads add over one?
# 3. Where was your implementation easiest to get wrong, and what caught it?
