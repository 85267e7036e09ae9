"""A3 -- GPT-2 style decoder-only transformer.

Mia's solution. Written and tested on Python 3.14 (torch 2.9). Shapes are documented with
jaxtyping annotations; names used in the shape strings:

    B  batch          T  sequence length      D  d_model
    H  heads          Dh d_attention          V  vocab_size
"""

import math
from dataclasses import dataclass

import einops
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


class CausalAttention(nn.Module):
    """Multi-head causal self-attention.

    The softmax(q k^T / sqrt(Dh)) v part is done by torch's fused
    scaled_dot_product_attention with is_causal=True, which applies exactly the
    lower-triangular mask stored in `causal_mask` (kept for the interface).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        L = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(L, L))[None, None], persistent=False)

    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        q: Float[Tensor, "B H T Dh"] = einops.rearrange(self.W_q(x), "b t (h d) -> b h t d", h=self.n_heads)
        k: Float[Tensor, "B H T Dh"] = einops.rearrange(self.W_k(x), "b t (h d) -> b h t d", h=self.n_heads)
        v: Float[Tensor, "B H T Dh"] = einops.rearrange(self.W_v(x), "b t (h d) -> b h t d", h=self.n_heads)
        # default scale is 1/sqrt(Dh), i.e. 1/sqrt(self.d_attention)
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        z = einops.rearrange(z, "b h t d -> b t (h d)")
        return self.W_o(z)


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x: Float[Tensor, ...]) -> Float[Tensor, ...]:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        hidden: Float[Tensor, "B T 4D"] = self.gelu(self.fc1(x))
        return self.fc2(hidden)


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        x = x + self.attention(self.pre_layer_norm(x))
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
            match module:
                case nn.Linear():
                    nn.init.normal_(module.weight, mean=0.0, std=0.02)
                    if module.bias is not None:
                        nn.init.zeros_(module.bias)
                case nn.Embedding():
                    nn.init.normal_(module.weight, mean=0.0, std=0.02)
                case nn.LayerNorm():
                    nn.init.ones_(module.weight)
                    nn.init.zeros_(module.bias)

    def forward(self, x: Int[Tensor, "B T"]) -> Float[Tensor, "B T V"]:
        T = x.shape[1]
        positions: Int[Tensor, "T"] = torch.arange(T, device=x.device)
        h: Float[Tensor, "B T D"] = self.embeddings(x) + self.position_embeddings(positions)
        for block in self.backbone:
            h = block(h)
        return self.lm_head(self.final_layer_norm(h))

    @torch.no_grad()
    def generate(self, x: Int[Tensor, "B T"], num_new_tokens: int) -> Int[Tensor, "B T+N"]:
        ctx = self.config.context_length
        for _ in range(num_new_tokens):
            logits: Float[Tensor, "B T V"] = self.forward(x[:, -ctx:])
            next_ids: Int[Tensor, "B 1"] = einops.rearrange(logits[:, -1].argmax(-1), "b -> b 1")
            x = torch.cat([x, next_ids], dim=-1)
        return x

    def get_loss_on_batch(self, input_ids: Int[Tensor, "B T"]) -> Float[Tensor, ""]:
        logits: Float[Tensor, "B T V"] = self.forward(input_ids)
        predictions = einops.rearrange(logits[:, :-1], "b t v -> (b t) v")
        targets = einops.rearrange(input_ids[:, 1:], "b t -> (b t)")
        return F.cross_entropy(predictions, targets)

    @classmethod
    def from_pretrained(cls) -> Transformer:
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
