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
	def __init__(self, config):
		super().__init__()
		self.config = config
		self.n_heads = config.n_heads
		self.d_attention = config.d_model // config.n_heads
		self.W_q = nn.Linear(config.d_model, config.d_model)
		self.W_k = nn.Linear(config.d_model, config.d_model)
		self.W_v = nn.Linear(config.d_model, config.d_model)
		self.W_o = nn.Linear(config.d_model, config.d_model)
		ctx = config.context_length
		self.register_buffer("causal_mask", torch.tril(torch.ones(ctx, ctx)).reshape(1, 1, ctx, ctx), persistent=False)

	def split_heads(self, t):
		# (B, T, D) -> (B, H, T, d)
		B, T, D = t.shape
		return t.reshape(B, T, self.n_heads, self.d_attention).permute(0, 2, 1, 3)

	def merge_heads(self, t):
		# (B, H, T, d) -> (B, T, D)
		B, H, T, d = t.shape
		return t.permute(0, 2, 1, 3).reshape(B, T, H * d)

	def forward(self, x):
		B, T, D = x.shape
		q = self.split_heads(self.W_q(x))
		k = self.split_heads(self.W_k(x))
		v = self.split_heads(self.W_v(x))

		att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_attention)
		# lower triangle = positions we are allowed to look at
		tril = torch.tril(torch.ones(T, T, device=x.device))
		att = att.masked_fill(tril == 0, -1e9)
		att = F.softmax(att, dim=-1)
		y = torch.matmul(att, v)
		return self.W_o(self.merge_heads(y))

		# first try, kept for reference (slow, one batch element at a time)
		outs = []
		for b in range(B):
			qb, kb, vb = q[b], k[b], v[b]
			s = qb @ kb.transpose(-1, -2) / math.sqrt(self.d_attention)
			s = s.masked_fill(tril == 0, -1e9)
			outs.append(F.softmax(s, dim=-1) @ vb)
		return self.W_o(self.merge_heads(torch.stack(outs)))


class GELU(nn.Module):
	"""The tanh approximation GPT-2 uses."""

	def forward(self, x):
		return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
	def __init__(self, config):
		super().__init__()
		self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
		self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
		self.gelu = GELU()

	def forward(self, x):
		x = self.fc1(x)
		x = self.gelu(x)
		x = self.fc2(x)
		return x


class DecoderBlock(nn.Module):
	def __init__(self, config):
		super().__init__()
		self.mlp = MLP(config)
		self.attention = CausalAttention(config)
		self.pre_layer_norm = nn.LayerNorm(config.d_model)
		self.post_layer_norm = nn.LayerNorm(config.d_model)

	def forward(self, x):
		x = x + self.attention(self.pre_layer_norm(x))
		x = x + self.mlp(self.post_layer_norm(x))
		return x
		# post-norm version (original transformer paper), not what gpt2 does
		x = self.pre_layer_norm(x + self.attention(x))
		x = self.post_layer_norm(x + self.mlp(x))
		return x


class Transformer(nn.Module):
	def __init__(self, config):
		super().__init__()
		self.config = config
		self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
		self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
		self.backbone = nn.ModuleList([DecoderBlock(config) for i in range(config.n_layers)])
		self.final_layer_norm = nn.LayerNorm(config.d_model)
		self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
		self._init_weights()

	def _init_weights(self):
		for m in self.modules():
			if isinstance(m, nn.Linear):
				torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
				if m.bias is not None:
					torch.nn.init.zeros_(m.bias)
			elif isinstance(m, nn.Embedding):
				torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
			elif isinstance(m, nn.LayerNorm):
				torch.nn.init.ones_(m.weight)
				torch.nn.init.zeros_(m.bias)

	def forward(self, x):
		B, T = x.shape
		pos = torch.arange(0, T, dtype=torch.long, device=x.device)
		h = self.embeddings(x) + self.position_embeddings(pos)
		for block in self.backbone:
			h = block(h)
		h = self.final_layer_norm(h)
		logits = self.lm_head(h)
		return logits

	@torch.no_grad()
	def generate(self, x, num_new_tokens):
		for _ in range(num_new_tokens):
			x_cond = x if x.shape[1] <= self.config.context_length else x[:, -self.config.context_length:]
			logits = self(x_cond)
			next_tok = torch.argmax(logits[:, -1, :], dim=-1).unsqueeze(-1)
			x = torch.cat((x, next_tok), dim=1)
		return x
		# sampling version, maybe for later
		probs = F.softmax(logits[:, -1, :], dim=-1)
		next_tok = torch.multinomial(probs, num_samples=1)
		return torch.cat((x, next_tok), dim=1)

	def get_loss_on_batch(self, input_ids):
		logits = self(input_ids)
		logits = logits[:, :-1, :]
		targets = input_ids[:, 1:]
		loss = F.cross_entropy(logits.reshape(-1, self.config.vocab_size), targets.reshape(-1))
		return loss

	@classmethod
	def from_pretrained(cls):
		config = ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257)
		model = cls(config)
		hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
		model.load_state_dict(state_dict_converter(hf_model.state_dict()))
		return model
