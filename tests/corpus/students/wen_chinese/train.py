"""训练脚本：在 TinyStories 上训练 100 步，画出损失和梯度范数。"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

# 选择设备：优先 GPU，其次苹果的 mps，最后 CPU
if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")


def get_chunked_tinystories(chunk_size):
    """下载 TinyStories 的 10%，用 GPT-2 的分词器分词，然后切成 chunk_size 长的块。"""
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    所有_token = []
    for 故事 in tqdm(dataset["text"], desc="分词中"):
        所有_token.extend(tokenizer(故事)["input_ids"])
        所有_token.append(tokenizer.eos_token_id)  # 每个故事后面加结束符
    块数 = len(所有_token) // chunk_size
    所有_token = 所有_token[: 块数 * chunk_size]
    return torch.tensor(所有_token, dtype=torch.long).view(块数, chunk_size)


def plot_results(losses, grad_norms, save_path):
    """左边画损失，右边画梯度范数。"""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    axes[0].plot(losses)
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("loss")
    axes[1].plot(grad_norms)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("grad norm")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    # 1. 读数据（有缓存就直接读）
    路径 = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(路径):
        data = torch.load(路径)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(data, 路径)

    # 2. 模型和优化器
    model = Transformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    # 3. 按 batch_size 切成批次（最后不满的一批丢掉）
    批次列表 = list(torch.split(data, batch_size))
    if len(批次列表) > 0 and 批次列表[-1].shape[0] < batch_size:
        批次列表 = 批次列表[:-1]

    losses, grad_norms = [], []
    for step, batch in enumerate(tqdm(批次列表)):
        if max_steps is not None and step >= max_steps:
            break  # 到达最大步数就停
        batch = batch.to(device)
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(batch)
        loss.backward()
        # gradient_clipping 为 None 时不裁剪，只记录范数
        最大范数 = float("inf") if gradient_clipping is None else gradient_clipping
        范数 = torch.nn.utils.clip_grad_norm_(model.parameters(), 最大范数)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(范数.item())
        if (step + 1) % 10 == 0:
            plot_results(losses, grad_norms, "./losses_and_grad_norms.png")  # 每 10 步存一次图
    plot_results(losses, grad_norms, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
