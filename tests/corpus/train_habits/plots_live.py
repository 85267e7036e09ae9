import os
import torch
import matplotlib.pyplot as plt
from tqdm import trange
from datasets import load_dataset
from transformers import AutoTokenizer
from model_solution import ModelConfig, Transformer

plt.ion()  # live plot while training
PLOT_DIR = "plots"

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
    for story in dataset["text"]:
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    n = len(ids) // chunk_size
    return torch.tensor(ids[: n * chunk_size], dtype=torch.long).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    plt.clf()
    plt.subplot(1, 2, 1)
    plt.plot(losses)
    plt.title(f"loss {losses[-1]:.3f}")
    plt.subplot(1, 2, 2)
    plt.plot(grad_norms)
    plt.title("grad norm")
    plt.savefig(save_path)
    plt.savefig(os.path.join(PLOT_DIR, "latest.png"))
    plt.pause(0.001)
    plt.show(block=False)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    os.makedirs(PLOT_DIR, exist_ok=True)
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    max_norm = float("inf") if gradient_clipping is None else gradient_clipping
    losses, grad_norms = [], []
    steps = len(data) // batch_size if max_steps is None else min(max_steps, len(data) // batch_size)
    for step in trange(steps):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plt.ioff()
    plt.show()


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
