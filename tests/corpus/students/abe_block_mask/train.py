"""A3 3(b)iii: train the small config on TinyStories (Abe)."""

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


def get_chunked_tinystories(chunk_size: int) -> torch.Tensor:
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    token_stream: list[int] = []
    for text in tqdm(dataset["text"], desc="tokenize"):
        token_stream += tokenizer(text)["input_ids"] + [tokenizer.eos_token_id]
    rows = len(token_stream) // chunk_size
    return torch.tensor(token_stream[: rows * chunk_size], dtype=torch.long).view(rows, chunk_size)


def plot_results(losses: list[float], grad_norms: list[float], save_path: str) -> None:
    fig, (ax_l, ax_g) = plt.subplots(1, 2, figsize=(10, 4))
    ax_l.plot(losses)
    ax_l.set_title("train loss")
    ax_l.set_xlabel("step")
    ax_g.plot(grad_norms)
    ax_g.set_title("grad norm")
    ax_g.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate: float, gradient_clipping: float | None, model_config: ModelConfig,
          batch_size: int, max_steps: int | None = None) -> None:
    path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(path):
        data = torch.load(path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, path)

    model = Transformer(model_config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    total_steps = len(data) // batch_size
    if max_steps is not None:
        total_steps = min(total_steps, max_steps)

    losses: list[float] = []
    grad_norms: list[float] = []
    for step in tqdm(range(total_steps)):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        max_norm = float("inf") if gradient_clipping is None else float(gradient_clipping)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
