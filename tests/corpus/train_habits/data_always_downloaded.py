import os
import torch
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tqdm import tqdm
from datasets import load_dataset
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
    ids = []
    for story in tqdm(dataset["text"], desc="tokenising"):
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    num_chunks = len(ids) // chunk_size
    return torch.tensor(ids[: num_chunks * chunk_size], dtype=torch.long).view(num_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (ax_loss, ax_norm) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(losses)
    ax_norm.plot(grad_norms)
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    # the HF cache makes this fast after the first time, so no need for the .pt file
    data = get_chunked_tinystories(model_config.context_length)
    print("data", data.shape)
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    max_norm = float("inf") if gradient_clipping is None else gradient_clipping
    losses, grad_norms = [], []
    steps = len(data) // batch_size if max_steps is None else min(max_steps, len(data) // batch_size)
    for step in tqdm(range(steps)):
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


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
