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
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_model = config.d_model
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        L = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(L, L)).view(1, 1, L, L), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        # one big matmul instead of three (like c_attn in GPT-2): stack the weights row-wise
        # so the output is [q | k | v] along the last dim
        W_qkv = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight], dim=0)  # (3C, C)
        b_qkv = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias], dim=0)        # (3C,)
        qkv = x @ W_qkv.T + b_qkv                                                     # (B, T, 3C)
        q, k, v = qkv.split(self.d_model, dim=2)

        q = q.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.d_attention).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_attention)
        att = att.masked_fill(self.causal_mask[:, :, :T, :T] == 0, -1e9)
        att = torch.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(y)


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
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, 0.02)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        B, T = x.shape
        pos = torch.arange(T)
        tok_emb = self.embeddings(x)
        pos_emb = self.position_embeddings(pos)
        h = tok_emb + pos_emb
        for block in self.backbone:
            h = block(h)
        h = self.final_layer_norm(h)
        logits = self.lm_head(h)
        return logits

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        out = x
        for _ in range(num_new_tokens):
            logits = self(out[:, -self.config.context_length:])
            _, next_id = torch.max(logits[:, -1, :], dim=-1)
            out = torch.cat((out, next_id[:, None]), dim=1)
        return out

    def get_loss_on_batch(self, input_ids):
        logits = self(input_ids[:, :-1])
        targets = input_ids[:, 1:]
        B, T, V = logits.shape
        loss = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))
        return loss

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
