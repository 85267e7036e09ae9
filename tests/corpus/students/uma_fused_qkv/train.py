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
    ds = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tok = AutoTokenizer.from_pretrained("gpt2")
    ids = []
    for text in tqdm(ds["text"]):
        ids += tok(text)["input_ids"] + [tok.eos_token_id]
    n = len(ids) // chunk_size
    ids = torch.tensor(ids[: n * chunk_size], dtype=torch.long)
    return ids.view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    plt.figure(figsize=(10, 4))
    plt.subplot(121)
    plt.plot(losses)
    plt.xlabel("step")
    plt.ylabel("loss")
    plt.subplot(122)
    plt.plot(grad_norms)
    plt.xlabel("step")
    plt.ylabel("grad norm")
    plt.tight_layout()
    plt.savefig(save_path)
    plt.close()


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_file = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_file):
        data = torch.load(data_file)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, data_file)

    model = Transformer(model_config)
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    losses, grad_norms = [], []
    i = 0
    step = 0
    while i + batch_size <= len(data):
        if max_steps is not None and step >= max_steps:
            break
        x = data[i:i + batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(x)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(
            model.parameters(), gradient_clipping if gradient_clipping is not None else float("inf")
        )
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        step += 1
        i += batch_size
        if step % 10 == 0:
            print(step, loss.item())
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
