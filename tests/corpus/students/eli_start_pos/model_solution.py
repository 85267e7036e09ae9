"""
Assignment 3 -- decoder-only transformer (GPT-2 small layout).

Eli's version. Attention uses torch's fused scaled_dot_product_attention with the causal_mask buffer
as the attention mask. For generation I copied the idea from Meta's LLaMA code: forward() takes an
optional `start_pos`, and every attention layer keeps the keys/values it has already computed, so
each new token only needs one position of work.
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
        self.register_buffer(
            "causal_mask",
            torch.tril(torch.ones(config.context_length, config.context_length))[None, None, :, :],
            persistent=False,
        )
        # kv cache, only filled in when forward gets a start_pos (see Transformer.generate)
        self.cache_k = None
        self.cache_v = None

    def forward(self, x: torch.Tensor, start_pos: Optional[int] = None) -> torch.Tensor:
        bsz, seqlen, d_model = x.shape
        xq = self.W_q(x).view(bsz, seqlen, self.n_heads, self.d_attention).transpose(1, 2)
        xk = self.W_k(x).view(bsz, seqlen, self.n_heads, self.d_attention).transpose(1, 2)
        xv = self.W_v(x).view(bsz, seqlen, self.n_heads, self.d_attention).transpose(1, 2)

        if start_pos is None:
            keys, values = xk, xv
            mask = self.causal_mask[:, :, :seqlen, :seqlen]
        else:
            if start_pos == 0:
                keys, values = xk, xv
            else:
                keys = torch.cat([self.cache_k[:, :, :start_pos], xk], dim=2)
                values = torch.cat([self.cache_v[:, :, :start_pos], xv], dim=2)
            self.cache_k, self.cache_v = keys, values
            mask = self.causal_mask[:, :, start_pos:start_pos + seqlen, :start_pos + seqlen]

        # boolean mask: True = allowed to attend. sdpa scales by 1/sqrt(d_attention) itself.
        out = F.scaled_dot_product_attention(xq, keys, values, attn_mask=mask.bool())
        out = out.transpose(1, 2).contiguous().view(bsz, seqlen, d_model)
        return self.W_o(out)


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

    def forward(self, x: torch.Tensor, start_pos: Optional[int] = None) -> torch.Tensor:
        h = x + self.attention(self.pre_layer_norm(x), start_pos)
        out = h + self.mlp(self.post_layer_norm(h))
        return out


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
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name:  # layer norm weights
                nn.init.ones_(p)
            else:  # Linear + Embedding weights
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, tokens: torch.Tensor, start_pos: Optional[int] = None) -> torch.Tensor:
        """tokens: (B, T). With start_pos the tokens are taken to sit at positions
        start_pos .. start_pos+T-1 and the attention layers' caches are used/updated."""
        _bsz, seqlen = tokens.shape
        offset = 0 if start_pos is None else start_pos
        pos = torch.arange(offset, offset + seqlen, device=tokens.device)
        h = self.embeddings(tokens) + self.position_embeddings(pos)
        for layer in self.backbone:
            h = layer(h, start_pos)
        h = self.final_layer_norm(h)
        return self.lm_head(h)

    @torch.no_grad()
    def generate(self, x: torch.Tensor, num_new_tokens: int) -> torch.Tensor:
        max_len = self.config.context_length
        out = x
        prev_pos = 0
        cur = x[:, -max_len:]
        for _ in range(num_new_tokens):
            if prev_pos + cur.shape[1] > max_len:
                # ran out of positions: rebuild the cache from the last max_len tokens
                prev_pos = 0
                cur = out[:, -max_len:]
            logits = self(cur, start_pos=prev_pos)
            prev_pos += cur.shape[1]
            next_tok = torch.topk(logits[:, -1, :], k=1, dim=-1).indices  # (B, 1)
            out = torch.cat([out, next_tok], dim=-1)
            cur = next_tok
        return out

    def get_loss_on_batch(self, input_ids: torch.Tensor) -> torch.Tensor:
        logits = self(input_ids[:, :-1])
        vocab = logits.size(-1)
        return F.cross_entropy(logits.reshape(-1, vocab), input_ids[:, 1:].reshape(-1))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
