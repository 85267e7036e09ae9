"""Yara -- training loop for A3 3(b)iii."""

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
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    encoded = tokenizer(dataset["text"])["input_ids"]
    flat = []
    for ids in tqdm(encoded, desc="joining"):
        flat.extend(ids)
        flat.append(tokenizer.eos_token_id)
    n_chunks = len(flat) // chunk_size
    return torch.tensor(flat[: n_chunks * chunk_size], dtype=torch.int64).reshape(n_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    left.plot(losses, color="tab:blue")
    left.set_title("loss")
    right.plot(grad_norms, color="tab:orange")
    right.set_title("gradient norm")
    for ax in (left, right):
        ax.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def global_grad_norm(parameters):
    """L2 norm of all gradients together (what clip_grad_norm_ returns)."""
    norms = [p.grad.detach().norm(2) for p in parameters if p.grad is not None]
    if not norms:
        return torch.tensor(0.0)
    return torch.norm(torch.stack(norms), 2)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    cache_file = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(cache_file):
        chunks = torch.load(cache_file)
    else:
        chunks = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(chunks, cache_file)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    num_steps = chunks.shape[0] // batch_size
    if max_steps is not None:
        num_steps = min(num_steps, max_steps)

    losses, grad_norms = [], []
    for step in tqdm(range(num_steps), desc="train"):
        batch = chunks[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is None:
            grad_norm = global_grad_norm(model.parameters())  # just measure it
        else:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
