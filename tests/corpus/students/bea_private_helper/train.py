"""Training loop (3(b)iii) -- Bea."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
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
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    all_ids = []
    for story in tqdm(dataset["text"]):
        all_ids += tokenizer(story)["input_ids"]
        all_ids.append(tokenizer.eos_token_id)
    n = len(all_ids) // chunk_size
    return torch.tensor(all_ids[: n * chunk_size]).long().reshape(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    plt.figure(figsize=(11, 4))
    plt.subplot(1, 2, 1)
    plt.plot(losses)
    plt.title("loss")
    plt.subplot(1, 2, 2)
    plt.plot(grad_norms)
    plt.title("grad norm")
    plt.savefig(save_path)
    plt.close()


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    fname = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if not os.path.exists(fname):
        chunks = get_chunked_tinystories(model_config.context_length)
        os.makedirs("datasets", exist_ok=True)
        torch.save(chunks, fname)
    else:
        chunks = torch.load(fname)

    loader = DataLoader(chunks, batch_size=batch_size, shuffle=False, drop_last=True)
    model = Transformer(model_config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    clip = float("inf") if gradient_clipping is None else gradient_clipping

    losses, grad_norms = [], []
    for i, batch in enumerate(loader):
        if max_steps is not None and i >= max_steps:
            break
        batch = batch.to(device)
        opt.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
        grad_norms.append(gn.item())
        if (i + 1) % 10 == 0:
            print(f"step {i + 1}: loss {loss.item():.4f}")
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
