"""
Training loop for A3 part (b). Pia.
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
elif torch.backends.mps.is_available():
    device = torch.device("mps")


def get_chunked_tinystories(chunk_size):
    ds = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    eos = tokenizer.eos_token_id
    all_tokens = []
    for text in tqdm(ds["text"], desc="tokenize"):
        all_tokens.extend(tokenizer.encode(text) + [eos])
    n_chunks = len(all_tokens) // chunk_size
    chunks = torch.tensor(all_tokens[: n_chunks * chunk_size], dtype=torch.long)
    return chunks.reshape(n_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, axs = plt.subplots(1, 2, figsize=(12, 4))
    axs[0].plot(range(1, len(losses) + 1), losses)
    axs[0].set_title("training loss")
    axs[0].set_xlabel("step")
    axs[1].plot(range(1, len(grad_norms) + 1), grad_norms)
    axs[1].set_title("gradient norm")
    axs[1].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def load_data(context_length):
    path = f"./datasets/tinystories_10pct_chunk_size_{context_length}.pt"
    if os.path.exists(path):
        return torch.load(path)
    data = get_chunked_tinystories(context_length)
    os.makedirs("./datasets", exist_ok=True)
    torch.save(data, path)
    return data


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data = load_data(model_config.context_length)
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    total_batches = len(data) // batch_size
    total_steps = total_batches if max_steps is None else min(total_batches, max_steps)

    losses, grad_norms = [], []
    step = 0
    progress = tqdm(total=total_steps, desc="train")
    while step < total_steps:
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)

        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        clip_to = float("inf") if gradient_clipping is None else gradient_clipping
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_to)
        optimizer.step()

        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        step += 1
        progress.update(1)
        progress.set_postfix(loss=round(losses[-1], 3), grad_norm=round(grad_norms[-1], 3))
        if step % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    progress.close()
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
