"""A3 作业：自己实现一个 GPT-2 风格的 Transformer 语言模型。

文同学
- 用 einops 来拆分/合并注意力头，比 view + transpose 更容易看懂
- 因果掩码在 forward 里现场用 torch.tril 生成
"""

import math
from dataclasses import dataclass

import einops
import huggingface_hub  # noqa: F401
import jaxtyping  # noqa: F401
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GPT2LMHeadModel

from utils import state_dict_converter


@dataclass
class ModelConfig:
    d_model: int          # 隐藏维度
    n_heads: int          # 注意力头数
    n_layers: int         # 层数
    context_length: int   # 最大序列长度
    vocab_size: int       # 词表大小


class CausalAttention(nn.Module):
    """带因果掩码的多头自注意力。"""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads  # 每个头的维度
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        # 作业要求的缓冲区（不保存到 state_dict 里）
        n = config.context_length
        self.register_buffer("causal_mask", torch.tril(torch.ones(n, n)).view(1, 1, n, n), persistent=False)

    def forward(self, x):
        """x: (批量, 序列长度, d_model) → 同样形状"""
        T = x.shape[1]
        # 投影后拆成多个头：b t (h d) → b h t d
        q = einops.rearrange(self.W_q(x), "b t (h d) -> b h t d", h=self.n_heads)
        k = einops.rearrange(self.W_k(x), "b t (h d) -> b h t d", h=self.n_heads)
        v = einops.rearrange(self.W_v(x), "b t (h d) -> b h t d", h=self.n_heads)

        # 注意力分数：q·kᵀ / √d
        scores = einops.einsum(q, k, "b h i d, b h j d -> b h i j") / math.sqrt(self.d_attention)

        # 下三角掩码：第 i 个位置只能看到 0..i（上三角部分设为 -inf）
        mask = torch.tril(torch.ones(T, T))
        scores = scores.masked_fill(mask == 0, float("-inf"))

        # 对 key 维度做 softmax，然后加权求和
        weights = torch.softmax(scores, dim=-1)
        out = einops.einsum(weights, v, "b h i j, b h j d -> b h i d")

        # 合并所有头：b h t d → b t (h d)，最后输出投影
        out = einops.rearrange(out, "b h t d -> b t (h d)")
        return self.W_o(out)


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    """前馈网络：d_model → 4·d_model → d_model。"""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x):
        return self.fc2(self.gelu(self.fc1(x)))


class DecoderBlock(nn.Module):
    """一个解码器层（GPT-2 的 pre-norm 顺序）。"""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x):
        x = x + self.attention(self.pre_layer_norm(x))  # 注意力 + 残差
        x = x + self.mlp(self.post_layer_norm(x))       # MLP + 残差
        return x


class Transformer(nn.Module):
    """完整的语言模型。"""

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
        # 初始化：线性层和嵌入 N(0, 0.02)，偏置为 0，LayerNorm 权重 1、偏置 0
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x):
        """x: (批量, 序列长度) 的 token id → logits (批量, 序列长度, 词表大小)"""
        T = x.shape[1]
        位置 = torch.arange(T)  # 0, 1, ..., T-1
        h = self.embeddings(x) + self.position_embeddings(位置)
        for 层 in self.backbone:
            h = 层(h)
        h = self.final_layer_norm(h)
        return self.lm_head(h)

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        """贪心解码：每一步取最后一个位置 logits 最大的 token，拼到序列后面。"""
        结果 = x
        for _ in range(num_new_tokens):
            # 超过 context_length 的话只保留最后 context_length 个 token
            输入 = 结果[:, -self.config.context_length:]
            logits = self(输入)
            下一个 = logits[:, -1, :].argmax(dim=-1)
            结果 = torch.cat([结果, einops.rearrange(下一个, "b -> b 1")], dim=1)
        return 结果

    def get_loss_on_batch(self, input_ids):
        """下一个 token 的交叉熵（对所有 B·(T-1) 个预测取平均）。"""
        logits = self(input_ids[:, :-1])
        目标 = input_ids[:, 1:]
        return F.cross_entropy(einops.rearrange(logits, "b t v -> (b t) v"), einops.rearrange(目标, "b t -> (b t)"))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
