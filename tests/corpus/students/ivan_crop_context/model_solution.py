# ivan -- a3 model_solution.py
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
		tri = torch.tril(torch.ones(config.context_length, config.context_length))
		self.register_buffer("causal_mask", tri[None, None], persistent=False)

	def split(self, t):
		# (b, n, h*d) -> (b, h, n, d)
		return t.unflatten(-1, (self.n_heads, self.d_attention)).transpose(1, 2)

	def forward(self, x):
		n = x.size(1)
		q = self.split(self.W_q(x))
		k = self.split(self.W_k(x))
		v = self.split(self.W_v(x))
		s = q @ k.transpose(-1, -2) / math.sqrt(self.d_attention)
		keep = self.causal_mask[:, :, :n, :n] == 1
		neg_inf = torch.tensor(float("-inf"), dtype=s.dtype, device=s.device)
		s = torch.where(keep, s, neg_inf)
		a = s.softmax(dim=-1)
		o = (a @ v).transpose(1, 2).flatten(2)  # back to (b, n, h*d)
		return self.W_o(o)


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
		for m in self.modules():
			if isinstance(m, (nn.Linear, nn.Embedding)):
				nn.init.normal_(m.weight, mean=0.0, std=0.02)
			if isinstance(m, nn.Linear) and m.bias is not None:
				nn.init.zeros_(m.bias)
			if isinstance(m, nn.LayerNorm):
				nn.init.ones_(m.weight)
				nn.init.zeros_(m.bias)

	def _logits(self, idx):
		# idx (b, n) with n <= context_length
		n = idx.size(1)
		h = self.embeddings(idx) + self.position_embeddings(torch.arange(n, device=idx.device))
		for blk in self.backbone:
			h = blk(h)
		return self.lm_head(self.final_layer_norm(h))

	def forward(self, x):
		return self._logits(x)

	def _next_token(self, idx):
		# only the last context_length tokens fit the position embeddings -> crop
		idx_cond = idx if idx.size(1) <= self.config.context_length else idx[:, -self.config.context_length:]
		last = self._logits(idx_cond)[:, -1, :]
		return last.argmax(dim=-1, keepdim=True)

	@torch.no_grad()
	def generate(self, x, num_new_tokens):
		for _ in range(num_new_tokens):
			x = torch.cat((x, self._next_token(x)), dim=1)
		return x

	def get_loss_on_batch(self, input_ids):
		logits = self(input_ids[:, :-1])
		# flatten (b, n-1, V) -> (b*(n-1), V)
		return F.cross_entropy(logits.reshape(-1, self.config.vocab_size), input_ids[:, 1:].flatten())

	@classmethod
	def from_pretrained(cls) -> "Transformer":
		model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
		hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
		model.load_state_dict(state_dict_converter(hf_model.state_dict()))
		return model
