"""A3 training with a live plot window."""

import os

import matplotlib
import matplotlib.pyplot as plt

matplotlib.use("TkAgg")  # so plt.show() opens a window
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


def get_chunked_tinystories(chunk_size: int) -> torch.Tensor:
    """Tokenise 10% of TinyStories and cut the token stream into rows of chunk_size (network)."""
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    ids: list[int] = []
    for story in tqdm(dataset["text"], desc="tokenising"):
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    num_chunks = len(ids) // chunk_size
    return torch.tensor(ids[: num_chunks * chunk_size], dtype=torch.long).view(num_chunks, chunk_size)


def plot_results(losses: list[float], grad_norms: list[float], save_path: str) -> None:
    fig, (ax_loss, ax_norm) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(losses)
    ax_loss.set(xlabel="step", ylabel="loss", title="Training loss")
    ax_norm.plot(grad_norms)
    ax_norm.set(xlabel="step", ylabel="gradient norm", title="Gradient norm")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate: float, gradient_clipping: float | None, model_config: ModelConfig,
          batch_size: int, max_steps: int | None = None) -> None:
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    # With no clipping, an infinite max_norm still computes (and returns) the total norm.
    max_norm = float("inf") if gradient_clipping is None else gradient_clipping

    losses, grad_norms = [], []
    num_batches = len(data) // batch_size
    steps = num_batches if max_steps is None else min(max_steps, num_batches)
    for step in tqdm(range(steps), desc="training"):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
