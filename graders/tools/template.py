"""The public test fixtures of the student template, generated from the staff reference.

    python -m graders.tools.template student_template          # (re)write student_template/tests/data/
    python -m graders.tools.template --export OUT              # copy the template to OUT, fixtures regenerated

The fixtures are snapshots for one small public configuration, on random weights (LayerNorms
and biases included, since default init hides bugs), computed by the float64 reference and
stored as float32. They share nothing with the hidden checks: not the configuration, not the
seed, not the way weights are drawn. The same command writes the same bytes every time.
"""

import argparse
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

from graders.checks.reference import load_reference
from graders.paths import REPO

TEMPLATE = REPO / "student_template"
DATA = Path("tests") / "data"
REFERENCE_DIR = "reference/a3"

CONFIG = dict(d_model=20, n_heads=4, n_layers=2, context_length=12, vocab_size=29)
SEED = 4_011_873
# Greedy steps of the generate snapshot must win by this much in float64, so float32 in any
# correct order picks the same tokens.
MIN_MARGIN = 0.05
# Not copied by --export: what running the template leaves behind.
EXPORT_IGNORE = shutil.ignore_patterns(
    "__pycache__", ".pytest_cache", ".hypothesis", "submission.zip", "datasets", "*.png", "*.pyc"
)


def _random_state(model: torch.nn.Module, gen: torch.Generator) -> dict[str, torch.Tensor]:
    state = {}
    for name, p in model.named_parameters():
        u = torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1  # uniform in [-1, 1)
        if "layer_norm" in name:
            value = 1 + 0.5 * u if name.endswith("weight") else 0.5 * u
        elif name.endswith("bias"):
            value = 0.3 * u
        elif "embeddings" in name:
            value = math.sqrt(3) * u
        else:  # a Linear weight (out, in): variance 1 / fan_in keeps activations O(1)
            value = math.sqrt(3 / p.shape[1]) * u
        state[name] = value.float()
    return state


def _uniform(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Mean 0, variance 1. From torch.rand, whose bits do not depend on the CPU or its libm."""
    return math.sqrt(3) * (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1)


def _sub(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v.double() for k, v in state.items() if k.startswith(prefix)}


def _margin_ok(model: Any, prompt: torch.Tensor, n: int) -> tuple[bool, torch.Tensor]:  # the reference's Transformer
    out = model.generate(prompt, n)
    with torch.no_grad():
        logits = model(out[:, :-1])[:, prompt.shape[1] - 1 :]
    top2 = logits.topk(2, dim=-1).values
    return bool((top2[..., 0] - top2[..., 1] >= MIN_MARGIN).all()), out


def snapshots() -> tuple[dict, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(config, weights, cases): the reference's outputs on the public configuration."""
    ref = load_reference(REFERENCE_DIR, ("utils", "model_solution")).model_solution
    config = ref.ModelConfig(**CONFIG)
    gen = torch.Generator().manual_seed(SEED)
    model = ref.Transformer(config)
    weights = _random_state(model, gen)
    model = model.double().eval()
    model.load_state_dict({k: v.double() for k, v in weights.items()})
    d, ctx, vocab = CONFIG["d_model"], CONFIG["context_length"], CONFIG["vocab_size"]

    def parts(cls: str, prefix: str) -> torch.nn.Module:
        module = getattr(ref, cls)(config).double().eval()
        module.load_state_dict(_sub(weights, prefix))
        return module

    cases: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        x = _uniform(gen, 2, 5, d)
        cases["mlp_in"], cases["mlp_out"] = x, parts("MLP", "backbone.0.mlp.")(x)
        x = _uniform(gen, 2, ctx - 3, d)  # T < context_length
        cases["attention_in"], cases["attention_out"] = x, parts("CausalAttention", "backbone.1.attention.")(x)
        x = _uniform(gen, 2, ctx, d)
        cases["block_in"], cases["block_out"] = x, parts("DecoderBlock", "backbone.0.")(x)
        ids = torch.randint(0, vocab, (2, ctx), generator=gen)
        cases["forward_in"], cases["forward_out"] = ids, model(ids)
    for _ in range(1000):
        prompt = torch.randint(0, vocab, (2, 4), generator=gen)
        ok, generated = _margin_ok(model, prompt, ctx - 4)
        if ok:
            break
    else:
        raise RuntimeError("no prompt with clear greedy choices; change SEED")
    cases["generate_in"], cases["generate_out"] = prompt, generated
    ids = torch.randint(0, vocab, (3, ctx), generator=gen)
    cases["loss_in"], cases["loss_out"] = ids, model.get_loss_on_batch(ids).detach()
    cases = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in cases.items()}
    return dict(CONFIG), weights, cases


def write(template: Path) -> list[Path]:
    """Write the fixtures into template/tests/data/; returns the files written."""
    config, weights, cases = snapshots()
    folder = template / DATA
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "config.json", folder / "weights.pt", folder / "cases.pt"]
    paths[0].write_text(json.dumps(config, indent=2) + "\n")
    torch.save(weights, paths[1])
    torch.save(cases, paths[2])
    return paths


def export(out: Path, regenerate: bool = True) -> Path:
    """Copy the template (without run leftovers) to `out`, which must not exist; regenerate its fixtures."""
    shutil.copytree(TEMPLATE, out, ignore=EXPORT_IGNORE)
    if regenerate:
        write(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.tools.template", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "template",
        nargs="?",
        type=Path,
        default=TEMPLATE,
        help="the template folder whose tests/data/ to (re)write (default: student_template)",
    )
    parser.add_argument(
        "--export", type=Path, metavar="OUT", help="copy the template to OUT first (OUT must not exist)"
    )
    args = parser.parse_args(argv)
    if args.export:
        if args.export.exists():
            parser.error(f"{args.export} exists")
        export(args.export)
        print(f"exported the template to {args.export}")
        return 0
    for path in write(args.template):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
