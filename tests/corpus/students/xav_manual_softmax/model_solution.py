"""A3 (Xavier). I wrote the softmax and the cross entropy myself to make sure I understand
them; they are the numerically stable versions (subtract the max first / log-softmax)."""

import math
from dataclasses import dataclass

import einops  # noqa: F401
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


def stable_softmax(scores, dim=-1):
    """softmax(s)_i = exp(s_i - max s) / sum_j exp(s_j - max s)

    Masked entries are -inf, so exp gives exactly 0 for them. If a whole row were -inf the max
    would be -inf too and (-inf) - (-inf) = nan, so in that case I shift by 0 instead (the row
    then comes out as 0/0 -> I return zeros for it)."""
    row_max = scores.max(dim=dim, keepdim=True).values
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)
    total = e.sum(dim=dim, keepdim=True)
    total = torch.where(total == 0, torch.ones_like(total), total)
    return e / total


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
        self.register_buffer("causal_mask", torch.tril(torch.ones(1, 1, ctx, ctx)), persistent=False)

    def attend_one_head(self, q, k, v):
        # q, k, v: (B, T, d_attention)
        T = q.shape[1]
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.d_attention)  # (B, T, T)
        scores.masked_fill_(self.causal_mask[0, :, :T, :T] == 0, float("-inf"))
        probs = stable_softmax(scores, dim=-1)
        return torch.bmm(probs, v)

    def forward(self, x):
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        head_outputs = []
        for i in range(self.n_heads):
            cols = slice(i * self.d_attention, (i + 1) * self.d_attention)
            head_outputs.append(self.attend_one_head(Q[..., cols], K[..., cols], V[..., cols]))
        concat = torch.cat(head_outputs, dim=-1)  # (B, T, d_model), heads in order
        return self.W_o(concat)


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

    def forward(self, x):
        h = x + self.attention(self.pre_layer_norm(x))
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
        batch_size, seq_len = x.shape
        token_vectors = self.embeddings(x)
        position_vectors = self.position_embeddings(torch.arange(seq_len, device=x.device))
        hidden = token_vectors + position_vectors.unsqueeze(0)
        for block in self.backbone:
            hidden = block(hidden)
        hidden = self.final_layer_norm(hidden)
        return self.lm_head(hidden)

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        generated = x.clone()
        max_len = self.config.context_length
        for step in range(num_new_tokens):
            logits = self.forward(generated[:, -max_len:])
            last = logits[:, -1, :]
            best = torch.argmax(last, dim=-1, keepdim=True)  # (B, 1)
            generated = torch.cat((generated, best), dim=-1)
        return generated

    def get_loss_on_batch(self, input_ids):
        # predict token t+1 from tokens 0..t
        logits = self.forward(input_ids[:, :-1])          # (B, T-1, V)
        labels = input_ids[:, 1:]                         # (B, T-1)
        log_probs = F.log_softmax(logits, dim=-1)
        # pick log p(correct token) at every position
        correct = torch.gather(log_probs, dim=2, index=labels.unsqueeze(2)).squeeze(2)
        return -correct.mean()

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
