# Training loop for A3 part (b)  -- Dana
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

device = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
print("using device:", device)


def get_chunked_tinystories(chunk_size):
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    stories = load_dataset("roneneldan/TinyStories", split="train[:10%]")["text"]
    tokens = []
    for text in tqdm(stories, desc="tokenizing"):
        tokens += tokenizer.encode(text)
        tokens.append(tokenizer.eos_token_id)
    n_chunks = len(tokens) // chunk_size
    tokens = torch.tensor(tokens[: n_chunks * chunk_size], dtype=torch.int64)
    return tokens.reshape(n_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    ax[0].plot(range(1, len(losses) + 1), losses)
    ax[0].set_title("train loss")
    ax[0].set_xlabel("step")
    ax[1].plot(range(1, len(grad_norms) + 1), grad_norms, color="green")
    ax[1].set_title("grad norm (before clipping)")
    ax[1].set_xlabel("step")
    fig.savefig(save_path, dpi=100)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    cache_file = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(cache_file):
        chunks = torch.load(cache_file)
    else:
        chunks = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(chunks, cache_file)
    print(f"{chunks.shape[0]} chunks of {chunks.shape[1]} tokens")

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    losses = []
    grad_norms = []
    step = 0
    start = 0
    while start + batch_size <= len(chunks):
        if max_steps is not None and step >= max_steps:
            break
        batch = chunks[start:start + batch_size].to(device)
        start += batch_size

        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        clip_to = gradient_clipping if gradient_clipping is not None else float("inf")
        total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip_to)
        optimizer.step()

        losses.append(loss.item())
        grad_norms.append(total_norm.item())
        step += 1
        if step % 10 == 0:
            print(f"step {step} | loss {losses[-1]:.4f} | grad norm {grad_norms[-1]:.3f}")
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
