import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

if torch.cuda.is_available():
    device = "cuda"
elif torch.backends.mps.is_available():
    device = "mps"
else:
    device = "cpu"


def get_chunked_tinystories(chunk_size):
    data = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    token_ids = []
    for sample in tqdm(data, desc="tokenize"):
        token_ids.extend(tokenizer.encode(sample["text"]) + [tokenizer.eos_token_id])
    n = len(token_ids) // chunk_size
    chunks = torch.tensor(token_ids[: n * chunk_size], dtype=torch.long)
    return chunks.view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, axs = plt.subplots(1, 2, figsize=(12, 4))
    axs[0].plot(losses)
    axs[0].set_title("loss")
    axs[1].plot(grad_norms)
    axs[1].set_title("grad norm")
    for ax in axs:
        ax.set_xlabel("step")
        ax.grid(True)
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_file = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_file):
        data = torch.load(data_file)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, data_file)

    loader = DataLoader(TensorDataset(data), batch_size=batch_size, shuffle=False, drop_last=True)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    losses = []
    grad_norms = []
    step = 0
    for (batch,) in tqdm(loader):
        batch = batch.to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        else:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        optimizer.step()

        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        step += 1
        if step % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
        if max_steps is not None and step >= max_steps:
            break

    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    print("final loss:", losses[-1])


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
