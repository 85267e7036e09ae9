"""Staff solution for A3: a GPT-2 style decoder-only transformer."""

import math
from dataclasses import dataclass

import einops  # noqa: F401  (part of the fixed interface's imports)
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
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        mask = torch.tril(torch.ones(config.context_length, config.context_length))
        self.register_buffer("causal_mask", mask.view(1, 1, config.context_length, config.context_length),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:  # (B, T, d_model) -> (B, n_heads, T, d_attention)
            return t.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)

        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_attention)
        scores = scores.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, T, -1))


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
        return self.fc2(self.gelu(self.fc1(x)))


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.pre_layer_norm(x))
        return x + self.mlp(self.post_layer_norm(x))


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device)
        h = self.embeddings(x) + self.position_embeddings(positions)
        for block in self.backbone:
            h = block(h)
        return self.lm_head(self.final_layer_norm(h))

    @torch.no_grad()
    def generate(self, x: torch.Tensor, num_new_tokens: int) -> torch.Tensor:
        for _ in range(num_new_tokens):
            # Past context_length only the last context_length tokens fit the position embeddings.
            logits = self(x[:, -self.config.context_length:])
            next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            x = torch.cat([x, next_token], dim=1)
        return x

    def get_loss_on_batch(self, input_ids: torch.Tensor) -> torch.Tensor:
        logits = self(input_ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
