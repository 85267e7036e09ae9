"""A3 -- training loop (Jin)."""

import os
from typing import List, Optional

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

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")


def get_chunked_tinystories(chunk_size: int) -> Int[Tensor, "num_chunks chunk_size"]:
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    token_stream: List[int] = []
    for story in tqdm(dataset["text"], desc="tokenizing"):
        token_stream.extend(tokenizer(story)["input_ids"])
        token_stream.append(tokenizer.eos_token_id)
    num_chunks = len(token_stream) // chunk_size
    chunks = torch.tensor(token_stream[: num_chunks * chunk_size], dtype=torch.long)
    return chunks.view(num_chunks, chunk_size)


def plot_results(losses: List[float], grad_norms: List[float], save_path: str) -> None:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    ax1.plot(losses)
    ax1.set_title("Loss")
    ax1.set_xlabel("Step")
    ax2.plot(grad_norms)
    ax2.set_title("Gradient norm")
    ax2.set_xlabel("Step")
    plt.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(
    learning_rate: float,
    gradient_clipping: Optional[float],
    model_config: ModelConfig,
    batch_size: int,
    max_steps: Optional[int] = None,
) -> None:
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data: Int[Tensor, "num_chunks ctx"] = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    num_batches = data.shape[0] // batch_size
    total_steps = num_batches if max_steps is None else min(max_steps, num_batches)
    losses: List[float] = []
    grad_norms: List[float] = []

    for step in tqdm(range(total_steps)):
        batch: Int[Tensor, "batch ctx"] = data[step * batch_size:(step + 1) * batch_size].to(device)
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
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
