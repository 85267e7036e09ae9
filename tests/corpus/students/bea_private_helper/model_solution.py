"""CS A3 -- transformer (Bea)

Notes to self:
  * heads are split with einops.rearrange
  * a kv cache is kept per layer as a (k, v) pair: (B, heads, T_so_far, d_attention)
  * generate() goes through self._decode_step(), which reuses the cache
"""

import math
from dataclasses import dataclass

import einops
import huggingface_hub  # noqa: F401
import jaxtyping  # noqa: F401
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange
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
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        mask = torch.tril(torch.ones(config.context_length, config.context_length))
        self.register_buffer("causal_mask", mask.view(1, 1, config.context_length, config.context_length),
                             persistent=False)

    def forward(self, x, kv_cache=None, use_cache=False):
        T = x.shape[1]
        q = rearrange(self.W_q(x), "b t (h d) -> b h t d", h=self.n_heads)
        k = rearrange(self.W_k(x), "b t (h d) -> b h t d", h=self.n_heads)
        v = rearrange(self.W_v(x), "b t (h d) -> b h t d", h=self.n_heads)
        start = 0
        if kv_cache is not None:
            start = kv_cache[0].shape[2]
            k = torch.cat((kv_cache[0], k), dim=2)
            v = torch.cat((kv_cache[1], v), dim=2)

        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d_attention)
        allowed = self.causal_mask[:, :, start:start + T, :start + T]
        scores = scores.masked_fill(allowed == 0, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        out = rearrange(weights @ v, "b h t d -> b t (h d)")
        out = self.W_o(out)
        if use_cache:
            return out, (k, v)
        return out


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x):
        return self.fc2(self.gelu(self.fc1(x)))


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x, kv_cache=None, use_cache=False):
        if use_cache:
            a, new_cache = self.attention(self.pre_layer_norm(x), kv_cache=kv_cache, use_cache=True)
        else:
            a, new_cache = self.attention(self.pre_layer_norm(x)), None
        x = x + a
        x = x + self.mlp(self.post_layer_norm(x))
        return (x, new_cache) if use_cache else x


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

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x, past=None, use_cache=False):
        if past is None and not use_cache:
            positions = torch.arange(x.shape[1], device=x.device)
            h = self.embeddings(x) + self.position_embeddings(positions)
            for block in self.backbone:
                h = block(h)
            return self.lm_head(self.final_layer_norm(h))
        start = 0 if past is None else past[0][0].shape[2]
        return self._decode_step(x, past, start)

    def _decode_step(self, tokens, cache, start):
        """Run `tokens` (which sit at positions start, start+1, ...) against the cache.

        Returns (logits, new_cache)."""
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        h = self.embeddings(tokens) + self.position_embeddings(positions)
        new_cache = []
        for i, block in enumerate(self.backbone):
            h, layer_cache = block(h, kv_cache=None if cache is None else cache[i], use_cache=True)
            new_cache.append(layer_cache)
        logits = self.lm_head(self.final_layer_norm(h))
        return logits, new_cache

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        L = self.config.context_length
        seq = x.clone()
        cache, start, feed = None, 0, x[:, -L:]
        for _ in range(num_new_tokens):
            if start + feed.shape[1] > L:
                # out of positions: restart the cache on the last L tokens
                cache, start, feed = None, 0, seq[:, -L:]
            logits, cache = self._decode_step(feed, cache, start)
            start += feed.shape[1]
            nxt = logits[:, -1].argmax(-1).unsqueeze(-1)
            seq = torch.cat([seq, nxt], dim=-1)
            feed = nxt
        return seq

    def get_loss_on_batch(self, input_ids):
        inputs, targets = input_ids[:, :-1], input_ids[:, 1:]
        logits = self(inputs)                       # (B, T-1, V)
        return F.cross_entropy(logits.transpose(1, 2), targets)   # wants (B, V, T-1)

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
