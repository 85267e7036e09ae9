"""
A3 (b) iii -- train the small model and plot loss / grad norm.  (Kim)
"""

import json
import os
from dataclasses import asdict

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
    """10% of TinyStories -> one long token stream (eos between stories) -> (num_chunks, chunk_size)."""
    ds = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    stream = []
    for text in tqdm(ds["text"], desc="tokenizing"):
        stream += tokenizer(text)["input_ids"]
        stream.append(tokenizer.eos_token_id)
    n_chunks = len(stream) // chunk_size
    return torch.tensor(stream[: n_chunks * chunk_size], dtype=torch.long).reshape(n_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, axes = plt.subplots(nrows=1, ncols=2, figsize=(12, 4))
    axes[0].plot(losses, color="tab:blue")
    axes[0].set_title("training loss")
    axes[0].set_xlabel("step")
    axes[1].plot(grad_norms, color="tab:red")
    axes[1].set_title("gradient norm")
    axes[1].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    dataset_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(dataset_path):
        data = torch.load(dataset_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, dataset_path)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    n_batches = len(data) // batch_size
    n_steps = n_batches if max_steps is None else min(n_batches, max_steps)

    losses, grad_norms = [], []
    for step in tqdm(range(n_steps), desc="training"):
        batch = data[step * batch_size:(step + 1) * batch_size]
        batch = batch.to(device)

        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=gradient_clipping)
        else:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"))
        optimizer.step()

        losses.append(loss.item())
        grad_norms.append(norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    # write down what this run was, for the bonus part comparisons
    run_name = f"lr{learning_rate}_clip{gradient_clipping}_bs{batch_size}_d{model_config.d_model}"
    with open(f"runs/{run_name}/config.json", "w") as f:
        json.dump({"learning_rate": learning_rate, "gradient_clipping": gradient_clipping,
                   "batch_size": batch_size, "max_steps": max_steps, "model": asdict(model_config),
                   "final_loss": losses[-1]}, f, indent=2)


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
