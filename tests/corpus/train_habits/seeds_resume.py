import os
import random
import numpy as np
import torch
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tqdm import tqdm
from datasets import load_dataset
from transformers import AutoTokenizer
from model_solution import ModelConfig, Transformer

SEED = 1337
random.seed(SEED)
np.random.seed(SEED)
torch.manual_seed(SEED)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.use_deterministic_algorithms(True, warn_only=True)

CHECKPOINT = "checkpoint.pt"

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
    for story in tqdm(dataset["text"]):
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    n = len(ids) // chunk_size
    return torch.tensor(ids[: n * chunk_size], dtype=torch.long).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ax[0].plot(losses)
    ax[1].plot(grad_norms)
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    start_step, losses, grad_norms = 0, [], []
    if os.path.exists(CHECKPOINT):  # resume after a Colab disconnect
        state = torch.load(CHECKPOINT, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_step, losses, grad_norms = state["step"], state["losses"], state["grad_norms"]
        print(f"resumed from step {start_step}")

    max_norm = float("inf") if gradient_clipping is None else gradient_clipping
    steps = len(data) // batch_size if max_steps is None else min(max_steps, len(data) // batch_size)
    for step in tqdm(range(start_step, steps), initial=start_step, total=steps):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        if (step + 1) % 20 == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1,
                        "losses": losses, "grad_norms": grad_norms}, CHECKPOINT)
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    torch.save(model.state_dict(), "model_final.pt")
    if os.path.exists(CHECKPOINT):
        os.remove(CHECKPOINT)  # finished: the next run starts fresh


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
