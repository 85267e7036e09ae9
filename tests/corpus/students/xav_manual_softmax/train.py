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

SAVE_EVERY = 10


def get_chunked_tinystories(chunk_size):
    stories = load_dataset("roneneldan/TinyStories", split="train[:10%]")["text"]
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    eos = tokenizer.eos_token_id
    stream = []
    for s in tqdm(stories, desc="tokenizing"):
        stream += tokenizer(s)["input_ids"]
        stream.append(eos)
    usable = (len(stream) // chunk_size) * chunk_size
    return torch.LongTensor(stream[:usable]).view(-1, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig = plt.figure(figsize=(11, 4))
    ax = fig.add_subplot(1, 2, 1)
    ax.plot(losses, marker=".")
    ax.set_title("loss")
    ax.grid(True)
    ax = fig.add_subplot(1, 2, 2)
    ax.plot(grad_norms, marker=".", color="green")
    ax.set_title("gradient norm")
    ax.grid(True)
    fig.savefig(save_path, dpi=100)
    plt.close(fig)


def get_data(context_length):
    filename = "./datasets/tinystories_10pct_chunk_size_%d.pt" % context_length
    if not os.path.isfile(filename):
        os.makedirs("./datasets", exist_ok=True)
        torch.save(get_chunked_tinystories(context_length), filename)
    return torch.load(filename)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data = get_data(model_config.context_length)
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    n_steps = data.size(0) // batch_size
    if max_steps is not None and max_steps < n_steps:
        n_steps = max_steps

    losses = []
    grad_norms = []
    for step in range(n_steps):
        start = step * batch_size
        batch = data[start:start + batch_size].to(device)

        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        clip_to = gradient_clipping if gradient_clipping is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_to)
        optimizer.step()

        losses.append(float(loss))
        grad_norms.append(float(grad_norm))
        print(f"[{step + 1}/{n_steps}] loss={losses[-1]:.4f} |g|={grad_norms[-1]:.3f}")
        if (step + 1) % SAVE_EVERY == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
