"""The known-mistake fingerprints (assignment/a3/checks/a3_fingerprints.py) on the trusted side alone:
each can fire, none fires on the reference, no two can be mistaken for each other on the cases the
checks start with, and the matching rule says nothing when in doubt. The graded corpus
(tests/test_corpus.py) shows they name real students' bugs through real workers."""

import math
import sys

import pytest
import torch

from graders.checking import Fingerprint, diagnose, shape_diagnosis, tolerance
from graders.reference import REPO, load_reference

sys.path.insert(0, str(REPO / "assignment" / "a3" / "checks"))
import a3_checklib as lib  # noqa: E402
import a3_fingerprints as fp  # noqa: E402

REF = load_reference("reference/a3", ("utils", "model_solution")).model_solution
# Several heads, batch > 1, T < context; the last with a vocabulary smaller than the context, so
# that token ids can index the position table (one mistake needs that to run at all).
CASES = lib.EXPLICIT[:1] + (lib.Case(15, 5, 2, 9, 31, 3, 7, 4), lib.Case(12, 3, 2, 9, 7, 2, 6, 5))


def _model(cls: str, case: lib.Case) -> torch.nn.Module:
    module = getattr(REF, cls)(REF.ModelConfig(**case.config))
    state = lib.random_state(module, lib.generator(case, 0, 1))
    module.load_state_dict(state)
    return module.double().eval()


def _families(case: lib.Case) -> dict[str, tuple[torch.Tensor, list[Fingerprint]]]:
    """Per method: the reference's output on a random input and the fingerprints for that input."""
    gen = lib.generator(case, 1, 1)
    x = lib.activations(case, gen).double()
    ids = lib.tokens(case, gen)
    mlp, attn, block, model = (_model(c, case) for c in ("MLP", "CausalAttention", "DecoderBlock", "Transformer"))
    n = 3
    prompt = ids[:, :case.context_length - n]
    greedy = model.generate(prompt, n)
    with torch.no_grad():
        return {
            "mlp": (mlp(x), fp.mlp(mlp, x)),
            "attention": (attn(x), fp.attention(attn, x)),
            "block": (block(x), fp.block(block.attention, block.mlp, block.pre_layer_norm, block.post_layer_norm, x)),
            "forward": (model(ids), fp.forward(model.embeddings.weight, model.position_embeddings.weight,
                                               list(model.backbone), model.final_layer_norm, model.lm_head.weight, ids)),
            "generate": (greedy.double(), fp.generate(model, prompt, n)),
            "loss": (lib.next_token_loss(model(ids), ids), fp.loss(model, ids)),
        }


@pytest.fixture(scope="module", params=range(len(CASES)), ids=lambda i: repr(CASES[i]))
def families(request):
    return _families(CASES[request.param])


def _outputs(prints: list[Fingerprint]) -> list[tuple[Fingerprint, torch.Tensor]]:
    """Those that run on this case, with their outputs (a mistake that crashes here matches nothing)."""
    out = []
    for f in prints:
        try:
            with torch.no_grad():
                out.append((f, f.output().double()))
        except IndexError:
            pass
    return out


def test_every_fingerprint_runs_somewhere():
    ran = {f.id for case in CASES for _, prints in _families(case).values() for f, _ in _outputs(prints)}
    every = {f.id for _, prints in _families(CASES[0]).values() for f in prints}
    assert every - ran == set()


def _far(a: torch.Tensor, b: torch.Tensor, margin: float = 10) -> bool:
    return a.shape != b.shape or float((a - b).abs().max()) > margin * tolerance(b)


def test_every_fingerprint_differs_from_the_reference_and_from_every_other(families):
    """Outside the tolerance of the reference (the exact GELU is only 2x outside it: the checks'
    tolerance is what fails it), and 10x the tolerance from each other on these cases: a match to
    one is never within reach of another."""
    for family, (reference, prints) in families.items():
        outputs = [(f.id, out) for f, out in _outputs(prints)]
        for name, out in outputs:
            far = _far(out, reference.double(), margin=1)
            assert far, f"{family}: {name} is the reference's output here"
        for i, (a, out_a) in enumerate(outputs):
            for b, out_b in outputs[i + 1:]:
                apart = a == b or _far(out_a, out_b)
                assert apart, f"{family}: {a} and {b} give the same output"
        assert diagnose(reference.double(), prints) is None, family


def test_each_fingerprint_names_itself(families):
    """An output that is exactly one mistake's, up to float32 rounding, gets that mistake's name."""
    for family, (_, prints) in families.items():
        for f, out in _outputs(prints):
            got = diagnose(out.float().double(), prints)  # as the student's float32 computation gives it
            assert got is not None and got.id == f.id, f"{family}: {f.id} diagnosed as {got}"
            assert got.explanation == fp.EXPLANATIONS[f.id]


def test_in_doubt_no_diagnosis():
    x = torch.randn(2, 3, dtype=torch.float64)
    same = [Fingerprint("a", "A", lambda: x), Fingerprint("b", "B", lambda: x.clone())]
    assert diagnose(x, same) is None  # two mistakes fit: say neither
    assert diagnose(x, [Fingerprint("a", "A", lambda: x), Fingerprint("a", "A", lambda: x + 1)]).id == "a"

    def crash() -> torch.Tensor:
        raise IndexError("position past the table")

    def our_bug() -> torch.Tensor:
        raise TypeError("a fingerprint of ours that is broken")

    broken = [Fingerprint("crash", "", crash), Fingerprint("bug", "", our_bug),
              Fingerprint("nan", "", lambda: torch.full_like(x, math.nan)),
              Fingerprint("shape", "", lambda: x[:1]), Fingerprint("empty", "", lambda: x[:0])]
    assert diagnose(x, broken) is None and diagnose(x[:0], broken) is None
    assert diagnose(x, broken + [Fingerprint("ok", "OK", lambda: x + 1e-9)]).id == "ok"


def test_shape_explanations_are_unambiguous():
    assert shape_diagnosis((2, 3, 5, 4), fp.attention_shapes(2, 5, 12, 3)).id == "attn_heads_not_merged"
    assert shape_diagnosis((2, 5, 12), fp.attention_shapes(2, 5, 12, 3)) is None
    assert shape_diagnosis((2, 6), fp.generate_shapes(2, 4, 3)).id == "generate_one_short"
    assert shape_diagnosis((2, 3), fp.generate_shapes(2, 4, 3)).id == "generate_only_new_tokens"
    # T = 1: one short and only-new both give (B, n): which one it is cannot be told
    assert shape_diagnosis((2, 3), fp.generate_shapes(2, 1, 3)) is None
    assert shape_diagnosis((12,), fp.loss_shapes(3, 5)).id == shape_diagnosis((3, 4), fp.loss_shapes(3, 5)).id \
        == "loss_not_reduced"
    assert shape_diagnosis((2, 5, 12), fp.logits_shapes(2, 5, 12)).id == "forward_no_lm_head"


def test_nan_explained_only_when_whole_positions_are_nan():
    out = torch.randn(2, 5, 4)
    assert fp.attention_nan(out) is None
    out[:, 0] = math.nan
    assert fp.attention_nan(out).id == "attn_row_fully_masked"
    out[0, 3, 1] = math.nan  # a stray NaN elsewhere: another cause
    assert fp.attention_nan(out) is None
    assert fp.attention_nan(torch.full((2, 5, 4), math.nan)) is None  # everything NaN says nothing


def test_every_explanation_is_used():
    """No dead explanations: each is a fingerprint's, a shape's, a NaN pattern's or a check's own."""
    case = CASES[0]
    ids = {f.id for _, prints in _families(case).values() for f in prints}
    ids |= {name for shapes in (fp.attention_shapes(2, 5, 12, 3), fp.generate_shapes(2, 4, 3), fp.loss_shapes(3, 5),
                                fp.logits_shapes(2, 5, 12)) for _, name, _ in shapes}
    checks = "".join(p.read_text() for p in (REPO / "assignment" / "a3" / "checks").glob("test_*.py"))
    ids |= {name for name in fp.EXPLANATIONS if f'fp.known("{name}")' in checks}
    ids.add("attn_row_fully_masked")
    assert set(fp.EXPLANATIONS) == ids
