# A3: GPT-2 style transformer
# Sara  (python 3.14, torch 2.9)

import math
from dataclasses import dataclass

import einops
import huggingface_hub
import jaxtyping
import torch
import torch.nn as nn
import torch.nn.functional as F
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
	def __init__(self, config: ModelConfig) -> None:
		super().__init__()
		self.n_heads = config.n_heads
		self.d_attention = config.d_model // config.n_heads
		self.W_q = nn.Linear(config.d_model, config.d_model)
		self.W_k = nn.Linear(config.d_model, config.d_model)
		self.W_v = nn.Linear(config.d_model, config.d_model)
		self.W_o = nn.Linear(config.d_model, config.d_model)
		size = config.context_length
		self.register_buffer("causal_mask", torch.tril(torch.ones(size, size)).view(1, 1, size, size), persistent=False)

	def _heads(self, t: Tensor) -> Tensor:
		# (B, T, D) -> (B, n_heads, T, d_attention)
		return t.unflatten(-1, (self.n_heads, self.d_attention)).transpose(1, 2)

	def forward(self, x: Tensor) -> Tensor:
		T = x.size(1)
		q = self._heads(self.W_q(x))
		k = self._heads(self.W_k(x))
		v = self._heads(self.W_v(x))
		# the buffer is 1.0/0.0 -> bool, True = allowed to attend (a float mask would be ADDED to the scores)
		allowed = self.causal_mask[:, :, :T, :T].bool()
		out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=1 / math.sqrt(self.d_attention))
		out = out.transpose(1, 2).flatten(2)
		return self.W_o(out)


class GELU(nn.Module):
	"""The tanh approximation GPT-2 uses."""

	def forward(self, x: Tensor) -> Tensor:
		return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
	def __init__(self, config: ModelConfig) -> None:
		super().__init__()
		self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
		self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
		self.gelu = GELU()

	def forward(self, x: Tensor) -> Tensor:
		return self.fc2(self.gelu(self.fc1(x)))


class DecoderBlock(nn.Module):
	def __init__(self, config: ModelConfig) -> None:
		super().__init__()
		self.mlp = MLP(config)
		self.attention = CausalAttention(config)
		self.pre_layer_norm = nn.LayerNorm(config.d_model)
		self.post_layer_norm = nn.LayerNorm(config.d_model)

	def forward(self, x: Tensor) -> Tensor:
		x = x + self.attention(self.pre_layer_norm(x))
		x = x + self.mlp(self.post_layer_norm(x))
		return x


class Transformer(nn.Module):
	config: ModelConfig
	backbone: nn.ModuleList

	def __init__(self, config: ModelConfig) -> None:
		super().__init__()
		self.config = config
		self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
		self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
		self.backbone = nn.ModuleList([DecoderBlock(config) for _ in range(config.n_layers)])
		self.final_layer_norm = nn.LayerNorm(config.d_model)
		self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
		self._init_weights()

	def _init_weights(self) -> None:
		for m in self.modules():
			if isinstance(m, nn.Linear):
				nn.init.normal_(m.weight, 0.0, 0.02)
				if m.bias is not None:
					nn.init.zeros_(m.bias)
			if isinstance(m, nn.Embedding):
				nn.init.normal_(m.weight, 0.0, 0.02)
			if isinstance(m, nn.LayerNorm):
				nn.init.ones_(m.weight)
				nn.init.zeros_(m.bias)

	def forward(self, x: Tensor) -> Tensor:
		T = x.size(1)
		h = self.embeddings(x) + self.position_embeddings.weight[:T]
		for block in self.backbone:
			h = block(h)
		return self.lm_head(self.final_layer_norm(h))

	@torch.no_grad()
	def generate(self, x: Tensor, num_new_tokens: int) -> Tensor:
		ctx = self.config.context_length
		for _ in range(num_new_tokens):
			logits = self(x[:, -ctx:])
			_, best = torch.max(logits[:, -1, :], dim=-1)
			x = torch.cat([x, best[:, None]], dim=1)
		return x

	def get_loss_on_batch(self, input_ids: Tensor) -> Tensor:
		logits = self(input_ids[:, :-1])
		return F.cross_entropy(logits.flatten(0, 1), input_ids[:, 1:].flatten())

	@classmethod
	def from_config(cls, **kwargs) -> Transformer:
		return cls(ModelConfig(**kwargs))

	@classmethod
	def from_pretrained(cls) -> Transformer:
		model = cls.from_config(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257)
		hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
		model.load_state_dict(state_dict_converter(hf_model.state_dict()))
		return model
