"""A3 — GPT-2 style transformer.

I added a key/value cache (like Hugging Face's past_key_values) so that generate() does not
recompute the whole prefix for every new token. Everything is still exact without the cache.
"""

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import einops  # noqa: F401
import huggingface_hub  # noqa: F401
import jaxtyping  # noqa: F401
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GPT2LMHeadModel

from utils import state_dict_converter

KV = Tuple[torch.Tensor, torch.Tensor]


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

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)

    def forward(self, x: torch.Tensor, layer_past: Optional[KV] = None, use_cache: bool = False):
        B, T, C = x.shape
        q = self._split_heads(self.W_q(x))
        k = self._split_heads(self.W_k(x))
        v = self._split_heads(self.W_v(x))

        past_len = 0
        if layer_past is not None:
            past_k, past_v = layer_past
            past_len = past_k.shape[-2]
            k = torch.cat([past_k, k], dim=-2)
            v = torch.cat([past_v, v], dim=-2)
        present = (k, v) if use_cache else None

        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_attention)
        # the queries sit at positions past_len .. past_len+T-1, the keys at 0 .. past_len+T-1
        mask = self.causal_mask[:, :, past_len:past_len + T, :past_len + T]
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.W_o(y)
        if use_cache:
            return y, present
        return y


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc1(x)
        x = self.gelu(x)
        x = self.fc2(x)
        return x


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x: torch.Tensor, layer_past: Optional[KV] = None, use_cache: bool = False):
        attn_out = self.attention(self.pre_layer_norm(x), layer_past=layer_past, use_cache=use_cache)
        if use_cache:
            attn_out, present = attn_out
        x = x + attn_out
        x = x + self.mlp(self.post_layer_norm(x))
        if use_cache:
            return x, present
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

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor, use_cache: bool = False,
                past_key_values: Optional[Tuple[KV, ...]] = None):
        B, T = x.shape
        past_len = 0 if past_key_values is None else past_key_values[0][0].shape[-2]
        assert past_len + T <= self.config.context_length, "sequence longer than context_length"
        pos = torch.arange(past_len, past_len + T, dtype=torch.long, device=x.device)
        h = self.embeddings(x) + self.position_embeddings(pos)[None, :, :]

        presents = []
        for i, block in enumerate(self.backbone):
            layer_past = None if past_key_values is None else past_key_values[i]
            h = block(h, layer_past=layer_past, use_cache=use_cache)
            if use_cache:
                h, present = h
                presents.append(present)
        h = self.final_layer_norm(h)
        logits = self.lm_head(h)
        if use_cache:
            return logits, tuple(presents)
        return logits

    @torch.no_grad()
    def generate(self, x: torch.Tensor, num_new_tokens: int) -> torch.Tensor:
        ctx = self.config.context_length
        out = x
        past = None
        next_input = x[:, -ctx:]
        for _ in range(num_new_tokens):
            if past is not None and past[0][0].shape[-2] >= ctx:
                # the cache is full: start again from the last ctx tokens (no cache)
                past = None
                next_input = out[:, -ctx:]
            logits, past = self(next_input, use_cache=True, past_key_values=past)
            next_token = torch.argmax(logits[:, -1, :], dim=-1, keepdim=True)
            out = torch.cat((out, next_token), dim=1)
            next_input = next_token
        return out

    def get_loss_on_batch(self, input_ids: torch.Tensor) -> torch.Tensor:
        logits = self(input_ids[:, :-1])
        targets = input_ids[:, 1:]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return loss

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
