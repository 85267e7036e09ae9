import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import Transformer, ModelConfig

device = "cpu"
if torch.cuda.is_available():
	device = "cuda"
elif torch.backends.mps.is_available():
	device = "mps"
print("using", device)


def get_chunked_tinystories(chunk_size):
	ds = load_dataset("roneneldan/TinyStories", split="train[:10%]")
	tok = AutoTokenizer.from_pretrained("gpt2")
	tokens = []
	for text in tqdm(ds["text"]):
		tokens += tok.encode(text)
		tokens.append(tok.eos_token_id)
	n = len(tokens) // chunk_size
	tokens = tokens[:n * chunk_size]
	return torch.tensor(tokens, dtype=torch.long).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
	fig, ax = plt.subplots(1, 2, figsize=(12, 4))
	ax[0].plot(losses)
	ax[0].set_title("loss")
	ax[0].set_xlabel("step")
	ax[1].plot(grad_norms, color="orange")
	ax[1].set_title("grad norm")
	ax[1].set_xlabel("step")
	plt.savefig(save_path)
	plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
	path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
	if os.path.exists(path):
		data = torch.load(path)
	else:
		data = get_chunked_tinystories(model_config.context_length)
		os.makedirs("./datasets", exist_ok=True)
		torch.save(data, path)

	model = Transformer(model_config)
	model = model.to(device)
	optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

	# list of full batches
	batches = [data[i:i + batch_size] for i in range(0, len(data) - batch_size + 1, batch_size)]

	losses = []
	grad_norms = []
	for step, batch in enumerate(batches):
		if max_steps is not None and step >= max_steps:
			break
		batch = batch.to(device)
		optimizer.zero_grad()
		loss = model.get_loss_on_batch(batch)
		loss.backward()
		if gradient_clipping is None:
			norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"))
		else:
			norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=gradient_clipping)
		optimizer.step()
		losses.append(loss.item())
		grad_norms.append(norm.item())
		if step % 10 == 0:
			print(f"step {step} loss {loss.item():.4f} norm {norm.item():.3f}")
		if (step + 1) % 10 == 0:
			plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

	plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
	train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100, model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
