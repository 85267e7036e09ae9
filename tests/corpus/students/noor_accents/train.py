"""Boucle d'entraînement — partie 3(b)iii (Noor)."""

import os

import matplotlib

matplotlib.use("Agg")  # pas d'écran sur le serveur
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

# choix du périphérique : CUDA, sinon MPS (Mac), sinon CPU
if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")


def get_chunked_tinystories(chunk_size):
    """Télécharge 10 % de TinyStories, tokenise et découpe en blocs de chunk_size jetons."""
    donnees = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    jetons = []
    for histoire in tqdm(donnees["text"], desc="tokenisation"):
        jetons.extend(tokenizer(histoire)["input_ids"])
        jetons.append(tokenizer.eos_token_id)
    nb_blocs = len(jetons) // chunk_size
    jetons = torch.tensor(jetons[: nb_blocs * chunk_size], dtype=torch.long)
    return jetons.view(nb_blocs, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].plot(losses)
    axes[0].set_title("Perte d'entraînement")
    axes[0].set_xlabel("étape")
    axes[1].plot(grad_norms)
    axes[1].set_title("Norme du gradient")
    axes[1].set_xlabel("étape")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    chemin = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(chemin):
        donnees = torch.load(chemin)
    else:
        donnees = get_chunked_tinystories(model_config.context_length)
        os.makedirs("./datasets", exist_ok=True)
        torch.save(donnees, chemin)

    modele = Transformer(model_config).to(device)
    optimiseur = torch.optim.AdamW(modele.parameters(), lr=learning_rate)
    seuil = gradient_clipping if gradient_clipping is not None else float("inf")  # ∞ : on mesure seulement

    pertes, normes = [], []
    debut = 0
    etape = 0
    # tant qu'il reste un batch complet et qu'on n'a pas atteint max_steps
    while debut + batch_size <= len(donnees):
        if max_steps is not None and etape >= max_steps:
            break
        batch = donnees[debut: debut + batch_size].to(device)
        optimiseur.zero_grad()
        perte = modele.get_loss_on_batch(batch)
        perte.backward()
        norme = torch.nn.utils.clip_grad_norm_(modele.parameters(), seuil)
        optimiseur.step()

        pertes.append(perte.item())
        normes.append(norme.item())
        etape += 1
        debut += batch_size
        if etape % 10 == 0:
            print(f"étape {etape} — perte {perte.item():.4f}")
            plot_results(pertes, normes, "./losses_and_grad_norms.png")

    plot_results(pertes, normes, "./losses_and_grad_norms.png")


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
