# a3 train.py -- I compared trackers for the project, so all three are still wired in
import comet_ml  # comet wants to be imported before torch
import os
import mlflow
import neptune
import swanlab
import torch
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tqdm import tqdm
from datasets import load_dataset
from transformers import AutoTokenizer
from model_solution import ModelConfig, Transformer

TRACK = {"mlflow": True, "comet": True, "neptune": True, "swanlab": True}

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")

mlflow.set_tracking_uri("file:./mlruns")
mlflow.set_experiment("a3-tinystories")


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
    params = {"learning_rate": learning_rate, "gradient_clipping": gradient_clipping, "batch_size": batch_size}
    experiment = comet_ml.Experiment(api_key=os.environ.get("COMET_API_KEY"), project_name="a3")
    experiment.log_parameters(params)
    nrun = neptune.init_run(project="me/a3", api_token=os.environ.get("NEPTUNE_API_TOKEN"))
    nrun["parameters"] = params
    swanlab.init(project="a3", config=params)

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
    with mlflow.start_run(run_name="baseline"):
        mlflow.log_params(params)
        for step in tqdm(range(steps)):
            batch = data[step * batch_size:(step + 1) * batch_size].to(device)
            optimizer.zero_grad()
            loss = model.get_loss_on_batch(batch)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            losses.append(loss.item())
            grad_norms.append(grad_norm.item())
            if TRACK["mlflow"]:
                mlflow.log_metric("loss", loss.item(), step=step)
            if TRACK["comet"]:
                experiment.log_metric("loss", loss.item(), step=step)
            if TRACK["neptune"]:
                nrun["train/loss"].append(loss.item())
            if TRACK["swanlab"]:
                swanlab.log({"loss": loss.item(), "grad_norm": grad_norm.item()})
            if (step + 1) % 10 == 0:
                plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
        plot_results(losses, grad_norms, "./losses_and_grad_norms.png")
        mlflow.log_artifact("./losses_and_grad_norms.png")
    experiment.end()
    nrun.stop()
    swanlab.finish()


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
