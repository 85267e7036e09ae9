"""A3 (b). Same loop as the handout, through a DataLoader, with a log file next to the script."""
import logging
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm
from datasets import load_dataset
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

logging.basicConfig(
    level=logging.INFO,
    format="[%(levelname)s] %(message)s",
    handlers=[logging.FileHandler("train.log"), logging.StreamHandler(sys.stdout)],
)
logger = logging.getLogger(__name__)

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    ids = []
    for story in tqdm(dataset["text"]):
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    n = len(ids) // chunk_size
    return torch.tensor(ids[: n * chunk_size], dtype=torch.long).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (l, r) = plt.subplots(1, 2, figsize=(10, 4))
    l.plot(losses)
    r.plot(grad_norms)
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)
    loader = DataLoader(TensorDataset(data), batch_size=batch_size, shuffle=False, drop_last=True,
                        num_workers=2, persistent_workers=False)
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    max_norm = float("inf") if gradient_clipping is None else gradient_clipping
    losses, grad_norms = [], []
    for step, (batch,) in enumerate(tqdm(loader, total=max_steps, leave=False)):
        if max_steps is not None and step >= max_steps:
            break
        batch = batch.to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        if step % 25 == 0:
            logger.info("step %d: loss %.4f", step, loss.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    logger.info("done: %d steps, final loss %.4f", len(losses), losses[-1])


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
