import numpy as np
import torch

from graders.checks.synthdata import make_source, sample_chunks


def test_same_seed_same_data():
    a = sample_chunks(make_source(128, 4, 0), 64, 32, 7)
    b = sample_chunks(make_source(128, 4, 0), 64, 32, 7)
    assert a.dtype == torch.int64 and a.shape == (64, 32) and torch.equal(a, b)
    assert not torch.equal(a, sample_chunks(make_source(128, 4, 0), 64, 32, 8))


def test_entropy_rate_is_the_empirical_conditional_entropy():
    source = make_source(128, 4, 0)
    assert np.allclose(source.transition.sum(1), 1) and ((source.transition > 0).sum(1) == 4).all()
    data = sample_chunks(source, 4000, 32, 1).numpy()
    # The cross entropy of the true transition probabilities on sampled data estimates the floor.
    nll = -np.log(source.transition[data[:, :-1], data[:, 1:]]).mean()
    assert abs(nll - source.entropy_rate) < 0.01
    # Every row starts from the stationary distribution, so the floor holds at every position.
    first = np.bincount(data[:, 0], minlength=128) / len(data)
    assert np.abs(first - source.stationary).sum() < 0.25
    print(f"entropy rate {source.entropy_rate:.4f}, empirical {nll:.4f}")
