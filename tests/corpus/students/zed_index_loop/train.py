import math
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


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    ids = []
    for i in tqdm(range(len(dataset))):
        ids.extend(tokenizer(dataset[i]["text"])["input_ids"])
        ids.append(tokenizer.eos_token_id)
    n = len(ids) // chunk_size
    return torch.tensor(ids[: n * chunk_size]).long().view(n, chunk_size)
    print("done tokenizing", n, "chunks")


def plot_results(losses, grad_norms, save_path):
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ax[0].plot(losses)
    ax[0].set_title("Loss")
    ax[1].plot(grad_norms)
    ax[1].set_title("Grad norm")
    plt.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(path):
        data = torch.load(path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, path)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    clip = math.inf if gradient_clipping is None else gradient_clipping

    num_batches = len(data) // batch_size
    n = num_batches if max_steps is None else min(max_steps, num_batches)
    losses = []
    grad_norms = []
    for i in tqdm(range(n)):
        batch = data[i * batch_size:(i + 1) * batch_size]
        batch = batch.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if (i + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    return
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
