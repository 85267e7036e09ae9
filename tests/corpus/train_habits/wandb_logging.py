import os
import math

import torch
import wandb
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tqdm.auto import tqdm
from datasets import load_dataset
from transformers import AutoTokenizer

from model_solution import Transformer, ModelConfig

os.environ["WANDB_PROJECT"] = "cs224n-a3"
wandb.login()

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
        tokens.extend(tokenizer(story)["input_ids"])
        tokens.append(tokenizer.eos_token_id)
    n = len(tokens) // chunk_size
    return torch.tensor(tokens[: n * chunk_size]).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ax[0].plot(losses)
    ax[0].set_title("Loss")
    ax[1].plot(grad_norms)
    ax[1].set_title("Gradient norm")
    fig.savefig(save_path)
    wandb.log({"curves": wandb.Image(fig)})
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    run = wandb.init(project="cs224n-a3", name=f"lr{learning_rate}",
                     config={"lr": learning_rate, "clip": gradient_clipping, "batch_size": batch_size,
                             "d_model": model_config.d_model, "n_layers": model_config.n_layers})
    print("run config:", dict(wandb.config))
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)

    model = Transformer(model_config).to(device)
    wandb.watch(model, log="gradients", log_freq=10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=wandb.config.lr)

    losses, grad_norms = [], []
    steps = len(data) // batch_size
    if max_steps is not None:
        steps = min(steps, max_steps)
    for step in tqdm(range(steps)):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        max_norm = gradient_clipping if gradient_clipping is not None else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        run.log({"train/loss": loss.item(), "train/grad_norm": grad_norm.item()}, step=step)
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    run.summary["final_loss"] = losses[-1]
    torch.save(model.state_dict(), os.path.join(wandb.run.dir, "model.pt"))
    wandb.finish()


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
