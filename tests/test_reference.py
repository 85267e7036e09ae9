"""The staff reference against an independent oracle (Hugging Face GPT-2) and the handout's properties."""

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from graders.checks.reference import load_reference
from graders.spec import load_spec, spec_path
from graders.checks.synthdata import make_source, sample_chunks

REF = load_reference("reference/a3", ("utils", "model_solution"))
ms = REF.model_solution

# (n_layer, n_head, n_embd, n_positions, vocab): several heads, one head, d_attention 1, odd sizes.
SHAPES = [(3, 4, 16, 12, 50), (2, 1, 8, 10, 37), (2, 6, 6, 7, 29), (1, 3, 15, 9, 41)]


def hf_pair(shape, seed=0):
    n_layer, n_head, n_embd, n_positions, vocab = shape
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=vocab, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False,
                     bos_token_id=0, eos_token_id=0)
    hf = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():  # a spread large enough that LayerNorm and bias mistakes show
            p.normal_(0, 0.3)
    ours = ms.Transformer(ms.ModelConfig(n_embd, n_head, n_layer, n_positions, vocab)).eval()
    ours.load_state_dict(REF.utils.state_dict_converter(hf.state_dict()), strict=True)
    return hf, ours


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"L{s[0]}H{s[1]}D{s[2]}")
def test_logits_match_hugging_face(shape):
    hf, ours = hf_pair(shape)
    for length in (1, shape[3] // 2, shape[3]):
        x = torch.randint(0, shape[4], (3, length), generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            diff = (ours(x) - hf(x).logits).abs().max().item()
        print(f"{shape} T={length}: max |ours - HF| = {diff:.2e}")
        assert diff < 1e-5


@pytest.mark.parametrize("shape", SHAPES[:2], ids=lambda s: f"L{s[0]}H{s[1]}D{s[2]}")
def test_generate_matches_step_by_step_argmax(shape):
    hf, ours = hf_pair(shape, seed=1)
    x = torch.randint(0, shape[4], (2, 3), generator=torch.Generator().manual_seed(5))
    expected = x
    with torch.no_grad():
        for _ in range(shape[3] - 3):
            expected = torch.cat([expected, hf(expected).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    got = ours.generate(x, shape[3] - 3)
    assert got.dtype == torch.int64
    assert torch.equal(got, expected)


def test_loss_matches_shifted_hf_cross_entropy():
    hf, ours = hf_pair(SHAPES[0], seed=2)
    x = torch.randint(0, SHAPES[0][4], (4, 12), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        logits = hf(x).logits
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
    assert abs(ours.get_loss_on_batch(x).item() - expected.item()) < 1e-5
    assert abs(hf(x, labels=x).loss.item() - expected.item()) < 1e-5  # HF's own shift agrees


def test_grader_hf_mapping_is_the_inverse_of_the_converter():
    """The utils check builds GPT-2 weights with to_hf; they must be exactly what HF would hold."""
    import sys
    sys.path.insert(0, "assignment/a3/checks")
    try:
        from test_utils import to_hf
    finally:
        sys.path.remove("assignment/a3/checks")
    hf, ours = hf_pair(SHAPES[0], seed=3)
    rebuilt = to_hf(ours.state_dict(), SHAPES[0][0])
    real = hf.state_dict()
    assert set(rebuilt) == set(real)
    for key in real:
        assert torch.equal(rebuilt[key], real[key]), key


def _random_model(cfg, seed=0):
    torch.manual_seed(seed)
    model = ms.Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model


CFG = ms.ModelConfig(d_model=12, n_heads=3, n_layers=2, context_length=9, vocab_size=20)


def test_causality():
    model = _random_model(CFG)
    x = torch.randint(0, 20, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        base = model(x)
        for t in range(8):
            y = x.clone()
            y[:, t + 1:] = (y[:, t + 1:] + 1) % 20
            assert torch.allclose(model(y)[:, :t + 1], base[:, :t + 1], atol=1e-6)
            assert not torch.allclose(model(y)[:, t + 1:], base[:, t + 1:], atol=1e-3)


def test_one_block_ignores_the_order_of_the_prefix():
    block = ms.DecoderBlock(CFG).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0, 0.3)
        x = torch.randn(2, 9, 12)
        base = block(x)
        for t in range(2, 9):
            perm = torch.cat([torch.randperm(t), torch.arange(t, 9)])
            assert torch.allclose(block(x[:, perm])[:, t], base[:, t], atol=1e-5)


def _unmasked(model):
    for m in model.modules():
        if isinstance(m, ms.CausalAttention):
            m.causal_mask.fill_(1)
    return model


def test_full_equivariance_only_without_mask_and_positions():
    x = torch.randint(0, 20, (2, 9), generator=torch.Generator().manual_seed(1))
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(2))
    model = _unmasked(_random_model(CFG))
    with torch.no_grad():
        assert not torch.allclose(model(x[:, perm]), model(x)[:, perm], atol=1e-3)  # positions break it
        model.position_embeddings.weight.zero_()
        assert torch.allclose(model(x[:, perm]), model(x)[:, perm], atol=1e-5)
        causal = _random_model(CFG)
        causal.position_embeddings.weight.zero_()
        assert not torch.allclose(causal(x[:, perm]), causal(x)[:, perm], atol=1e-3)  # the mask breaks it


def test_training_lowers_heldout_loss_by_a_nat(tmp_path, monkeypatch):
    spec = load_spec(spec_path("a3"))
    tr = spec.training
    source = make_source(tr.model.vocab_size, tr.source_successors, spec.seeds.source)
    data = sample_chunks(source, tr.batch_size * tr.max_steps, tr.model.context_length, spec.seeds.data)
    heldout = sample_chunks(source, tr.heldout_chunks, tr.model.context_length, spec.seeds.data + 1)
    (tmp_path / "datasets").mkdir()
    torch.save(data, tmp_path / tr.data_path)
    monkeypatch.chdir(tmp_path)
    train_mod = load_reference("reference/a3", ("utils", "model_solution", "train")).train
    built = []
    real = train_mod.Transformer

    def recording(cfg):
        torch.manual_seed(0)
        built.append(real(cfg))
        built.append({k: v.clone() for k, v in built[-1].state_dict().items()})
        return built[0]

    monkeypatch.setattr(train_mod, "Transformer", recording)
    train_mod.train(tr.learning_rate, tr.gradient_clipping, train_mod.ModelConfig(**tr.model.model_dump()),
                    tr.batch_size, tr.max_steps)
    model, initial = built
    with torch.no_grad():
        final = model.get_loss_on_batch(heldout).item()
        model.load_state_dict(initial)
        start = model.get_loss_on_batch(heldout).item()
    print(f"held-out loss {start:.3f} -> {final:.3f} (floor {source.entropy_rate:.3f})")
    assert start - final >= 1.0
    assert final > source.entropy_rate - 0.05
    assert abs(start - math.log(tr.model.vocab_size)) < 0.1
    assert (tmp_path / "losses_and_grad_norms.png").read_bytes().startswith(b"\x89PNG")
