"""Devoir A3 — Transformer décodeur à la GPT-2.

Noor — implémentation « à la main » : chaque tête d'attention est calculée
séparément dans une boucle, c'est plus lent mais beaucoup plus lisible pour moi.

Rappel des dimensions :
    B = taille du batch, T = longueur de la séquence, d = d_model,
    h = nombre de têtes, dₐ = d / h (d_attention).
"""

import math
from dataclasses import dataclass

import einops  # noqa: F401
import huggingface_hub  # noqa: F401
import jaxtyping  # noqa: F401
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GPT2LMHeadModel

from utils import state_dict_converter


@dataclass
class ModelConfig:
    d_model: int
    n_heads: int
    n_layers: int
    context_length: int
    vocab_size: int


class CausalAttention(nn.Module):
    """Attention causale multi-têtes.

    Pour chaque tête : scores = q·kᵀ / √dₐ, masque causal (les positions
    futures reçoivent −∞), softmax sur les clés, puis somme pondérée des valeurs.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        n = config.context_length
        masque = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        # non persistant : le masque ne doit pas apparaître dans le state_dict
        self.register_buffer("causal_mask", masque, persistent=False)

    def forward(self, x):
        B, T, d = x.shape
        h, da = self.n_heads, self.d_attention
        # projections (B, T, d) → (B, T, h, dₐ)
        requetes = self.W_q(x).view(B, T, h, da)
        cles = self.W_k(x).view(B, T, h, da)
        valeurs = self.W_v(x).view(B, T, h, da)

        futur = self.causal_mask[0, 0, :T, :T] == 0  # True là où il faut masquer
        sorties = []
        for tete in range(h):
            q = requetes[:, :, tete, :]  # (B, T, dₐ)
            k = cles[:, :, tete, :]
            v = valeurs[:, :, tete, :]
            scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(da)  # (B, T, T)
            scores.masked_fill_(futur, float("-inf"))  # en place : « scores » est un tenseur neuf
            poids = torch.softmax(scores, dim=-1)
            sorties.append(torch.bmm(poids, v))  # (B, T, dₐ)

        # on recolle les têtes dans l'ordre → (B, T, d), puis projection de sortie
        concat = torch.cat(sorties, dim=-1)
        return self.W_o(concat)


class GELU(nn.Module):
    """The tanh approximation GPT-2 uses."""

    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    """Réseau position par position : d → 4·d → d."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x):
        return self.fc2(self.gelu(self.fc1(x)))


class DecoderBlock(nn.Module):
    """Bloc « pre-norm » comme dans GPT-2 : LayerNorm avant chaque sous-couche."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x):
        y = x + self.attention(self.pre_layer_norm(x))  # connexion résiduelle n°1
        return y + self.mlp(self.post_layer_norm(y))  # connexion résiduelle n°2


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
        self.backbone = nn.ModuleList([DecoderBlock(config) for _ in range(config.n_layers)])
        self.final_layer_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self) -> None:
        """Initialisation GPT-2 : poids ~ 𝒩(0, 0,02²), biais à zéro, LayerNorm à (1, 0)."""
        for nom, p in self.named_parameters():
            if "layer_norm" in nom:
                if nom.endswith("weight"):
                    nn.init.ones_(p)
                else:
                    nn.init.zeros_(p)
            elif nom.endswith("bias"):
                nn.init.zeros_(p)
            else:  # Linear et Embedding
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, x):
        B, T = x.shape
        positions = torch.arange(T, device=x.device).unsqueeze(0)  # (1, T) — diffusé sur le batch
        h = self.embeddings(x) + self.position_embeddings(positions)
        for bloc in self.backbone:
            h = bloc(h)
        h = self.final_layer_norm(h)
        return self.lm_head(h)  # logits (B, T, V), pas de softmax ici

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        """Décodage glouton : on ajoute l'argmax de la dernière position, num_new_tokens fois."""
        sequence = x
        for _ in range(num_new_tokens):
            fenetre = sequence[:, -self.config.context_length:]  # au-delà, plus de position apprise
            logits = self(fenetre)
            suivant = logits[:, -1, :].argmax(dim=-1, keepdim=True)  # (B, 1)
            sequence = torch.cat((sequence, suivant), dim=1)
        return sequence

    def get_loss_on_batch(self, input_ids):
        """Entropie croisée moyenne : les positions 0‥T−2 prédisent les jetons 1‥T−1."""
        entrees = input_ids[:, :-1]
        cibles = input_ids[:, 1:]
        logits = self(entrees)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), cibles.reshape(-1))

    @classmethod
    def from_pretrained(cls) -> "Transformer":
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
