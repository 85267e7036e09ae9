"""A3 part (b): training loop. Mia, Python 3.14."""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from jaxtyping import Int
from torch import Tensor
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

device = torch.device(
    "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
)

PLOT_PATH = "./losses_and_grad_norms.png"


def get_chunked_tinystories(chunk_size: int) -> Int[Tensor, "N C"]:
    stories = load_dataset("roneneldan/TinyStories", split="train[:10%]")["text"]
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    stream: list[int] = []
    for story in tqdm(stories, desc="tokenizing"):
        stream.extend(tokenizer.encode(story))
        stream.append(tokenizer.eos_token_id)
    n_chunks = len(stream) // chunk_size
    return torch.tensor(stream[: n_chunks * chunk_size], dtype=torch.int64).reshape(n_chunks, chunk_size)


def plot_results(losses: list[float], grad_norms: list[float], save_path: str) -> None:
    fig, (left, right) = plt.subplots(ncols=2, figsize=(10, 4), layout="constrained")
    left.plot(losses, label="train loss")
    left.set_xlabel("step")
    left.set_ylabel("cross entropy (nats)")
    left.legend()
    right.plot(grad_norms, label="grad norm (before clipping)", color="tab:red")
    right.set_xlabel("step")
    right.legend()
    fig.savefig(save_path, dpi=100)
    plt.close(fig)


def train(
    learning_rate: float,
    gradient_clipping: float | None,
    model_config: ModelConfig,
    batch_size: int,
    max_steps: int | None = None,
) -> None:
    cache = Path(f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt")
    if cache.exists():
        chunks = torch.load(cache)
    else:
        chunks = get_chunked_tinystories(model_config.context_length)
        cache.parent.mkdir(parents=True, exist_ok=True)
        torch.save(chunks, cache)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    n_steps = len(chunks) // batch_size
    if max_steps is not None:
        n_steps = min(n_steps, max_steps)

    losses: list[float] = []
    grad_norms: list[float] = []
    for step in tqdm(range(n_steps), desc="training"):
        batch = chunks[step * batch_size : (step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(
            model.parameters(), gradient_clipping if gradient_clipping is not None else float("inf")
        )
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, PLOT_PATH)
    plot_results(losses, grad_norms, PLOT_PATH)


if __name__ == "__main__":
    train(
        learning_rate=1e-5,
        gradient_clipping=1,
        batch_size=16,
        max_steps=100,
        model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257),
    )
