"""A3 training, the fast way: mixed precision, torch.compile, warmup + cosine schedule."""
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from torch.optim.lr_scheduler import LambdaLR
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

torch.set_float32_matmul_precision("high")
torch.backends.cuda.matmul.allow_tf32 = True

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
USE_AMP = device.type == "cuda"
AMP_DTYPE = torch.bfloat16 if USE_AMP and torch.cuda.is_bf16_supported() else torch.float16
WARMUP = 5


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
    ax_loss.set_yscale("log")
    ax_norm.plot(grad_norms)
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def lr_lambda(total_steps):
    def f(step):
        if step < WARMUP:
            return (step + 1) / WARMUP
        progress = (step - WARMUP) / max(1, total_steps - WARMUP)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
    return f


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)

    model = Transformer(model_config).to(device)
    model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95), fused=False)
    num_batches = len(data) // batch_size
    steps = num_batches if max_steps is None else min(max_steps, num_batches)
    scheduler = LambdaLR(optimizer, lr_lambda(steps))
    scaler = torch.amp.GradScaler(device.type, enabled=USE_AMP and AMP_DTYPE == torch.float16)
    max_norm = float("inf") if gradient_clipping is None else gradient_clipping

    losses, grad_norms, lrs = [], [], []
    for step in tqdm(range(steps), desc="training"):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=AMP_DTYPE, enabled=USE_AMP):
            loss = model.get_loss_on_batch(batch)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
        lrs.append(scheduler.get_last_lr()[0])
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
