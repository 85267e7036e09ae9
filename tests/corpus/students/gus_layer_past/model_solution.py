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
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        n = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(1, 1, n, n)), persistent=False)

    def forward(self, x, layer_past=None, mask=None):
        # x: [batch, seq, d_model]
        # layer_past: optional (past_k, past_v), each [batch, past_seq, d_model] (heads not split yet)
        # mask: optional [batch or 1, heads or 1, seq, past_seq + seq], 1 = may attend.
        #       if None the usual causal mask is used.
        # TODO: also return the new (k, v) so generate can reuse them
        batch, seq, d_model = x.shape
        Q = self.W_q(x)
        K = self.W_k(x)
        V = self.W_v(x)

        past = 0
        if layer_past is not None:
            past_k, past_v = layer_past
            past = past_k.shape[1]
            K = torch.cat([past_k, K], dim=1)
            V = torch.cat([past_v, V], dim=1)

        if mask is None:
            mask = self.causal_mask[:, :, past:past + seq, :past + seq]

        head_outputs = []
        for h in range(self.n_heads):
            cols = slice(h * self.d_attention, (h + 1) * self.d_attention)
            q = Q[:, :, cols]  # [batch, seq, d_attention]
            k = K[:, :, cols]  # [batch, past + seq, d_attention]
            v = V[:, :, cols]
            scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.d_attention)
            head_mask = mask[:, h] if mask.shape[1] > 1 else mask[:, 0]
            scores = scores.masked_fill(head_mask == 0, float("-inf"))
            weights = F.softmax(scores, dim=-1)
            head_outputs.append(torch.bmm(weights, v))

        concat = torch.cat(head_outputs, dim=-1)  # [batch, seq, d_model]
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
        out = self.fc1(x)
        out = self.gelu(out)
        out = self.fc2(out)
        return out


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x, layer_past=None, mask=None):
        h = self.pre_layer_norm(x)
        attn = self.attention(h, layer_past, mask=mask)
        x = x + attn
        h = self.post_layer_norm(x)
        x = x + self.mlp(h)
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
        batch, seq = x.shape
        tok_emb = self.embeddings(x)
        pos_emb = self.position_embeddings(torch.arange(seq, device=x.device))
        out = tok_emb + pos_emb
        for block in self.backbone:
            out = block(out)
        out = self.final_layer_norm(out)
        logits = self.lm_head(out)
        return logits

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        out = x
        for i in range(num_new_tokens):
            window = out[:, -self.config.context_length:]
            logits = self(window)
            last = logits[:, -1, :]
            _, next_token = torch.max(last, dim=-1)
            out = torch.cat([out, next_token.unsqueeze(-1)], dim=-1)
        return out

    def get_loss_on_batch(self, input_ids):
        logits = self(input_ids[:, :-1])
        targets = input_ids[:, 1:]
        batch, seq, vocab = logits.shape
        loss = F.cross_entropy(logits.view(batch * seq, vocab), targets.contiguous().view(batch * seq))
        return loss

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
