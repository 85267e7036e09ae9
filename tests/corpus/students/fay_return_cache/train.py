"""Train the small transformer on TinyStories (A3 3(b)iii).

Author: Fay
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

device = torch.device("cpu")
if torch.cuda.is_available():
    device = torch.device("cuda")
elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
    device = torch.device("mps")


def get_chunked_tinystories(chunk_size):
    """Tokenize the first 10% of TinyStories and split it into rows of `chunk_size` tokens.

    Args:
        chunk_size: number of tokens per row (the model's context length).
    Returns:
        int64 tensor of shape (num_chunks, chunk_size).
    """
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")

    def tokenize(batch):
        return {"ids": [ids + [tokenizer.eos_token_id] for ids in tokenizer(batch["text"])["input_ids"]]}

    dataset = dataset.map(tokenize, batched=True, remove_columns=dataset.column_names)
    stream = [tok for ids in tqdm(dataset["ids"]) for tok in ids]
    num_chunks = len(stream) // chunk_size
    return torch.tensor(stream[: num_chunks * chunk_size], dtype=torch.long).reshape(num_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    """Loss on the left, gradient norm on the right."""
    fig, (left, right) = plt.subplots(ncols=2, figsize=(10, 4))
    left.plot(losses)
    left.set_xlabel("step")
    left.set_ylabel("loss")
    right.plot(grad_norms)
    right.set_xlabel("step")
    right.set_ylabel("grad norm")
    fig.suptitle("Training")
    fig.savefig(save_path, bbox_inches="tight")
    plt.close(fig)


def load_data(context_length):
    path = f"./datasets/tinystories_10pct_chunk_size_{context_length}.pt"
    if os.path.exists(path):
        return torch.load(path)
    data = get_chunked_tinystories(context_length)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(data, path)
    return data


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    """Train a fresh model.

    Args:
        learning_rate: AdamW learning rate.
        gradient_clipping: max gradient norm, or None for no clipping.
        model_config: a ModelConfig.
        batch_size: rows per step.
        max_steps: stop after this many steps (None: one pass over the data).
    """
    data = load_data(model_config.context_length)
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    num_steps = data.size(0) // batch_size
    if max_steps is not None:
        num_steps = min(num_steps, max_steps)

    losses, grad_norms = [], []
    progress = tqdm(range(num_steps), desc="train")
    for step in progress:
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)

        optimizer.zero_grad(set_to_none=True)
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        max_norm = gradient_clipping if gradient_clipping is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()

        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        progress.set_description(f"loss {losses[-1]:.3f}")

        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
