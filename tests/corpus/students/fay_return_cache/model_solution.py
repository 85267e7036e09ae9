"""A3: GPT-2 style transformer.

Author: Fay
"""

import math
from dataclasses import dataclass

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
    """Multi-head causal self-attention.

    Besides the normal call, the layer can take the keys/values of earlier tokens
    (`past_kv`) and give back its own (`return_cache=True`), which generation uses.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        ones = torch.ones(config.context_length, config.context_length)
        self.register_buffer("causal_mask", torch.tril(ones).unsqueeze(0).unsqueeze(0), persistent=False)

    def _to_heads(self, t):
        # (B, T, H*D) -> (B, H, T, D)
        B, T, _ = t.shape
        return t.reshape(B, T, self.n_heads, self.d_attention).permute(0, 2, 1, 3)

    def _from_heads(self, t):
        # (B, H, T, D) -> (B, T, H*D)
        B, H, T, D = t.shape
        return t.permute(0, 2, 1, 3).reshape(B, T, H * D)

    def forward(self, x, past_kv=None, return_cache=False):
        """
        Args:
            x: (B, T, d_model) hidden states of the new tokens.
            past_kv: optional (k, v), each (B, H, T_past, D), for the tokens before x.
            return_cache: if True return (output, (k, v)) with k, v covering past + new tokens.
        Returns:
            (B, T, d_model), or the tuple above.
        """
        T = x.shape[1]
        q = self._to_heads(self.W_q(x))
        k = self._to_heads(self.W_k(x))
        v = self._to_heads(self.W_v(x))
        T_past = 0
        if past_kv is not None:
            T_past = past_kv[0].shape[2]
            k = torch.cat((past_kv[0], k), dim=2)
            v = torch.cat((past_kv[1], v), dim=2)

        att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d_attention))
        mask = self.causal_mask[:, :, T_past:T_past + T, :T_past + T]
        # smallest float instead of -inf (what HF does)
        att = att.masked_fill(mask == 0, torch.finfo(att.dtype).min)
        att = F.softmax(att, dim=-1)
        y = self.W_o(self._from_heads(torch.matmul(att, v)))

        if return_cache:
            return y, (k, v)
        return y


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

    def forward(self, x, past_kv=None, return_cache=False):
        """Pre-LN block. Same extra arguments as CausalAttention.forward."""
        present = None
        if return_cache:
            attn_out, present = self.attention(self.pre_layer_norm(x), past_kv=past_kv, return_cache=True)
        else:
            attn_out = self.attention(self.pre_layer_norm(x), past_kv=past_kv)
        x = x + attn_out
        x = x + self.mlp(self.post_layer_norm(x))
        if return_cache:
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

    def _init_weights(self):
        self.apply(self._init_module)

    @staticmethod
    def _init_module(module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.ones_(module.weight)
            torch.nn.init.zeros_(module.bias)

    def forward(self, x):
        """
        Args:
            x: (B, T) token ids, T <= context_length.
        Returns:
            logits of shape (B, T, vocab_size).
        """
        T = x.shape[1]
        pos = torch.arange(0, T, dtype=torch.long, device=x.device)
        hidden = self.embeddings(x) + self.position_embeddings(pos)
        for block in self.backbone:
            hidden = block(hidden)
        hidden = self.final_layer_norm(hidden)
        return self.lm_head(hidden)

    def _forward_cached(self, new_tokens, cache):
        """Run only `new_tokens` through the model, attending to the cached keys/values.

        Args:
            new_tokens: (B, T_new) ids that come right after the cached tokens.
            cache: list with one (k, v) per layer, or None when nothing is cached yet.
        Returns:
            (logits of the new tokens, updated cache)
        """
        past_len = 0 if cache is None else cache[0][0].shape[2]
        pos = torch.arange(past_len, past_len + new_tokens.shape[1], device=new_tokens.device)
        hidden = self.embeddings(new_tokens) + self.position_embeddings(pos)
        new_cache = []
        for i, block in enumerate(self.backbone):
            hidden, kv = block(hidden, past_kv=None if cache is None else cache[i], return_cache=True)
            new_cache.append(kv)
        logits = self.lm_head(self.final_layer_norm(hidden))
        return logits, new_cache

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        """Greedy decoding with a kv cache; returns (B, T + num_new_tokens)."""
        ctx_len = self.config.context_length
        generated = x
        cache = None
        to_feed = x[:, -ctx_len:]
        for _ in range(num_new_tokens):
            cached_len = 0 if cache is None else cache[0][0].shape[2]
            if cached_len + to_feed.shape[1] > ctx_len:
                # position embeddings end at ctx_len, so redo the last ctx_len tokens from scratch
                cache = None
                to_feed = generated[:, -ctx_len:]
            logits, cache = self._forward_cached(to_feed, cache)
            next_id = torch.argmax(logits[:, -1, :], dim=-1).unsqueeze(1)
            generated = torch.cat((generated, next_id), dim=1)
            to_feed = next_id
        return generated

    def get_loss_on_batch(self, input_ids):
        """Mean next-token negative log likelihood over the batch."""
        logits = self(input_ids[:, :-1])
        log_probs = F.log_softmax(logits, dim=-1)
        targets = input_ids[:, 1:].unsqueeze(-1)           # (B, T-1, 1)
        token_log_probs = log_probs.gather(dim=-1, index=targets).squeeze(-1)
        return -token_log_probs.mean()

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
