"""A3: GPT-2 style transformer (Abe).

Shapes are written with jaxtyping: B batch, T sequence, D d_model, H heads, d head size, V vocab.
The attention takes an optional mask (1 = may attend); with mask=None it uses its causal mask.
Dropout (config.dropout) on the attention weights and on both residual branches; it is only
active in model.train().
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
    dropout: float = 0.1


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        self.attn_drop = nn.Dropout(config.dropout)
        ctx = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx), persistent=False)

    def forward(
        self,
        x: Float[Tensor, "B T D"],
        mask: Optional[Float[Tensor, "... T T"]] = None,
    ) -> Float[Tensor, "B T D"]:
        B, T, D = x.shape
        q: Float[Tensor, "B H T d"] = self.W_q(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        k: Float[Tensor, "B H T d"] = self.W_k(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        v: Float[Tensor, "B H T d"] = self.W_v(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)

        if mask is None:
            mask = self.causal_mask[:, :, :T, :T]

        scores: Float[Tensor, "B H T T"] = q @ k.transpose(-1, -2) / math.sqrt(self.d_attention)
        scores = torch.where(mask.bool(), scores, torch.full_like(scores, float("-inf")))
        probs = self.attn_drop(torch.softmax(scores, dim=-1))
        out: Float[Tensor, "B T D"] = (probs @ v).transpose(1, 2).reshape(B, T, D)
        return self.W_o(out)


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x: Float[Tensor, "..."]) -> Float[Tensor, "..."]:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        hidden: Float[Tensor, "B T 4*D"] = self.gelu(self.fc1(x))
        return self.fc2(hidden)


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)
        self.resid_drop = nn.Dropout(config.dropout)

    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        h = self.pre_layer_norm(x)
        x = x + self.resid_drop(self.attention(h, mask=None))  # None -> causal mask
        h = self.post_layer_norm(x)
        x = x + self.resid_drop(self.mlp(h))
        return x


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
        self.embedding_drop = nn.Dropout(config.dropout)
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

    def forward(self, x: Int[Tensor, "B T"]) -> Float[Tensor, "B T V"]:
        T = x.shape[-1]
        positions: Int[Tensor, "T"] = torch.arange(T, device=x.device)
        h: Float[Tensor, "B T D"] = self.embedding_drop(self.embeddings(x) + self.position_embeddings(positions))
        for block in self.backbone:
            h = block(h)
        return self.lm_head(self.final_layer_norm(h))

    @torch.no_grad()
    def generate(self, x: Int[Tensor, "B T"], num_new_tokens: int) -> Int[Tensor, "B T_new"]:
        ctx = self.config.context_length
        for _ in range(num_new_tokens):
            logits: Float[Tensor, "B t V"] = self(x[:, -ctx:])
            next_tokens: Int[Tensor, "B 1"] = logits[:, -1].argmax(-1).unsqueeze(-1)
            x = torch.cat([x, next_tokens], dim=-1)
        return x

    def get_loss_on_batch(self, input_ids: Int[Tensor, "B T"]) -> Float[Tensor, ""]:
        logits: Float[Tensor, "B T-1 V"] = self(input_ids[:, :-1])
        targets: Int[Tensor, "B T-1"] = input_ids[:, 1:]
        return F.cross_entropy(logits.reshape(-1, self.config.vocab_size), targets.reshape(-1))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
