# Training loop for A3 part (b). Options for logging/plotting come from the command line,
# e.g. `python train.py --plot_every 5 --quiet`.
import argparse
import os
import sys
import time

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


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--plot_every", type=int, default=10)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--out", default="./losses_and_grad_norms.png")
    return p.parse_args()


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    all_ids = []
    for text in tqdm(dataset["text"]):
        all_ids.extend(tokenizer.encode(text))
        all_ids.append(tokenizer.eos_token_id)
    cut = len(all_ids) - len(all_ids) % chunk_size
    return torch.tensor(all_ids[:cut], dtype=torch.long).view(-1, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(losses)
    a.set_xlabel("step")
    a.set_ylabel("loss")
    b.plot(grad_norms)
    b.set_xlabel("step")
    b.set_ylabel("||g||")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    opts = get_args()
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    max_norm = float("inf") if gradient_clipping is None else gradient_clipping

    losses, grad_norms = [], []
    steps = len(data) // batch_size
    if max_steps:
        steps = min(steps, max_steps)
    start = time.time()
    for step in tqdm(range(steps), disable=opts.quiet, file=sys.stdout):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        if (step + 1) % opts.plot_every == 0:
            plot_results(losses, grad_norms, opts.out)
    plot_results(losses, grad_norms, opts.out)
    if not opts.quiet:
        print(f"{steps} steps in {time.time() - start:.1f}s, final loss {losses[-1]:.3f}")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
