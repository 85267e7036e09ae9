#!/usr/bin/env python
# coding: utf-8

# # A3 part (b): train the transformer
# (File > Download as > Python from Jupyter.)

# In[1]:


get_ipython().system('pip install datasets transformers')
get_ipython().run_line_magic('matplotlib', 'inline')
get_ipython().run_line_magic('load_ext', 'autoreload')
get_ipython().run_line_magic('autoreload', '2')


# In[2]:


import os
import torch
import matplotlib.pyplot as plt
from tqdm.auto import tqdm
from datasets import load_dataset
from transformers import AutoTokenizer
from model_solution import ModelConfig, Transformer


# In[3]:


device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
device


# In[4]:


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    ids = []
    for story in tqdm(dataset["text"]):
        ids += tokenizer(story)["input_ids"] + [tokenizer.eos_token_id]
    n = len(ids) // chunk_size
    return torch.tensor(ids[: n * chunk_size]).view(n, chunk_size)


# In[5]:


def plot_results(losses, grad_norms, save_path):
    plt.figure(figsize=(10, 4))
    plt.subplot(121)
    plt.plot(losses)
    plt.subplot(122)
    plt.plot(grad_norms)
    plt.savefig(save_path)
    plt.show()


# In[6]:


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
    losses, grad_norms = [], []
    n_steps = len(data) // batch_size
    if max_steps is not None:
        n_steps = min(n_steps, max_steps)
    for step in tqdm(range(n_steps)):
        batch = data[step * batch_size:(step + 1) * batch_size].to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        if gradient_clipping is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        else:
            grad_norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters() if p.grad is not None))
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(float(grad_norm))
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


# In[7]:


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
