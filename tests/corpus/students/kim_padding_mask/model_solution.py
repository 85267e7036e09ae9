"""
A3 model -- Kim

I use torch's scaled_dot_product_attention (is_causal=True) for the attention itself.
Every layer also takes an optional padding mask (1 = real token, 0 = padding), so batches of
prompts of different lengths could be run later; with no mask it is the plain causal model.
"""

import math
from dataclasses import dataclass
from typing import Optional

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


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        size = config.context_length
        causal = torch.tril(torch.ones(size, size))
        self.register_buffer("causal_mask", causal.view(1, 1, size, size), persistent=False)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x: (B, T, d_model); mask: optional (B, T) padding mask, 1 for tokens that may be attended to."""
        B, T, d_model = x.shape
        q = self.W_q(x).reshape(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        k = self.W_k(x).reshape(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        v = self.W_v(x).reshape(B, T, self.n_heads, self.d_attention).transpose(1, 2)

        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            # combine the causal mask with the padding mask of the keys -> (B, 1, T, T)
            allowed = self.causal_mask[:, :, :T, :T].bool() & mask[:, None, None, :].bool()
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)

        y = y.transpose(1, 2).reshape(B, T, d_model)
        return self.W_o(y)


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

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = x + self.attention(self.pre_layer_norm(x), mask=mask)
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

    def forward(self, x: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x: (B, T) token ids, attention_mask: optional (B, T) padding mask. Returns (B, T, vocab) logits."""
        T = x.size(1)
        assert T <= self.config.context_length, f"sequence of {T} tokens > context_length"
        positions = torch.arange(T, device=x.device).unsqueeze(0)  # (1, T)
        h = self.embeddings(x) + self.position_embeddings(positions)
        for block in self.backbone:
            h = block(h, mask=attention_mask)
        h = self.final_layer_norm(h)
        return self.lm_head(h)

    @torch.no_grad()
    def generate(self, x: torch.Tensor, num_new_tokens: int) -> torch.Tensor:
        out = x.clone()
        for _ in range(num_new_tokens):
            logits = self(out[:, -self.config.context_length:])
            next_token = logits[:, -1].argmax(dim=-1)
            out = torch.cat([out, next_token[:, None]], dim=1)
        return out

    def get_loss_on_batch(self, input_ids: torch.Tensor) -> torch.Tensor:
        logits = self(input_ids[:, :-1])
        flat_logits = logits.reshape(-1, logits.shape[-1])  # (B*(T-1), V)
        flat_targets = input_ids[:, 1:].reshape(-1)         # (B*(T-1),)
        return F.cross_entropy(flat_logits, flat_targets)

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
