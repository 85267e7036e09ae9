import os
import random
import argparse

import numpy as np
import torch
import matplotlib
matplotlib.use('Agg')
from matplotlib import pyplot as plt
from tqdm import tqdm
from datasets import load_dataset
from transformers import AutoTokenizer

from model_solution import Transformer, ModelConfig


def seed_everything(seed=224):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


device = torch.device('cuda' if torch.cuda.is_available() else
                      'mps' if torch.backends.mps.is_available() else 'cpu')


def get_chunked_tinystories(chunk_size):
    ds = load_dataset('roneneldan/TinyStories', split='train[:10%]')
    tok = AutoTokenizer.from_pretrained('gpt2')
    ids = []
    for ex in tqdm(ds):
        ids.extend(tok(ex['text'])['input_ids'])
        ids.append(tok.eos_token_id)
    ids = ids[: len(ids) // chunk_size * chunk_size]
    return torch.LongTensor(ids).reshape(-1, chunk_size)


def plot_results(losses, grad_norms, save_path):
    plt.figure(figsize=(12, 4))
    plt.subplot(1, 2, 1)
    plt.plot(losses, label='train loss')
    plt.legend()
    plt.subplot(1, 2, 2)
    plt.plot(grad_norms, color='orange', label='grad norm')
    plt.legend()
    plt.savefig(save_path, dpi=100)
    plt.close()


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    path = f'./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt'
    if not os.path.exists(path):
        os.makedirs('datasets', exist_ok=True)
        torch.save(get_chunked_tinystories(model_config.context_length), path)
    data = torch.load(path)

    model = Transformer(model_config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    total = len(data) // batch_size if max_steps is None else min(max_steps, len(data) // batch_size)

    losses, norms = [], []
    pbar = tqdm(range(total), desc='train')
    for i in pbar:
        x = data[i * batch_size:(i + 1) * batch_size].to(device)
        opt.zero_grad(set_to_none=True)
        loss = model.get_loss_on_batch(x)
        loss.backward()
        clip = gradient_clipping if gradient_clipping is not None else float('inf')
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip)
        opt.step()
        losses.append(loss.item())
        norms.append(gn.item())
        pbar.set_postfix(loss=f'{loss.item():.3f}')
        if i % 10 == 9:
            plot_results(losses, norms, './losses_and_grad_norms.png')
    plot_results(losses, norms, './losses_and_grad_norms.png')
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--lr', type=float, required=True)
    parser.add_argument('--clip', type=float, default=1.0)
    parser.add_argument('--bs', type=int, default=16)
    parser.add_argument('--max_steps', type=int, default=100)
    parser.add_argument('--seed', type=int, default=224)
    args = parser.parse_args()
    seed_everything(args.seed)
    cfg = ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257)
    train(args.lr, args.clip, cfg, args.bs, args.max_steps)


if __name__ == '__main__':
    main()
