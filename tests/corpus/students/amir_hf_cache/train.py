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


def get_chunked_tinystories(chunk_size: int) -> torch.Tensor:
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    ids = []
    for story in tqdm(dataset["text"], desc="tokenising"):
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    num_chunks = len(ids) // chunk_size
    return torch.tensor(ids[: num_chunks * chunk_size], dtype=torch.long).view(num_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    axes[0].plot(losses, label="train loss")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("loss")
    axes[0].legend()
    axes[1].plot(grad_norms, color="tab:orange", label="grad norm")
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("||g||")
    axes[1].legend()
    plt.tight_layout()
    plt.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(path):
        print("loading cached dataset from", path)
        data = torch.load(path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, path)

    model = Transformer(model_config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    n_batches = data.shape[0] // batch_size
    total = n_batches if max_steps is None else min(n_batches, max_steps)
    losses = []
    grad_norms = []
    pbar = tqdm(range(total))
    for step in pbar:
        batch = data[step * batch_size: (step + 1) * batch_size].to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        else:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        pbar.set_postfix(loss=f"{loss.item():.3f}")
        if step % 10 == 9:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
