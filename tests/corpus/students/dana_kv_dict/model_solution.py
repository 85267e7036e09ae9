# A3 - Self-Attention and Transformers
# Dana K.
#
# Extra thing I tried: a key/value cache for generation. The cache is a plain dict
#   {"pos": number of tokens already seen, 0: {"k": ..., "v": ...}, 1: {...}, ...}
# (one entry per layer, keyed by the layer index) that the attention layers fill in place.
# Without a cache everything works exactly like the normal (uncached) model.

import math
from dataclasses import dataclass
from typing import Optional

import einops
import huggingface_hub
import jaxtyping
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
        L = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(L, L)).reshape(1, 1, L, L), persistent=False)

    def forward(self, x, layer_cache: Optional[dict] = None, return_kv: bool = False):
        """x: (batch, seq, d_model).

        layer_cache: dict with "k"/"v" of the earlier tokens (or empty), updated in place.
        return_kv: also hand back the (k, v) this call attended over.
        """
        seq = x.shape[1]
        q = rearrange(self.W_q(x), "batch seq (head d) -> batch head seq d", head=self.n_heads)
        k = rearrange(self.W_k(x), "batch seq (head d) -> batch head seq d", head=self.n_heads)
        v = rearrange(self.W_v(x), "batch seq (head d) -> batch head seq d", head=self.n_heads)

        offset = 0
        if layer_cache is not None:
            if "k" in layer_cache:
                offset = layer_cache["k"].shape[2]
                k = torch.cat([layer_cache["k"], k], dim=2)
                v = torch.cat([layer_cache["v"], v], dim=2)
            layer_cache["k"] = k
            layer_cache["v"] = v

        scores = einsum(q, k, "batch head q d, batch head k d -> batch head q k") / math.sqrt(self.d_attention)
        # query i (really at position offset + i) may look at keys 0 .. offset + i
        mask = self.causal_mask[:, :, offset:offset + seq, :offset + seq]
        scores = scores.masked_fill(mask == 0, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = einsum(probs, v, "batch head q k, batch head k d -> batch head q d")
        out = self.W_o(rearrange(out, "batch head seq d -> batch seq (head d)"))
        if return_kv:
            return out, (k, v)
        return out


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
        h = self.fc1(x)
        h = self.gelu(h)
        return self.fc2(h)


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x, layer_cache: Optional[dict] = None):
        residual = x
        x = residual + self.attention(self.pre_layer_norm(x), layer_cache=layer_cache)
        residual = x
        x = residual + self.mlp(self.post_layer_norm(x))
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
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    @staticmethod
    def new_cache() -> dict:
        return {"pos": 0}

    def forward(self, x, kv_cache: Optional[dict] = None, return_cache: bool = False):
        """x: (B, T) token ids -> logits (B, T, vocab).

        kv_cache: a dict from new_cache() (filled in place); x then holds only the new tokens.
        return_cache: return (logits, kv_cache) instead of just the logits.
        """
        T = x.shape[1]
        start = 0 if kv_cache is None else kv_cache["pos"]
        positions = torch.arange(start, start + T, device=x.device)
        h = self.embeddings(x) + self.position_embeddings(positions)
        for i, block in enumerate(self.backbone):
            if kv_cache is None:
                h = block(h)
            else:
                h = block(h, layer_cache=kv_cache.setdefault(i, {}))
        logits = self.lm_head(self.final_layer_norm(h))
        if kv_cache is not None:
            kv_cache["pos"] = start + T
        if return_cache:
            return logits, kv_cache
        return logits

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        ctx = self.config.context_length
        tokens = x
        cache = self.new_cache()
        step_input = x[:, -ctx:]
        for _ in range(num_new_tokens):
            if cache["pos"] + step_input.shape[1] > ctx:
                # no more position embeddings left -> start over on the last ctx tokens
                cache = self.new_cache()
                step_input = tokens[:, -ctx:]
            logits, cache = self.forward(step_input, kv_cache=cache, return_cache=True)
            next_token = logits[:, -1, :].argmax(dim=-1)
            next_token = rearrange(next_token, "b -> b 1")
            tokens = torch.cat([tokens, next_token], dim=1)
            step_input = next_token
        return tokens

    def get_loss_on_batch(self, input_ids):
        logits = self.forward(input_ids[:, :-1])  # (B, T-1, V)
        targets = input_ids[:, 1:]                 # (B, T-1)
        # cross_entropy wants the classes in dim 1
        logits = rearrange(logits, "b t v -> b v t")
        return F.cross_entropy(logits, targets)

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
