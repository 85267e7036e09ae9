# A3 - Omar
# Decoder-only transformer (GPT-2 small layout).
# Extras over the handout (part 3(c) experiments):
#   - dropout on the attention weights, on each residual branch and on the embeddings
#     (only in train mode, so eval/generate are unaffected)
#   - GPT-2 style init: the projections that write into the residual stream
#     (W_o and fc2) get std 0.02 / sqrt(2 * n_layers)

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
    dropout: float = 0.1       # my addition, 0.0 turns it off
    init_std: float = 0.02


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        assert config.d_model % config.n_heads == 0
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.register_buffer(
            "causal_mask",
            torch.tril(torch.ones(config.context_length, config.context_length)).view(
                1, 1, config.context_length, config.context_length
            ),
            persistent=False,
        )

    def forward(self, x):
        B, T, C = x.size()
        q = self.W_q(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)  # B, nh, T, hs
        k = self.W_k(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_heads, self.d_attention).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # B, nh, T, hs
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.W_o(y))


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
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.fc2(self.gelu(self.fc1(x))))


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x):
        x = x + self.attention(self.pre_layer_norm(x))
        x = x + self.mlp(self.post_layer_norm(x))
        return x


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
        self.embedding_dropout = nn.Dropout(config.dropout)
        self.backbone = nn.ModuleList([DecoderBlock(config) for _ in range(config.n_layers)])
        self.final_layer_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self):
        std = self.config.init_std
        # residual projections: scaled so the residual stream doesn't grow with depth (GPT-2 paper, sec 2.3)
        scaled_std = std / math.sqrt(2 * self.config.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                if name.endswith("attention.W_o") or name.endswith("mlp.fc2"):
                    nn.init.normal_(module.weight, mean=0.0, std=scaled_std)
                else:
                    nn.init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=std)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x):
        B, T = x.size()
        assert T <= self.config.context_length, f"sequence of {T} tokens, context is {self.config.context_length}"
        pos = torch.arange(0, T, dtype=torch.long, device=x.device)
        h = self.embedding_dropout(self.embeddings(x) + self.position_embeddings(pos))
        for block in self.backbone:
            h = block(h)
        h = self.final_layer_norm(h)
        return self.lm_head(h)

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        for _ in range(num_new_tokens):
            idx_cond = x if x.size(1) <= self.config.context_length else x[:, -self.config.context_length:]
            logits = self(idx_cond)
            idx_next = torch.argmax(logits[:, -1, :], dim=-1, keepdim=True)
            x = torch.cat((x, idx_next), dim=1)
        return x

    def get_loss_on_batch(self, input_ids):
        logits = self(input_ids[:, :-1])  # B, T-1, V
        targets = input_ids[:, 1:]  # B, T-1
        # cross_entropy wants the class dim second: (B, V, T-1)
        return F.cross_entropy(logits.transpose(1, 2), targets)

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
