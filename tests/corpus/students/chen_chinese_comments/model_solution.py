"""作业 A3：GPT-2 风格的解码器（只有解码器）Transformer。

陈同学的实现。注意：每个注意力头单独计算（用 for 循环），方便理解。
"""

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


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        mask = torch.tril(torch.ones(config.context_length, config.context_length))
        self.register_buffer("causal_mask", mask.view(1, 1, config.context_length, config.context_length),
                             persistent=False)

    def forward(self, x):
        # x: (B, T, d_model)
        B, T, _ = x.shape
        Q = self.W_q(x)
        K = self.W_k(x)
        V = self.W_v(x)
        # 下三角矩阵：位置 i 只能看到 0..i
        mask = torch.tril(torch.ones(T, T, device=x.device))
        outputs = []
        for h in range(self.n_heads):
            s = h * self.d_attention
            e = s + self.d_attention
            q_h = Q[:, :, s:e]  # (B, T, d_attention)
            k_h = K[:, :, s:e]
            v_h = V[:, :, s:e]
            # 注意力分数 = q·kᵀ / √d
            scores = q_h @ k_h.transpose(1, 2) / math.sqrt(self.d_attention)
            scores = scores.masked_fill(mask == 0, float("-inf"))  # 未来的位置 → -inf
            attn = torch.softmax(scores, dim=-1)
            outputs.append(attn @ v_h)
        # 把所有头拼起来，再做输出投影
        return self.W_o(torch.cat(outputs, dim=-1))


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
        # 逐位置的前馈网络：d → 4d → d
        hidden = self.gelu(self.fc1(x))
        return self.fc2(hidden)


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x):
        # 先归一化再进注意力（pre-norm），残差连接
        x = x + self.attention(self.pre_layer_norm(x))
        # 然后是 MLP，同样有残差
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
        B, T = x.shape
        # 词向量 + 位置向量
        tok = self.embeddings(x)
        pos = self.position_embeddings(torch.arange(T, device=x.device))
        h = tok + pos
        for layer in self.backbone:
            h = layer(h)
        h = self.final_layer_norm(h)
        return self.lm_head(h)  # 返回 logits，不做 softmax

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        # 贪心解码：每次取最后一个位置概率最大的词
        for i in range(num_new_tokens):
            context = x[:, -self.config.context_length:]  # 位置编码最多 context_length 个
            logits = self.forward(context)
            _, top_idx = torch.topk(logits[:, -1, :], k=1, dim=-1)
            x = torch.cat([x, top_idx], dim=1)
        return x

    def get_loss_on_batch(self, input_ids):
        # 用位置 0..T-2 预测位置 1..T-1
        logits = self.forward(input_ids[:, :-1])
        B, T, V = logits.shape
        labels = input_ids[:, 1:]
        return F.cross_entropy(logits.reshape(B * T, V), labels.reshape(B * T))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
