# ivan -- a3 train.py
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


def get_chunked_tinystories(chunk_size):
	ds = load_dataset("roneneldan/TinyStories", split="train[:10%]")
	tok = AutoTokenizer.from_pretrained("gpt2")
	ids = []
	for text in tqdm(ds["text"]):
		ids.extend(tok(text)["input_ids"])
		ids.append(tok.eos_token_id)
	n = len(ids) // chunk_size
	return torch.tensor(ids[:n * chunk_size], dtype=torch.long).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
	fig, axes = plt.subplots(1, 2, figsize=(10, 4))
	axes[0].plot(losses)
	axes[0].set_title("loss")
	axes[1].plot(grad_norms)
	axes[1].set_title("grad norm")
	fig.savefig(save_path)
	plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
	path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
	if os.path.exists(path):
		data = torch.load(path)
	else:
		data = get_chunked_tinystories(model_config.context_length)
		os.makedirs("./datasets", exist_ok=True)
		torch.save(data, path)

	model = Transformer(model_config).to(device)
	opt = torch.optim.AdamW(model.parameters(), lr=learning_rate)
	losses, grad_norms = [], []

	for i, batch in enumerate(torch.split(data, batch_size)):
		if max_steps is not None and i >= max_steps:
			break
		if batch.size(0) < batch_size:  # last leftover batch
			break
		batch = batch.to(device)
		opt.zero_grad()
		loss = model.get_loss_on_batch(batch)
		loss.backward()
		gn = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping if gradient_clipping else float("inf"))
		opt.step()
		losses.append(loss.item())
		grad_norms.append(gn.item())
		if (i + 1) % 10 == 0:
			print(i + 1, losses[-1])
			plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

	plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
	train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
		model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
