# A3 training loop -- Sara

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

if torch.cuda.is_available():
	device = torch.device("cuda")
elif torch.backends.mps.is_available():
	device = torch.device("mps")
else:
	device = torch.device("cpu")

PLOT = "./losses_and_grad_norms.png"


def get_chunked_tinystories(chunk_size: int) -> torch.Tensor:
	data = load_dataset("roneneldan/TinyStories", split="train[:10%]")
	tok = AutoTokenizer.from_pretrained("gpt2")
	ids: list[int] = []
	for s in tqdm(data["text"]):
		ids += tok(s)["input_ids"] + [tok.eos_token_id]
	n = len(ids) // chunk_size
	return torch.tensor(ids[: n * chunk_size], dtype=torch.long).view(n, chunk_size)


def plot_results(losses: list[float], grad_norms: list[float], save_path: str) -> None:
	fig, (l, r) = plt.subplots(1, 2, figsize=(10, 4))
	l.plot(losses)
	l.set_title("loss")
	r.plot(grad_norms)
	r.set_title("gradient norm")
	fig.tight_layout()
	fig.savefig(save_path)
	plt.close(fig)


def load_chunks(context_length: int) -> torch.Tensor:
	path = f"./datasets/tinystories_10pct_chunk_size_{context_length}.pt"
	if os.path.exists(path):
		return torch.load(path)
	chunks = get_chunked_tinystories(context_length)
	os.makedirs("./datasets", exist_ok=True)
	torch.save(chunks, path)
	return chunks


def train(learning_rate: float, gradient_clipping: float | None, model_config: ModelConfig, batch_size: int, max_steps: int | None = None) -> None:
	chunks = load_chunks(model_config.context_length)
	model = Transformer(model_config).to(device)
	opt = torch.optim.AdamW(model.parameters(), lr=learning_rate)

	steps = len(chunks) // batch_size
	if max_steps is not None:
		steps = min(steps, max_steps)

	losses: list[float] = []
	norms: list[float] = []
	for i in tqdm(range(steps)):
		batch = chunks[i * batch_size : (i + 1) * batch_size].to(device)
		opt.zero_grad()
		loss = model.get_loss_on_batch(batch)
		loss.backward()
		norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf") if gradient_clipping is None else gradient_clipping)
		opt.step()
		losses.append(loss.item())
		norms.append(norm.item())
		if (i + 1) % 10 == 0:
			plot_results(losses, norms, PLOT)
	plot_results(losses, norms, PLOT)


if __name__ == "__main__":
	train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100, model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
