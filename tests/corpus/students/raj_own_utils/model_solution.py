"""
A3 - transformer model
Raj
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
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        causal_mask = torch.ones(config.context_length, config.context_length, dtype=torch.float32)
        causal_mask = torch.tril(causal_mask)
        causal_mask = causal_mask.unsqueeze(0).unsqueeze(0)  # (1, 1, ctx, ctx)
        self.register_buffer("causal_mask", causal_mask, persistent=False)

    def forward(self, x):
        batch_size, seq_len, d_model = x.shape
        n_heads = self.config.n_heads

        # (batch, seq, d_model) -> (batch, n_heads, seq, d_attention)
        q = self.W_q(x).view(batch_size, seq_len, n_heads, self.d_attention).transpose(1, 2)
        k = self.W_k(x).view(batch_size, seq_len, n_heads, self.d_attention).transpose(1, 2)
        v = self.W_v(x).view(batch_size, seq_len, n_heads, self.d_attention).transpose(1, 2)

        attn_scores = torch.matmul(q, k.transpose(2, 3)) / (self.d_attention ** 0.5)
        mask = self.causal_mask[:, :, :seq_len, :seq_len]
        # smallest float instead of -inf (no NaNs if a whole row were masked)
        attn_scores = attn_scores.masked_fill(mask == 0, torch.finfo(attn_scores.dtype).min)
        attn_weights = F.softmax(attn_scores, dim=-1)

        context = torch.matmul(attn_weights, v)  # (batch, n_heads, seq, d_attention)
        context = context.transpose(1, 2).contiguous().view(batch_size, seq_len, d_model)
        return self.W_o(context)


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

    def forward(self, x):
        attn_out = self.attention(self.pre_layer_norm(x))
        x = x + attn_out
        mlp_out = self.mlp(self.post_layer_norm(x))
        x = x + mlp_out
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
                nn.init.normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.constant_(module.bias, 0.0)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                nn.init.constant_(module.weight, 1.0)
                nn.init.constant_(module.bias, 0.0)

    def forward(self, x):
        batch_size, seq_len = x.shape
        position_ids = torch.arange(seq_len, device=x.device).unsqueeze(0).expand(batch_size, seq_len)
        hidden = self.embeddings(x) + self.position_embeddings(position_ids)
        for decoder_block in self.backbone:
            hidden = decoder_block(hidden)
        hidden = self.final_layer_norm(hidden)
        logits = self.lm_head(hidden)
        return logits

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        generated = x
        for _ in range(num_new_tokens):
            context = generated[:, -self.config.context_length:]
            logits = self.forward(context)
            last_logits = logits[:, -1, :]
            next_token = torch.argmax(last_logits, dim=-1).unsqueeze(1)
            generated = torch.cat([generated, next_token], dim=1)
        return generated

    def get_loss_on_batch(self, input_ids):
        inputs = input_ids[:, :-1]
        labels = input_ids[:, 1:]
        logits = self.forward(inputs)  # (batch, seq-1, vocab)
        logits = logits.permute(0, 2, 1)  # cross_entropy wants (batch, vocab, seq-1)
        loss = F.cross_entropy(logits, labels)
        return loss

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
