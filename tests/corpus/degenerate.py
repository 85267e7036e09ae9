"""Degenerate stubs: methods that return something of the right shape without doing the work (zeros,
ones, the input handed back, random noise, a constant loss). A constant is causal, permutation
equivariant and batch independent, so property checks must not pay for it: each stub gets 0 on
every item it stubs (tests/test_degenerate.py)."""

from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).resolve().parent.parent.parent / "reference" / "a3"

# method -> body, per kind of stub ("x" is the input of the three modules, `input_ids` the loss's)
_SHAPED = {
    "zeros": "torch.zeros_like(x)", "ones": "torch.ones_like(x)", "identity": "x", "noise": "torch.randn_like(x)",
}
_BODIES = {
    kind: {
        "MLP.forward": f"return {same}",
        "CausalAttention.forward": f"return {same}",
        "DecoderBlock.forward": f"return {same}",
    } for kind, same in _SHAPED.items()
}
_V = "self.config.vocab_size"
_BODIES["zeros"].update({
    "Transformer.forward": f"return torch.zeros(x.shape[0], x.shape[1], {_V})",
    "Transformer.generate": "return torch.cat([x, torch.zeros(x.shape[0], num_new_tokens, dtype=torch.long)], dim=1)",
    "Transformer.get_loss_on_batch": "return self(input_ids).sum() * 0",
})
_BODIES["ones"].update({
    "Transformer.forward": f"return torch.ones(x.shape[0], x.shape[1], {_V})",
    "Transformer.generate": "return torch.cat([x, torch.ones(x.shape[0], num_new_tokens, dtype=torch.long)], dim=1)",
    "Transformer.get_loss_on_batch": "return torch.tensor(1.0, requires_grad=True)",
})
_BODIES["identity"].update({  # the input handed back: as one-hot "logits", the last token echoed
    "Transformer.forward": f"return F.one_hot(x, {_V}).float()",
    "Transformer.generate": "return torch.cat([x] + [x[:, -1:]] * num_new_tokens, dim=1)",
    "Transformer.get_loss_on_batch": "return self(input_ids).mean()",
})
_BODIES["noise"].update({
    "Transformer.forward": f"return torch.randn(x.shape[0], x.shape[1], {_V})",
    "Transformer.generate": f"return torch.cat([x, torch.randint(0, {_V}, (x.shape[0], num_new_tokens))], dim=1)",
    "Transformer.get_loss_on_batch": "return torch.rand((), requires_grad=True) * 5",
})
CONSTANT_LOSS = {"Transformer.get_loss_on_batch": f"return torch.tensor(math.log({_V}), requires_grad=True)"}

ITEM = {"MLP.forward": "3(a)ii", "CausalAttention.forward": "3(a)iii", "DecoderBlock.forward": "3(a)iv",
        "Transformer.forward": "3(a)v", "Transformer.generate": "3(a)vi", "Transformer.get_loss_on_batch": "3(b)ii"}


@dataclass(frozen=True)
class Stub:
    name: str
    bodies: dict[str, str]

    @property
    def zero_on(self) -> set[str]:
        """The items that must score 0: those stubbed; with the model stubbed, training too."""
        items = {ITEM[m] for m in self.bodies}
        return items | ({"3(b)iii"} if items & {"3(a)v", "3(b)ii"} else set())


STUBS = (
    *(Stub(f"all_{kind}", bodies) for kind, bodies in _BODIES.items()),
    *(Stub(f"attention_{kind}", {"CausalAttention.forward": _BODIES[kind]["CausalAttention.forward"]})
      for kind in _SHAPED),
    Stub("mlp_identity", {"MLP.forward": _BODIES["identity"]["MLP.forward"]}),
    Stub("forward_zeros", {"Transformer.forward": _BODIES["zeros"]["Transformer.forward"]}),
    Stub("generate_echo", {"Transformer.generate": _BODIES["identity"]["Transformer.generate"]}),
    Stub("generate_zeros", {"Transformer.generate": _BODIES["zeros"]["Transformer.generate"]}),
    Stub("loss_constant_log_v", CONSTANT_LOSS),
)


def stubbed(bodies: dict[str, str]) -> dict[str, str]:
    """The reference's three files with the methods in `bodies` replaced by those one-line bodies."""
    out, skip, cls = [], None, ""
    for line in (REFERENCE / "model_solution.py").read_text().splitlines(keepends=True):
        indent = len(line) - len(line.lstrip())
        if skip is not None:
            if line.strip() and indent <= skip:
                skip = None
            else:
                continue
        out.append(line)
        stripped = line.strip()
        if line.startswith("class "):
            cls = line.split()[1].split("(")[0].split(":")[0]
        elif stripped.startswith("def "):
            method = f"{cls}.{stripped[4:].split('(')[0]}"
            if method in bodies:
                out.append(" " * (indent + 4) + bodies[method] + "\n\n")
                skip = indent
    files = {f: (REFERENCE / f).read_text() for f in ("train.py", "utils.py")}
    return {**files, "model_solution.py": "".join(out)}
