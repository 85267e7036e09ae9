"""Token data from a sparse Markov source whose entropy rate is known exactly.

A report can then say how far a trained model is from the best loss any model can reach:
when every row starts from the stationary distribution, the expected next-token cross entropy
at every position is the chain's entropy rate, whatever the predictor sees of the past.
"""

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class MarkovSource:
    transition: np.ndarray  # (V, V), rows sum to 1
    stationary: np.ndarray  # (V,)

    @property
    def vocab_size(self) -> int:
        return self.transition.shape[0]

    @property
    def entropy_rate(self) -> float:
        """H(X_t | X_{t-1}) in nats: the floor of the mean next-token loss."""
        p = self.transition
        with np.errstate(divide="ignore", invalid="ignore"):
            row_entropy = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        return float(self.stationary @ row_entropy)


def make_source(vocab_size: int, successors: int, seed: int) -> MarkovSource:
    """Each token may be followed by `successors` tokens, with Dirichlet(1) probabilities.

    Token i always has i+1 (mod V) among its successors, so the chain is irreducible; the random
    other edges make it aperiodic in practice, which the stationary solve below verifies.
    """
    if not 2 <= successors <= vocab_size:
        raise ValueError("successors must lie in [2, vocab_size]")
    rng = np.random.default_rng(seed)
    transition = np.zeros((vocab_size, vocab_size))
    for i in range(vocab_size):
        others = np.setdiff1d(np.arange(vocab_size), [(i + 1) % vocab_size])
        nxt = np.concatenate([[(i + 1) % vocab_size], rng.choice(others, successors - 1, replace=False)])
        transition[i, nxt] = rng.dirichlet(np.ones(successors))
    dist = np.full(vocab_size, 1.0 / vocab_size)
    for _ in range(10_000):
        new = dist @ transition
        if np.abs(new - dist).max() < 1e-15:
            break
        dist = new
    else:
        raise ValueError(f"Markov source (seed {seed}) does not mix; choose another seed")
    return MarkovSource(transition=transition, stationary=new / new.sum())


def sample_chunks(source: MarkovSource, num_chunks: int, chunk_len: int, seed: int) -> torch.Tensor:
    """int64 (num_chunks, chunk_len) rows, each started from the stationary distribution."""
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(source.transition, axis=1)
    out = np.empty((num_chunks, chunk_len), dtype=np.int64)
    out[:, 0] = rng.choice(source.vocab_size, size=num_chunks, p=source.stationary)
    for t in range(1, chunk_len):
        u = rng.random(num_chunks)[:, None]
        out[:, t] = (u > cumulative[out[:, t - 1]]).sum(axis=1)
    np.minimum(out, source.vocab_size - 1, out=out)  # guards u above a row's rounded last cumulative
    return torch.from_numpy(out)
