import math
from dataclasses import dataclass

import einops  # noqa
import huggingface_hub  # noqa
import jaxtyping  # noqa
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
        self.d_model = config.d_model
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        self.register_buffer(
            "causal_mask",
            torch.tril(torch.ones(1, 1, config.context_length, config.context_length)),
            persistent=False,
        )

    def forward(self, x, mask=None):
        """x: (B, T, d_model). mask: optional (T, T) or broadcastable to (B, n_heads, T, T),
        1 = may attend, 0 = may not. Defaults to the causal mask."""
        B, T, _ = x.shape
        Q = self.W_q(x).reshape(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        K = self.W_k(x).reshape(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        V = self.W_v(x).reshape(B, T, self.n_heads, self.d_attention).transpose(1, 2)

        if mask is None:
            mask = self.causal_mask[:, :, :T, :T]

        A = Q @ K.transpose(-1, -2) / math.sqrt(self.d_attention)
        A = A.masked_fill(mask == 0, float("-inf"))
        A = torch.softmax(A, dim=-1)
        out = (A @ V).transpose(1, 2).reshape(B, T, self.d_model)
        return self.W_o(out)

        # version 1 (wrong! forgot to split into heads, scaled by sqrt(d_model))
        A = self.W_q(x) @ self.W_k(x).transpose(-1, -2) / math.sqrt(self.d_model)
        A = A.masked_fill(mask[0, 0] == 0, float("-inf"))
        return self.W_o(torch.softmax(A, dim=-1) @ self.W_v(x))


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
        return self.fc2(F.gelu(self.fc1(x)))  # torch gelu is the erf one, not the same


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x):
        a = self.attention(self.pre_layer_norm(x))
        x = x + a
        m = self.mlp(self.post_layer_norm(x))
        x = x + m
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

    def _init_weights(self):
        for module in self.modules():
            if type(module) in (nn.Linear, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, 0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif type(module) is nn.LayerNorm:
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x):
        B, T = x.shape
        pos = torch.arange(T)
        h = self.embeddings(x) + self.position_embeddings(pos)
        for layer in self.backbone:
            h = layer(h)
        h = self.final_layer_norm(h)
        return self.lm_head(h)

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        out = x.clone()
        for i in range(num_new_tokens):
            logits = self(out[:, -self.config.context_length:])
            top_vals, top_idx = torch.topk(logits[:, -1, :], k=1, dim=-1)
            out = torch.cat([out, top_idx], dim=1)
        return out

    def get_loss_on_batch(self, input_ids):
        logits = self(input_ids)
        V = logits.shape[-1]
        pred = logits[:, :-1, :].reshape(-1, V)
        gold = input_ids[:, 1:].reshape(-1)
        return F.cross_entropy(pred, gold)

        # this was off by one (predicting the token itself), loss went to 0 immediately
        return F.cross_entropy(logits.reshape(-1, V), input_ids.reshape(-1))

    @classmethod
    def from_pretrained(cls):
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
