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
    for example in tqdm(dataset):
        tokens.extend(tokenizer(example["text"])["input_ids"])
        tokens.append(tokenizer.eos_token_id)
    n = len(tokens) // chunk_size
    return torch.tensor(tokens[: n * chunk_size], dtype=torch.int64).view(-1, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(losses)
    a.set_title("Loss")
    b.plot(grad_norms)
    b.set_title("Grad norm")
    fig.savefig(save_path)
    plt.close(fig)


def grad_norm(parameters):
    # total L2 norm of all gradients (same thing clip_grad_norm_ returns)
    squares = [p.grad.detach().pow(2).sum() for p in parameters if p.grad is not None]
    return torch.sqrt(torch.stack(squares).sum())


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, data_path)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    losses = []
    grad_norms = []
    n_batches = len(data) // batch_size
    if max_steps is None:
        max_steps = n_batches
    for step in range(min(max_steps, n_batches)):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        else:
            norm = grad_norm(model.parameters())  # no clipping, just record it
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
            print(f"step {step + 1}/{max_steps}  loss={loss.item():.3f}  grad_norm={norm.item():.3f}")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    return

    # old: saved plot only at the very end
    plot_results(losses, grad_norms, "losses.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
