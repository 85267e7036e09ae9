"""Hana -- A3 transformer

Changes on top of the handout:
- dropout (embeddings, attention weights, residual branches), p = config.dropout, only in train mode
- GPT-2 paper init: residual projections (W_o, fc2) get std 0.02 / sqrt(2 * n_layers)
- kv cache for generate(): pass a list with one slot per layer as `kv_cache`, forward fills it
"""

import math
from dataclasses import dataclass

import einops
import huggingface_hub
import jaxtyping
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GPT2LMHeadModel

from utils import state_dict_converter


@dataclass
class ModelConfig:
    d_model: int
    n_heads: int
    n_layers: int
    context_length: int
    vocab_size: int
    dropout: float = 0.1


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.scale = self.d_attention ** -0.5
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        cl = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(cl, cl)).view(1, 1, cl, cl), persistent=False)

    def forward(self, x, kv_cache=None):
        """kv_cache: None, or a list [k, v] (possibly [None, None]) that is read and then overwritten."""
        B, T, C = x.shape
        H, D = self.n_heads, self.d_attention
        q = self.W_q(x).view(B, T, H, D).permute(0, 2, 1, 3)
        k = self.W_k(x).view(B, T, H, D).permute(0, 2, 1, 3)
        v = self.W_v(x).view(B, T, H, D).permute(0, 2, 1, 3)

        n_past = 0
        if kv_cache is not None:
            if kv_cache[0] is not None:
                n_past = kv_cache[0].size(2)
                k = torch.cat([kv_cache[0], k], dim=2)
                v = torch.cat([kv_cache[1], v], dim=2)
            kv_cache[0], kv_cache[1] = k, v

        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(self.causal_mask[:, :, n_past:n_past + T, :n_past + T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.permute(0, 2, 1, 3).reshape(B, T, C)
        return self.resid_dropout(self.W_o(y))


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
        self.mlp_dropout = nn.Dropout(config.dropout)

    def forward(self, x, kv_cache=None):
        x = x + self.attention(self.pre_layer_norm(x), kv_cache=kv_cache)
        x = x + self.mlp_dropout(self.mlp(self.post_layer_norm(x)))
        return x


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
        self.emb_dropout = nn.Dropout(config.dropout)
        self.backbone = nn.ModuleList([DecoderBlock(config) for _ in range(config.n_layers)])
        self.final_layer_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self):
        # GPT-2: "scale the weights of residual layers at initialization by 1/sqrt(N)" (N = 2 per block)
        resid_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                if name.endswith("W_o") or name.endswith("fc2"):
                    nn.init.normal_(module.weight, mean=0.0, std=resid_std)
                else:
                    nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x, kv_cache=None):
        """x: (B, T) ids. kv_cache: optional list from init_cache(); when given, x are the tokens
        that come after the cached ones and the cache is extended in place."""
        B, T = x.shape
        start = 0
        if kv_cache is not None and kv_cache[0][0] is not None:
            start = kv_cache[0][0].size(2)
        pos = torch.arange(start, start + T)
        h = self.emb_dropout(self.embeddings(x) + self.position_embeddings(pos))
        for i, block in enumerate(self.backbone):
            h = block(h, kv_cache=None if kv_cache is None else kv_cache[i])
        return self.lm_head(self.final_layer_norm(h))

    def init_cache(self):
        return [[None, None] for _ in range(self.config.n_layers)]

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        ctx = self.config.context_length
        cache = self.init_cache()
        seen = 0  # how many tokens the cache holds
        feed = x[:, -ctx:]
        result = x
        for _ in range(num_new_tokens):
            if seen + feed.size(1) > ctx:
                cache = self.init_cache()
                seen = 0
                feed = result[:, -ctx:]
            logits = self(feed, kv_cache=cache)
            seen += feed.size(1)
            new = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            result = torch.cat([result, new], dim=1)
            feed = new
        return result

    def get_loss_on_batch(self, input_ids):
        logits = self(input_ids[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), input_ids[:, 1:].flatten())

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
