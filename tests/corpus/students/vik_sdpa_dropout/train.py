# training loop for 3(b)iii -- Vik
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
    tokens = []
    for story in tqdm(dataset["text"]):
        tokens.extend(tokenizer.encode(story))
        tokens.append(tokenizer.eos_token_id)
    num_chunks = len(tokens) // chunk_size
    tokens = torch.tensor(tokens[: num_chunks * chunk_size], dtype=torch.long)
    return tokens.reshape(num_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(losses)
    a.set_title("loss")
    b.plot(grad_norms)
    b.set_title("grad norm")
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(path):
        data = torch.load(path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save(data, path)

    model = Transformer(model_config).to(device)
    model.train()  # dropout on
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    losses, grad_norms = [], []
    steps = len(data) // batch_size
    if max_steps is not None:
        steps = min(steps, max_steps)
    for step in tqdm(range(steps)):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is None:
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        else:
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(total_norm.item())
        if step % 10 == 9:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")

    # extra plot of just the loss for the report (bonus section)
    plt.figure()
    plt.plot(losses)
    plt.yscale("log")
    plt.title(f"lr={learning_rate}, clip={gradient_clipping}, dropout={model_config.dropout}")
    plt.savefig(f"plots/loss_lr{learning_rate}_clip{gradient_clipping}.png")
    plt.close()


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
