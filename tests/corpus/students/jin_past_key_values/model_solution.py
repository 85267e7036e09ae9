"""A3 Self-Attention and Transformers -- model.

Jin: shapes are annotated with jaxtyping. I also added Hugging Face style
`past_key_values` / `use_cache` so generation can reuse keys and values; like GPT-2 in HF,
each layer's cache ("present") is one tensor with k and v stacked: (2, batch, head, seq, d_head).
"""

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

import einops
import huggingface_hub
import jaxtyping
import torch
import torch.nn as nn
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from transformers import GPT2LMHeadModel

from utils import state_dict_converter

LayerCache = Float[Tensor, "2 batch head past d_head"]


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
        ctx = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx), persistent=False)

    def _split(self, t: Float[Tensor, "batch seq d_model"]) -> Float[Tensor, "batch head seq d_head"]:
        b, s, _ = t.shape
        return t.view(b, s, self.n_heads, self.d_attention).transpose(1, 2)

    def _merge(self, t: Float[Tensor, "batch head seq d_head"]) -> Float[Tensor, "batch seq d_model"]:
        b, _, s, _ = t.shape
        return t.transpose(1, 2).contiguous().view(b, s, self.n_heads * self.d_attention)

    def forward(
        self,
        x: Float[Tensor, "batch seq d_model"],
        layer_past: Optional[LayerCache] = None,
        use_cache: bool = False,
    ) -> Union[Float[Tensor, "batch seq d_model"], Tuple[Float[Tensor, "batch seq d_model"], LayerCache]]:
        seq = x.size(1)
        query = self._split(self.W_q(x))
        key = self._split(self.W_k(x))
        value = self._split(self.W_v(x))

        past = 0
        if layer_past is not None:
            past = layer_past.size(-2)
            key = torch.cat((layer_past[0], key), dim=-2)
            value = torch.cat((layer_past[1], value), dim=-2)

        attn_scores: Float[Tensor, "batch head seq total"] = query @ key.transpose(-1, -2)
        attn_scores = attn_scores / math.sqrt(self.d_attention)
        causal = self.causal_mask[:, :, past:past + seq, :past + seq]
        attn_scores = attn_scores.masked_fill(causal == 0, -1e9)
        attn_weights = F.softmax(attn_scores, dim=-1)
        out = self.W_o(self._merge(attn_weights @ value))

        if use_cache:
            return out, torch.stack((key, value))
        return out


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

    def forward(self, x: Float[Tensor, "batch seq d_model"]) -> Float[Tensor, "batch seq d_model"]:
        hidden: Float[Tensor, "batch seq d_ff"] = self.gelu(self.fc1(x))
        return self.fc2(hidden)


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(
        self,
        x: Float[Tensor, "batch seq d_model"],
        layer_past: Optional[LayerCache] = None,
        use_cache: bool = False,
    ) -> Union[Float[Tensor, "batch seq d_model"], Tuple[Float[Tensor, "batch seq d_model"], LayerCache]]:
        attn_out = self.attention(self.pre_layer_norm(x), layer_past=layer_past, use_cache=use_cache)
        present = None
        if use_cache:
            attn_out, present = attn_out
        x = x + attn_out
        x = x + self.mlp(self.post_layer_norm(x))
        return (x, present) if use_cache else x


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

    def forward(
        self,
        x: Int[Tensor, "batch seq"],
        past_key_values: Optional[List[LayerCache]] = None,
        use_cache: bool = False,
    ) -> Union[Float[Tensor, "batch seq vocab"], Tuple[Float[Tensor, "batch seq vocab"], List[LayerCache]]]:
        seq = x.size(1)
        past = 0 if past_key_values is None else past_key_values[0].size(-2)
        position_ids: Int[Tensor, " seq"] = torch.arange(past, past + seq, dtype=torch.long, device=x.device)
        hidden: Float[Tensor, "batch seq d_model"] = self.embeddings(x) + self.position_embeddings(position_ids)

        presents: List[LayerCache] = []
        for i, block in enumerate(self.backbone):
            layer_past = None if past_key_values is None else past_key_values[i]
            if use_cache:
                hidden, present = block(hidden, layer_past=layer_past, use_cache=True)
                presents.append(present)
            else:
                hidden = block(hidden, layer_past=layer_past)

        logits: Float[Tensor, "batch seq vocab"] = self.lm_head(self.final_layer_norm(hidden))
        if use_cache:
            return logits, presents
        return logits

    @torch.no_grad()
    def generate(self, x: Int[Tensor, "batch prompt"], num_new_tokens: int) -> Int[Tensor, "batch total"]:
        max_ctx = self.config.context_length
        past_key_values = None
        input_ids = x[:, -max_ctx:]
        output = x
        for _ in range(num_new_tokens):
            n_past = 0 if past_key_values is None else past_key_values[0].size(-2)
            if n_past + input_ids.size(1) > max_ctx:
                # the cache would run past the position embeddings: recompute the last window
                past_key_values = None
                input_ids = output[:, -max_ctx:]
            logits, past_key_values = self(input_ids, past_key_values=past_key_values, use_cache=True)
            next_ids: Int[Tensor, "batch 1"] = torch.argmax(logits[:, -1, :], dim=-1, keepdim=True)
            output = torch.cat([output, next_ids], dim=1)
            input_ids = next_ids
        return output

    def get_loss_on_batch(self, input_ids: Int[Tensor, "batch seq"]) -> Float[Tensor, ""]:
        logits: Float[Tensor, "batch seq_minus_1 vocab"] = self(input_ids[:, :-1])
        labels: Int[Tensor, "batch seq_minus_1"] = input_ids[:, 1:]
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
