"""A3: a GPT-2 style decoder-only transformer.

Everything outside the six TODOs is given. Fill in the bodies marked `# TODO` (each one returns a
placeholder until you do); keep every class, attribute and method name as it is: the grader loads
weights by these names. Shapes use B = batch, T = sequence length (1 <= T <= context_length).
"""

import math
from dataclasses import dataclass

import einops  # noqa: F401  (you may use einops.rearrange for the heads, or plain view/transpose)
import huggingface_hub  # noqa: F401
import jaxtyping  # noqa: F401
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401
from jaxtyping import Float, Int
from torch import Tensor
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

    def forward(self, x: Float[Tensor, "B T d_model"]) -> Float[Tensor, "B T d_model"]:
        """Multi-head causal self-attention (3(a)iii).

        Project x with W_q, W_k, W_v; split each into n_heads heads of size d_attention, i.e.
        (B, n_heads, T, d_attention); scores (B, n_heads, T, T) are q·kᵀ / sqrt(d_attention);
        where causal_mask (use its top-left T x T corner) is 0 a score becomes -inf; softmax over
        the keys; weighted sum of the values; merge the heads back to (B, T, d_model); apply W_o.
        """
        return torch.empty(1)  # TODO


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x: Tensor) -> Tensor:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x: Float[Tensor, "B T d_model"]) -> Float[Tensor, "B T d_model"]:
        """The position-wise feed-forward network (3(a)ii): fc1 (to 4·d_model), GELU, fc2."""
        return torch.empty(1)  # TODO


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x: Float[Tensor, "B T d_model"]) -> Float[Tensor, "B T d_model"]:
        """One pre-norm decoder block, GPT-2 order (3(a)iv).

        First a residual attention sub-layer whose input goes through pre_layer_norm, then a
        residual MLP sub-layer whose input goes through post_layer_norm.
        """
        return torch.empty(1)  # TODO


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

    def forward(self, x: Int[Tensor, "B T"]) -> Float[Tensor, "B T vocab_size"]:
        """Token ids to next-token logits (3(a)v).

        Token embeddings plus the position embeddings of positions 0..T-1, then every block of
        the backbone in order, final_layer_norm and lm_head. Return logits (no softmax).
        """
        return torch.empty(1)  # TODO

    @torch.no_grad()
    def generate(self, x: Int[Tensor, "B T"], num_new_tokens: int) -> Int[Tensor, "B T+num_new_tokens"]:
        """Greedy decoding (3(a)vi).

        num_new_tokens times: run the model, take the argmax of the logits at the last position
        and append it. Return the input ids followed by the new ones (int64). The position
        embeddings cover only context_length positions.
        """
        return torch.empty(1)  # TODO

    def get_loss_on_batch(self, input_ids: Int[Tensor, "B T"]) -> Float[Tensor, ""]:
        """Next-token cross entropy (3(b)ii): a scalar, the mean over all B·(T-1) predictions.

        The logits at positions 0..T-2 predict the tokens at positions 1..T-1.
        """
        return torch.empty(1)  # TODO

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        """GPT-2 small with Hugging Face's weights (downloads them: needs the network)."""
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
