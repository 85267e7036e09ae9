"""
Assignment 3 -- decoder-only transformer (GPT-2 style).

Author: Tom

I followed the GPT-2 paper for the initialisation: the projections that write back into the
residual stream (attention W_o and the second MLP layer fc2) are scaled by 1/sqrt(2 * n_layers)
so the residual stream does not grow with depth. Everything else is N(0, 0.02).
"""

import math
from dataclasses import dataclass

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
    init_std: float = 0.02  # std of the normal init (GPT-2 uses 0.02)


class CausalAttention(nn.Module):
    """Multi-head masked self-attention."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        assert config.d_model % config.n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads = config.n_heads
        self.d_model = config.d_model
        self.d_attention = config.d_model // config.n_heads

        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        self.W_o.residual_proj = True  # marker for the scaled init in Transformer._init_weights

        n = config.context_length
        self.register_buffer(
            "causal_mask",
            torch.tril(torch.ones(n, n)).reshape(1, 1, n, n),
            persistent=False,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq_len, d_model) -> (batch, seq_len, d_model)"""
        batch, seq_len, _ = x.size()

        # (batch, seq_len, d_model) -> (batch, n_heads, seq_len, d_attention)
        queries = self.W_q(x).reshape(batch, seq_len, self.n_heads, self.d_attention).permute(0, 2, 1, 3)
        keys = self.W_k(x).reshape(batch, seq_len, self.n_heads, self.d_attention).permute(0, 2, 1, 3)
        values = self.W_v(x).reshape(batch, seq_len, self.n_heads, self.d_attention).permute(0, 2, 1, 3)

        # attention scores: (batch, n_heads, seq_len, seq_len)
        attn_scores = torch.matmul(queries, keys.permute(0, 1, 3, 2)) * (1.0 / math.sqrt(self.d_attention))
        mask = self.causal_mask[:, :, :seq_len, :seq_len]
        attn_scores = attn_scores.masked_fill(mask == 0, float("-inf"))
        attn_weights = F.softmax(attn_scores, dim=-1)

        context = torch.matmul(attn_weights, values)  # (batch, n_heads, seq_len, d_attention)
        context = context.permute(0, 2, 1, 3).contiguous().reshape(batch, seq_len, self.d_model)
        return self.W_o(context)


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    """Position-wise feed forward network, d_model -> 4 d_model -> d_model."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.fc2.residual_proj = True
        self.gelu = GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.gelu(self.fc1(x)))


class DecoderBlock(nn.Module):
    """One pre-norm transformer block."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = residual + self.attention(self.pre_layer_norm(residual))
        residual = x
        x = residual + self.mlp(self.post_layer_norm(residual))
        return x


class Transformer(nn.Module):
    """The full language model: embeddings -> blocks -> final norm -> lm head."""

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
        """GPT-2 init: N(0, std) everywhere, residual projections scaled down by sqrt(2 * n_layers)."""
        std = self.config.init_std
        residual_std = std / math.sqrt(2 * self.config.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                if getattr(module, "residual_proj", False):
                    torch.nn.init.normal_(module.weight, mean=0.0, std=residual_std)
                else:
                    torch.nn.init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            elif isinstance(module, nn.LayerNorm):
                torch.nn.init.ones_(module.weight)
                torch.nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq_len) token ids -> logits (batch, seq_len, vocab_size)"""
        seq_len = x.size(1)
        assert seq_len <= self.config.context_length, f"sequence of {seq_len} tokens is too long"
        positions = torch.arange(0, seq_len, dtype=torch.long, device=x.device).unsqueeze(0)

        hidden = self.embeddings(x) + self.position_embeddings(positions)
        for block in self.backbone:
            hidden = block(hidden)
        hidden = self.final_layer_norm(hidden)
        return self.lm_head(hidden)

    @torch.no_grad()
    def generate(self, x: torch.Tensor, num_new_tokens: int) -> torch.Tensor:
        """Greedy decoding: append the most likely next token num_new_tokens times."""
        tokens = x
        for _ in range(num_new_tokens):
            window = tokens[:, -self.config.context_length:]
            logits = self(window)
            next_token = torch.argmax(logits[:, -1, :], dim=-1)  # (batch,)
            tokens = torch.cat([tokens, next_token.unsqueeze(1)], dim=1)
        return tokens

    def get_loss_on_batch(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross entropy over the batch."""
        logits = self(input_ids[:, :-1])          # predictions for positions 1..T-1
        targets = input_ids[:, 1:]
        vocab = logits.size(-1)
        return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
