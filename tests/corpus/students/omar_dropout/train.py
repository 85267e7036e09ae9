# A3 training script - Omar

import os
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import Transformer, ModelConfig

if torch.cuda.is_available():
    device = "cuda"
elif torch.backends.mps.is_available():
    device = "mps"
else:
    device = "cpu"


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    tokenized = tokenizer(dataset["text"])["input_ids"]
    flat = []
    for ids in tqdm(tokenized):
        flat += ids + [tokenizer.eos_token_id]
    num_chunks = len(flat) // chunk_size
    return torch.LongTensor(flat[: num_chunks * chunk_size]).view(num_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    plt.figure(figsize=(12, 5))
    plt.subplot(121)
    plt.plot(losses)
    plt.xlabel("step")
    plt.ylabel("loss")
    plt.subplot(122)
    plt.plot(grad_norms)
    plt.xlabel("step")
    plt.ylabel("grad norm")
    plt.savefig(save_path)
    plt.close()


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    data_file = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_file):
        data = torch.load(data_file)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_file), exist_ok=True)
        torch.save(data, data_file)
    print(f"{data.shape[0]} chunks of {data.shape[1]} tokens")

    model = Transformer(model_config)
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    num_steps = data.shape[0] // batch_size
    if max_steps is not None:
        num_steps = min(num_steps, max_steps)

    losses = []
    grad_norms = []
    t0 = time.time()
    for step in tqdm(range(num_steps)):
        x = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = model.get_loss_on_batch(x)
        loss.backward()
        if gradient_clipping is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        else:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if step % 10 == 9:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    print(f"done: {num_steps} steps in {time.time() - t0:.1f}s, final loss {losses[-1]:.4f}")

    # keep the weights for the 3(c) comparisons
    run_name = f"lr{learning_rate}_clip{gradient_clipping}_d{model_config.d_model}_L{model_config.n_layers}"
    torch.save(model.state_dict(), f"checkpoints/{run_name}.pt")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
