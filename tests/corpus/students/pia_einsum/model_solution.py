"""
Assignment 3: Self-Attention and Transformers
Pia -- everything with einops, because I can never remember which dim transpose(1, 2) swaps.
"""

import math
from dataclasses import dataclass

import einops
import huggingface_hub  # noqa: F401
import jaxtyping  # noqa: F401
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import einsum, rearrange
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
        tri = torch.ones(config.context_length, config.context_length).tril()
        self.register_buffer("causal_mask", einops.rearrange(tri, "i j -> 1 1 i j"), persistent=False)

    def forward(self, x):
        seq_len = x.shape[1]
        queries = rearrange(self.W_q(x), "batch seq (head dim) -> batch head seq dim", head=self.n_heads)
        keys = rearrange(self.W_k(x), "batch seq (head dim) -> batch head seq dim", head=self.n_heads)
        values = rearrange(self.W_v(x), "batch seq (head dim) -> batch head seq dim", head=self.n_heads)

        # (query position i, key position j) for every batch element and head
        scores = einsum(queries, keys, "batch head i dim, batch head j dim -> batch head i j")
        scores = scores / math.sqrt(self.d_attention)

        allowed = self.causal_mask[:, :, :seq_len, :seq_len].bool()
        scores = torch.where(allowed, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
        pattern = scores.softmax(dim=-1)

        mixed = einsum(pattern, values, "batch head i j, batch head j dim -> batch head i dim")
        mixed = rearrange(mixed, "batch head seq dim -> batch seq (head dim)")
        return self.W_o(mixed)


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

    def forward(self, residual):
        residual = residual + self.attention(self.pre_layer_norm(residual))
        residual = residual + self.mlp(self.post_layer_norm(residual))
        return residual


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
        self.apply(self._init_module)

    @staticmethod
    def _init_module(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()

    def forward(self, x):
        seq_len = x.shape[-1]
        token_embeds = self.embeddings(x)  # batch seq d_model
        pos_embeds = self.position_embeddings(torch.arange(seq_len, device=x.device))  # seq d_model
        residual = token_embeds + rearrange(pos_embeds, "seq d -> 1 seq d")
        for block in self.backbone:
            residual = block(residual)
        return self.lm_head(self.final_layer_norm(residual))

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        tokens = x
        for _ in range(num_new_tokens):
            logits = self(tokens[:, -self.config.context_length:])
            next_token = logits[:, -1].argmax(dim=-1)
            tokens = torch.cat([tokens, rearrange(next_token, "batch -> batch 1")], dim=1)
        return tokens

    def get_loss_on_batch(self, input_ids):
        logits = self(input_ids)[:, :-1]  # predictions for positions 1..T-1
        log_probs = logits.log_softmax(dim=-1)
        targets = input_ids[:, 1:]
        # log prob of the correct next token at every position
        correct = log_probs.gather(dim=-1, index=rearrange(targets, "batch seq -> batch seq 1"))
        return -correct.mean()

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
