"""CS224N A3 -- training script. Run: python train.py --lr 3e-4 --steps 200"""
import argparse
import logging
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

parser = argparse.ArgumentParser(description="Train the A3 transformer on TinyStories")
parser.add_argument("--lr", type=float, default=1e-5)
parser.add_argument("--clip", type=float, default=1.0)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--context", type=int, default=512)
parser.add_argument("--log_every", type=int, default=10)
args = parser.parse_args()

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("a3")

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
log.info("using device %s", device)


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    tokens = []
    for story in tqdm(dataset["text"], desc="tokenizing"):
        tokens += tokenizer(story)["input_ids"] + [tokenizer.eos_token_id]
    n = len(tokens) // chunk_size
    return torch.tensor(tokens[: n * chunk_size]).view(n, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].plot(losses)
    axes[0].set_title("loss")
    axes[1].plot(grad_norms)
    axes[1].set_title("grad norm")
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, data_path)
    log.info("data: %s", tuple(data.shape))

    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    losses, grad_norms = [], []
    num_steps = len(data) // batch_size
    if max_steps is not None:
        num_steps = min(num_steps, max_steps)
    for step in range(num_steps):
        batch = data[step * batch_size : (step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        else:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if step % args.log_every == 0:
            log.info("step %d loss %.4f grad norm %.3f", step, loss.item(), norm.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    log.info("final loss %.4f", losses[-1])


if __name__ == "__main__":
    config = ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=args.context, vocab_size=50257)
    train(learning_rate=args.lr, gradient_clipping=args.clip, model_config=config,
          batch_size=args.batch_size, max_steps=args.steps)
