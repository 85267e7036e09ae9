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
        self.config = config
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        self.register_buffer(
            "causal_mask",
            torch.tril(torch.ones(config.context_length, config.context_length)).unsqueeze(0).unsqueeze(0),
            persistent=False,
        )

    def split_heads(self, t):
        # (B, T, D) -> (B, H, T, d)
        return t.reshape(t.shape[0], t.shape[1], self.n_heads, self.d_attention).transpose(1, 2)

    def merge_heads(self, t):
        # (B, H, T, d) -> (B, T, D)
        t = t.transpose(1, 2)
        return t.reshape(t.shape[0], t.shape[1], self.n_heads * self.d_attention)

    def forward(self, x):
        T = x.shape[1]
        q = self.split_heads(self.W_q(x))
        k = self.split_heads(self.W_k(x))
        v = self.split_heads(self.W_v(x))
        scale = 1 / math.sqrt(self.d_attention)
        s = torch.einsum("bhid,bhjd->bhij", q, k) * scale
        s = s.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))
        p = s.softmax(dim=-1)
        return self.W_o(self.merge_heads(torch.einsum("bhij,bhjd->bhid", p, v)))
        # old version, one head at a time (too slow):
        outs = []
        for h in range(self.n_heads):
            outs.append(F.softmax(s[:, h], dim=-1) @ v[:, h])
        return self.W_o(torch.cat(outs, dim=-1))


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
        x = F.gelu(self.fc1(x), approximate="tanh")  # same thing with torch's gelu
        return self.fc2(x)


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

    def forward(self, x):
        T = x.shape[1]
        pos_ids = torch.arange(T, device=x.device)
        x = self.embeddings(x) + self.position_embeddings(pos_ids)
        for i in range(len(self.backbone)):
            x = self.backbone[i](x)
        x = self.final_layer_norm(x)
        logits = self.lm_head(x)
        return logits

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        target_len = x.shape[1] + num_new_tokens
        while x.shape[1] < target_len:
            logits = self(x[:, -self.config.context_length:])
            top_vals, top_idx = torch.topk(logits[:, -1, :], 1)
            x = torch.cat([x, top_idx], dim=1)
        return x

    def get_loss_on_batch(self, input_ids):
        logits = self(input_ids[:, :-1])
        V = logits.shape[-1]
        loss = F.cross_entropy(logits.reshape(-1, V), input_ids[:, 1:].reshape(-1))
        return loss
        # print(loss.item())

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
