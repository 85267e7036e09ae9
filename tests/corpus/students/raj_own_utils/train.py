"""
A3 - training
Raj
"""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import Transformer, ModelConfig

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")

    def tokenize(batch):
        return {"ids": [ids + [tokenizer.eos_token_id] for ids in tokenizer(batch["text"])["input_ids"]]}

    tokenized = dataset.map(tokenize, batched=True, remove_columns=dataset.column_names)
    all_ids = [tok for ids in tqdm(tokenized["ids"]) for tok in ids]
    num_chunks = len(all_ids) // chunk_size
    all_ids = torch.tensor(all_ids[: num_chunks * chunk_size], dtype=torch.long)
    return all_ids.view(num_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig = plt.figure(figsize=(12, 4))
    ax1 = fig.add_subplot(1, 2, 1)
    ax1.plot(losses, "b-")
    ax1.set_xlabel("Step")
    ax1.set_ylabel("Loss")
    ax1.grid(True)
    ax2 = fig.add_subplot(1, 2, 2)
    ax2.plot(grad_norms, "r-")
    ax2.set_xlabel("Step")
    ax2.set_ylabel("Gradient norm")
    ax2.grid(True)
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    dataset_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(dataset_path):
        print(f"Loading dataset from {dataset_path}")
        chunks = torch.load(dataset_path)
    else:
        print("Building dataset (this takes a while)")
        chunks = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(chunks, dataset_path)

    train_loader = DataLoader(TensorDataset(chunks), batch_size=batch_size, shuffle=False, drop_last=True)

    model = Transformer(model_config).to(device)
    print(f"Model has {sum(p.numel() for p in model.parameters()):,} parameters")
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    losses = []
    grad_norms = []
    step = 0
    for (batch,) in tqdm(train_loader, total=max_steps or len(train_loader)):
        if max_steps is not None and step >= max_steps:
            break
        batch = batch.to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()

        if gradient_clipping is not None:
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=gradient_clipping)
        else:
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"))

        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(total_norm.item())
        step += 1

        if step % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    print(f"Final loss: {losses[-1]:.4f}")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
