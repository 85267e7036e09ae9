"""A3 (b) training script."""
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

PLOT_PATH = "./losses_and_grad_norms.png"


def get_chunked_tinystories(chunk_size):
    ds = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tok = AutoTokenizer.from_pretrained("gpt2")
    eos = tok.eos_token_id
    flat = []
    for example in tqdm(ds):
        flat.extend(tok(example["text"])["input_ids"])
        flat.append(eos)
    usable = (len(flat) // chunk_size) * chunk_size
    return torch.LongTensor(flat[:usable]).view(-1, chunk_size)


def plot_results(losses, grad_norms, save_path):
    plt.figure(figsize=(12, 5))
    plt.subplot(121)
    plt.plot(losses)
    plt.xlabel("step")
    plt.ylabel("cross entropy")
    plt.title("Loss")
    plt.subplot(122)
    plt.plot(grad_norms, "r")
    plt.xlabel("step")
    plt.title("Gradient norm")
    plt.tight_layout()
    plt.savefig(save_path)
    plt.close()


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(path):
        dataset = torch.load(path)
    else:
        dataset = get_chunked_tinystories(model_config.context_length)
        os.makedirs("datasets", exist_ok=True)
        torch.save(dataset, path)

    model = Transformer(model_config)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    n_steps = len(dataset) // batch_size
    if max_steps is not None:
        n_steps = min(n_steps, max_steps)

    losses, grad_norms = [], []
    for step in range(n_steps):
        x = dataset[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(x)
        loss.backward()
        if gradient_clipping is None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"))
        else:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=gradient_clipping)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if step % 10 == 9:
            print(f"[{step + 1}/{n_steps}] loss={loss.item():.4f}")
            plot_results(losses, grad_norms, PLOT_PATH)
    plot_results(losses, grad_norms, PLOT_PATH)

    # keep the trained weights around for generating afterwards
    torch.save(model.state_dict(), "checkpoints/final.pt")
    print("saved checkpoint")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
