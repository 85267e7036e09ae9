"""A3 training script: python train.py --data_dir /scratch/me/tinystories --lr 1e-4"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

parser = argparse.ArgumentParser()
parser.add_argument("--data_dir", required=True, help="where the tokenised dataset is cached")
parser.add_argument("--lr", type=float, default=1e-5)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    ids = []
    for story in tqdm(dataset["text"]):
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    n = len(ids) // chunk_size
    return torch.tensor(ids[: n * chunk_size], dtype=torch.long).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(losses)
    ax2.plot(grad_norms)
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("datasets", exist_ok=True)
        torch.save(data, data_path)
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    clip = float("inf") if gradient_clipping is None else gradient_clipping
    losses, grad_norms = [], []
    for step in range(min(max_steps or 10**9, len(data) // batch_size)):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        grad_norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), clip).item())
        optimizer.step()
        losses.append(loss.item())
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=args.lr, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
