"""
A3 transformer, Yara.

Generation uses a KV cache the way LLaMA's reference code does it: every attention layer owns
two preallocated tensors (batch, n_heads, context_length, d_attention) for its keys and values,
and forward(x, start_pos) writes the new keys/values at positions start_pos .. start_pos+T-1 and
attends over everything up to there. The cache tensors are plain attributes (not buffers), so
they never end up in the state dict. Without use_cache nothing changes.
"""

import math
from dataclasses import dataclass
from typing import Optional

import einops  # noqa: F401
import huggingface_hub  # noqa: F401
import jaxtyping  # noqa: F401
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


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.context_length = config.context_length
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        n = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(n, n)).view(1, 1, n, n), persistent=False)
        # kv cache, allocated by allocate_cache() before generating
        self.cache_k: Optional[torch.Tensor] = None
        self.cache_v: Optional[torch.Tensor] = None

    def allocate_cache(self, batch_size: int, dtype: torch.dtype, device: torch.device) -> None:
        shape = (batch_size, self.n_heads, self.context_length, self.d_attention)
        self.cache_k = torch.zeros(shape, dtype=dtype, device=device)
        self.cache_v = torch.zeros(shape, dtype=dtype, device=device)

    def free_cache(self) -> None:
        self.cache_k = None
        self.cache_v = None

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)

    def forward(self, x: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        B, T, C = x.shape
        q = self._heads(self.W_q(x))
        k = self._heads(self.W_k(x))
        v = self._heads(self.W_v(x))

        if use_cache:
            if self.cache_k is None or self.cache_k.shape[0] != B:
                raise RuntimeError("call allocate_cache() first")
            end = start_pos + T
            self.cache_k[:, :, start_pos:end] = k
            self.cache_v[:, :, start_pos:end] = v
            k = self.cache_k[:, :, :end]
            v = self.cache_v[:, :, :end]
        else:
            start_pos = 0

        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_attention)  # (B, h, T, start_pos+T)
        keep = self.causal_mask[:, :, start_pos:start_pos + T, :start_pos + T] == 1
        scores = torch.where(keep, scores, float("-inf"))
        attn = F.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(B, T, C)
        return self.W_o(out)


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

    def forward(self, x: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        x = x + self.attention(self.pre_layer_norm(x), start_pos=start_pos, use_cache=use_cache)
        x = x + self.mlp(self.post_layer_norm(x))
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

    def forward(self, x: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        T = x.shape[1]
        if not use_cache:
            start_pos = 0
        assert start_pos + T <= self.config.context_length, "past the context length"
        positions = torch.arange(start_pos, start_pos + T, device=x.device)
        h = self.embeddings(x) + self.position_embeddings(positions)
        for block in self.backbone:
            h = block(h, start_pos=start_pos, use_cache=use_cache)
        return self.lm_head(self.final_layer_norm(h))

    @torch.no_grad()
    def generate(self, x: torch.Tensor, num_new_tokens: int) -> torch.Tensor:
        ctx = self.config.context_length
        out = x
        if num_new_tokens <= 0:
            return out
        for block in self.backbone:
            block.attention.allocate_cache(x.shape[0], self.lm_head.weight.dtype, self.lm_head.weight.device)
        try:
            # prefill with the prompt (its last ctx tokens), then one token at a time
            prompt = x[:, -ctx:]
            logits = self(prompt, start_pos=0, use_cache=True)
            pos = prompt.shape[1]
            for i in range(num_new_tokens):
                next_tok = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                out = torch.cat([out, next_tok], dim=1)
                if i == num_new_tokens - 1:
                    break
                if pos < ctx:
                    logits = self(next_tok, start_pos=pos, use_cache=True)
                    pos += 1
                else:
                    # cache is full: the positions shift, so just recompute the last ctx tokens
                    logits = self(out[:, -ctx:])
        finally:
            for block in self.backbone:
                block.attention.free_cache()
        return out

    def get_loss_on_batch(self, input_ids: torch.Tensor) -> torch.Tensor:
        logits = self(input_ids[:, :-1])
        targets = input_ids[:, 1:]
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
