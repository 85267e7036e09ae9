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
    stories = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    buf = []
    for s in tqdm(stories["text"]):
        buf += tokenizer(s)["input_ids"] + [tokenizer.eos_token_id]
    n_chunks = len(buf) // chunk_size
    return torch.tensor(buf[: n_chunks * chunk_size], dtype=torch.long).view(n_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(losses, label="loss")
    a.set_xlabel("step")
    a.legend()
    b.plot(grad_norms, label="grad norm", color="purple")
    b.set_xlabel("step")
    b.legend()
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def grad_norm(parameters):
    # total L2 norm over all gradients (what clip_grad_norm_ would report)
    norms = [p.grad.detach().norm(2) for p in parameters if p.grad is not None]
    return torch.norm(torch.stack(norms), 2)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.isfile(path):
        data = torch.load(path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, path)

    model = Transformer(model_config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    steps = len(data) // batch_size
    if max_steps is not None:
        steps = min(steps, max_steps)

    losses, grad_norms = [], []
    for step in tqdm(range(steps)):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is None:
            norm = grad_norm(model.parameters())  # no clipping, just record it
        else:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
