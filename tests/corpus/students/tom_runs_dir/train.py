"""
Training script for A3, part 3(b)iii.

Every run gets a name (learning rate, batch size, clipping and a timestamp) so I can keep track
of the runs for the bonus part; the config of a run is written to runs/<run name>/config.json.
"""

import json
import os
import time
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
print(f"using device: {device}")

PLOT_PATH = "./losses_and_grad_norms.png"


def get_chunked_tinystories(chunk_size: int) -> torch.Tensor:
    """Download 10% of TinyStories, tokenize it with the GPT-2 tokenizer and cut it into chunks."""
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")

    token_ids = []
    for example in tqdm(dataset, desc="Tokenizing"):
        token_ids.extend(tokenizer(example["text"])["input_ids"])
        token_ids.append(tokenizer.eos_token_id)

    n_chunks = len(token_ids) // chunk_size
    token_ids = token_ids[: n_chunks * chunk_size]
    return torch.tensor(token_ids, dtype=torch.long).view(n_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    """Loss on the left, gradient norm on the right."""
    fig, axs = plt.subplots(nrows=1, ncols=2, figsize=(12, 5))
    axs[0].plot(range(1, len(losses) + 1), losses)
    axs[0].set_title("Training loss")
    axs[0].set_xlabel("Step")
    axs[0].set_ylabel("Cross entropy")
    axs[1].plot(range(1, len(grad_norms) + 1), grad_norms, color="red")
    axs[1].set_title("Gradient norm (before clipping)")
    axs[1].set_xlabel("Step")
    axs[1].set_ylabel("L2 norm")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def load_data(context_length: int) -> torch.Tensor:
    path = f"./datasets/tinystories_10pct_chunk_size_{context_length}.pt"
    if os.path.exists(path):
        return torch.load(path)
    data = get_chunked_tinystories(context_length)
    os.makedirs("./datasets", exist_ok=True)
    torch.save(data, path)
    return data


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    run_name = f"lr{learning_rate}_bs{batch_size}_clip{gradient_clipping}_{time.strftime('%Y%m%d-%H%M%S')}"

    data = load_data(model_config.context_length)
    n_batches = len(data) // batch_size
    if max_steps is not None:
        n_batches = min(n_batches, max_steps)

    model = Transformer(model_config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    losses = []
    grad_norms = []
    progress = tqdm(range(n_batches), desc=run_name)
    for step in progress:
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)

        optimizer.zero_grad(set_to_none=True)
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=gradient_clipping)
        else:
            # no clipping: an infinite max norm just returns the norm
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"))
        optimizer.step()

        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        progress.set_postfix(loss=round(loss.item(), 4), grad_norm=round(grad_norm.item(), 3))

        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, PLOT_PATH)

    plot_results(losses, grad_norms, PLOT_PATH)
    print(f"final loss: {losses[-1]:.4f}" if losses else "no steps taken")

    # keep the hyperparameters of this run next to its results
    config = {
        "learning_rate": learning_rate,
        "gradient_clipping": gradient_clipping,
        "batch_size": batch_size,
        "max_steps": max_steps,
        "model_config": asdict(model_config),
        "final_loss": losses[-1] if losses else None,
    }
    with open(os.path.join("runs", run_name, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    train(
        learning_rate=1e-5,
        gradient_clipping=1,
        batch_size=16,
        max_steps=100,
        model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257),
    )
