"""Shared pieces of the A3 checks: generated cases, random weights, the reference in float64, and
calls into the student's worker. Everything here runs on the trusted side."""

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from hypothesis import example
from hypothesis import strategies as st

from graders.checks.checking import CheckFailure, expect_tensor, fail, not_applicable, tolerance
from graders.execution.client import StudentError
from graders.checks.synthdata import make_source, sample_chunks
from graders.checks.vacuous import require_work
from graders.checks.session import GradeContext

# (d_model, n_heads): one head, odd sizes, d_attention 1, several heads.
SHAPES = ((12, 3), (16, 1), (8, 8), (15, 5), (16, 4))


@dataclass(frozen=True)
class Case:
    d_model: int
    n_heads: int
    n_layers: int
    context_length: int
    vocab_size: int
    batch: int
    length: int
    seed: int

    @property
    def config(self) -> dict:
        return dict(d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers,
                    context_length=self.context_length, vocab_size=self.vocab_size)

    def __repr__(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, n_layers={self.n_layers}, "
                f"context_length={self.context_length}, vocab_size={self.vocab_size}, "
                f"input (B={self.batch}, T={self.length})")


@st.composite
def cases(draw, min_length: int = 1, min_layers: int = 1) -> Case:
    d_model, n_heads = draw(st.sampled_from(SHAPES))
    context = draw(st.integers(max(2, min_length), 9))
    return Case(d_model, n_heads, draw(st.integers(min_layers, 3)), context, draw(st.integers(5, 40)),
                draw(st.integers(1, 4)), draw(st.integers(min_length, context)), draw(st.integers(0, 2**16)))


# Explicit cases every generated run starts with: T < context_length and T == context_length,
# one head, d_attention 1, batch 1 and > 1.
EXPLICIT = (
    Case(12, 3, 2, 8, 23, 2, 5, 1),
    Case(16, 1, 1, 6, 11, 1, 6, 2),
    Case(8, 8, 2, 5, 17, 3, 5, 3),
)


def explicit(test):
    """Run `test` on the EXPLICIT cases before the generated ones."""
    for case in reversed(EXPLICIT):
        test = example(case=case)(test)
    return test


def generator(case: Case, salt: int, base: int) -> torch.Generator:
    return torch.Generator().manual_seed(base * 1_000_003 + case.seed * 1009 + salt)


def random_state(module: torch.nn.Module, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Weights that keep activations O(1) and make every LayerNorm and bias count: default init
    (LayerNorm 1 and 0, zero biases, std 0.02) hides whole classes of bugs."""
    state = {}
    for name, p in module.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if "norm" in name:
            value = (1.0 if leaf == "weight" else 0.0) + 0.3 * torch.randn(p.shape, generator=gen)
        elif leaf == "bias":
            value = 0.3 * torch.randn(p.shape, generator=gen)
        elif "embeddings" in name:
            value = torch.randn(p.shape, generator=gen)
        else:  # Linear weight (out, in)
            value = torch.randn(p.shape, generator=gen) * (1.2 / math.sqrt(p.shape[1]))
        state[name] = value.float()
    return state


def tokens(case: Case, gen: torch.Generator, length: int | None = None) -> torch.Tensor:
    return torch.randint(0, case.vocab_size, (case.batch, length or case.length), generator=gen)


def activations(case: Case, gen: torch.Generator, length: int | None = None) -> torch.Tensor:
    return torch.randn((case.batch, length or case.length, case.d_model), generator=gen)


_WEIGHTS: dict[tuple, tuple[dict[str, torch.Tensor], torch.nn.Module]] = {}  # A3.weights, oldest first
_WEIGHTS_KEPT = 512  # the checks use about 150 (cls, case, salt)


class A3:
    """One check's view of the reference and the student's worker."""

    def __init__(self, grade: GradeContext):
        self.grade, self.ref, self.worker = grade, grade.ref.model_solution, grade.worker
        self.seed = grade.spec.seeds.weights

    # -- reference ----------------------------------------------------------------------------
    def ref_module(self, cls: str, case: Case, state: dict | None = None,
                   module: torch.nn.Module | None = None, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
        if module is None:
            module = getattr(self.ref, cls)(self.ref.ModelConfig(**case.config))
        module = module.to(dtype).eval()
        if state is not None:
            module.load_state_dict({k: v.to(dtype) for k, v in state.items()})
        return module

    def weights(self, cls: str, case: Case, salt: int = 0) -> tuple[dict, torch.nn.Module]:
        """Random weights for `cls` and the float64 reference module holding them. The same for
        every grade: a process that grades many zips builds each once (a tenth of a grade's
        trusted time). The checks only read them, but for the gradients a backward pass leaves,
        which are cleared here."""
        key = (cls, case, salt, self.seed, self.ref)
        if key not in _WEIGHTS:
            if len(_WEIGHTS) >= _WEIGHTS_KEPT:
                del _WEIGHTS[next(iter(_WEIGHTS))]
            module = getattr(self.ref, cls)(self.ref.ModelConfig(**case.config))
            state = random_state(module, generator(case, salt, self.seed))
            _WEIGHTS[key] = (state, self.ref_module(cls, case, state, module))
        state, module = _WEIGHTS[key]
        for p in module.parameters():
            p.grad = None
        return dict(state), module

    # -- the student's side -------------------------------------------------------------------
    def build(self, cls: str, case: Case, state: dict | None, handle: str = "m", train_mode: bool = False) -> str:
        wire = None if state is None else {k: v.numpy() for k, v in state.items()}
        try:
            self.worker.request("build", f"{cls}.__init__", handle=handle, module="model_solution", cls=cls,
                                config=case.config, state=wire, train_mode=train_mode)
        except StudentError as e:
            message = e.info.get("message", "")
            if "state_dict" in message or "Missing key" in message or "Unexpected key" in message:
                fail(f"{cls}'s parameters do not follow the assignment's names and shapes: {message[:600]}")
            raise
        return handle

    def call(self, handle: str, cls: str, method: str, *args, grad: bool = False, return_inputs: bool = False,
             seed: int = 0) -> dict:
        wire = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
        return self.worker.request("call", f"{cls}.{method}", handle=handle, method=method, args=wire,
                                   grad=grad, return_inputs=return_inputs, seed=seed)

    def swap(self, handle: str, path: str, **standin) -> None:
        self.worker.request("swap", f"swapping in a stand-in for {path or 'forward'}", handle=handle, path=path,
                            standin={k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in standin.items()})

    def output(self, cls: str, method: str, case: Case, state: dict, *args, shape: tuple[int, ...],
               handle: str = "m", **explain) -> torch.Tensor:
        """Build the student's `cls` with `state`, call `method`, return the checked float64 output
        (`explain`: expect_tensor's explanations of wrong shapes and NaNs)."""
        self.build(cls, case, state, handle)
        return self.rerun(cls, method, *args, shape=shape, handle=handle, **explain)

    def rerun(self, cls: str, method: str, *args, shape: tuple[int, ...], handle: str = "m",
              **explain) -> torch.Tensor:
        """Call `method` again on the module built last under `handle`."""
        return expect_tensor(self.call(handle, cls, method, *args)["out"], shape, f"{cls}.{method}", **explain)

    def does_work(self, cls: str, method: str, case: Case, ref, x: torch.Tensor, out: torch.Tensor) -> None:
        """Before a property of `out` (the student's `method` on `x`, the module still built) earns
        anything: on a second input of x's shape, the output must do the work the reference's does
        (graders.checks.vacuous.require_work: not constant, not the input handed back, the right scale)."""
        gen = generator(case, 97, self.seed)
        other = torch.randn(x.shape, generator=gen) if x.is_floating_point() else \
            torch.randint(0, case.vocab_size, x.shape, generator=gen)
        second = self.rerun(cls, method, other.float() if x.is_floating_point() else other, shape=tuple(out.shape))
        with torch.no_grad():
            refs = [ref(x.double() if x.is_floating_point() else x), ref(other.double() if x.is_floating_point() else other)]
        # token ids handed back as one-hot "logits" are the input returned unchanged too
        inputs = [x, other] if x.is_floating_point() else [F.one_hot(t, out.shape[-1]) for t in (x, other)]
        require_work(f"{cls}.{method}", [out, second], [r.detach() for r in refs], inputs)

    def tokens_out(self, out: dict, shape: tuple[int, ...], what: str, **explain) -> torch.Tensor:
        if out.get("kind") == "tensor" and out.get("torch_dtype") != "int64" and tuple(out["shape"]) == shape:
            fail(f"{what} returned dtype {out['torch_dtype']}, expected int64 token ids")
        return expect_tensor(out, shape, what, floating=False, **explain)


@contextmanager
def standin_or_full(method: str, standins: str, full_agrees: Callable[[], bool]) -> Iterator[None]:
    """A stand-in check: when the student's `method` fails with `standins` swapped in (it calls
    them with arguments of its own, wants a KV cache back, or never calls them) while the whole
    model does what the reference does on the same input, the check does not apply (its weight
    goes to the item's other checks); otherwise its failure stands."""
    try:
        yield
    except (CheckFailure, StudentError) as failure:
        try:
            agrees = full_agrees()
        except (CheckFailure, StudentError):
            agrees = False
        if not agrees:
            raise
        said = failure.message if isinstance(failure, CheckFailure) else str(failure)
        not_applicable(f"with {standins} your {method} did not give the stand-ins' result ({said[:300]}), but "
                       "without them it matches the reference on the same input: it calls them in a way of its own "
                       "(extra arguments, a cache, or code inline), so it was checked against the full model only")


def agrees_with(a3: "A3", cls: str, method: str, case: Case, state: dict, args: tuple, expected: torch.Tensor,
                **explain) -> Callable[[], bool]:
    """For standin_or_full: the student's `cls` built with `state` gives `expected` for `args`."""
    def check() -> bool:
        out = a3.output(cls, method, case, state, *args, shape=tuple(expected.shape), **explain)
        return float((out - expected.double()).abs().max()) <= tolerance(expected)
    return check


def assert_prefix_unchanged(moved: torch.Tensor, base: torch.Tensor, t: int, what: str, changed: str,
                            consequence: str) -> None:
    """Causality: outputs at positions 0..t must not move when only later inputs changed."""
    diff = (moved[:, :t + 1] - base[:, :t + 1]).abs().amax(dim=(0, 2))
    tol = tolerance(base)
    if diff.max() > tol:
        p = int((diff > tol).nonzero()[0])
        fail(f"{what} at position {p} changed by {float(diff.max()):.3g} when only {changed} after position {t} "
             f"changed: {consequence}", measured=float(diff.max()), tolerance=tol, where=f"position {p}")


def greedy_violation(ref_model: torch.nn.Module, sequence: torch.Tensor, prompt_len: int) -> str | None:
    """Teacher-forced check of greedy decoding: every appended token must be an argmax of the
    reference's logits at the previous position, up to float32 rounding (so near-ties never
    decide a grade). Returns the first violation as feedback, or None."""
    if sequence.shape[1] <= prompt_len:
        return None
    with torch.no_grad():
        logits = ref_model(sequence[:, :-1])
    for pos in range(prompt_len, sequence.shape[1]):
        row_logits = logits[:, pos - 1]
        best = row_logits.max(dim=-1).values
        chosen = row_logits.gather(1, sequence[:, pos:pos + 1]).squeeze(1)
        slack = 1e-4 * best.abs().clamp(min=1.0)
        bad = (chosen < best - slack).nonzero()
        if len(bad):
            b = int(bad[0])
            return (f"batch {b}, new token {pos - prompt_len} (position {pos}): chose token "
                    f"{int(sequence[b, pos])}, but the greedy choice is token {int(row_logits[b].argmax())} "
                    f"(logit {float(best[b]):.3f} against {float(chosen[b]):.3f})")
    return None


def next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The definition: mean cross entropy of positions 0..T-2 against tokens 1..T-1."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).double(), ids[:, 1:].reshape(-1))


# -- 3(b)iii ---------------------------------------------------------------------------------
def training_fields(grade) -> dict:
    """The train request: the spec's run on the grader's data; the handout's data function (which
    downloads) is answered with that data too, should train() call it."""
    spec, tr = grade.spec, grade.spec.training
    _, data, _ = training_data(grade)
    serve = spec.params.get("data_function")
    return dict(module="train", function="train", config=tr.model.model_dump(), data=data.numpy(),
                kwargs=dict(learning_rate=tr.learning_rate, gradient_clipping=tr.gradient_clipping,
                            batch_size=tr.batch_size, max_steps=tr.max_steps),
                data_path=tr.data_path, record_class="Transformer", seed=spec.seeds.weights,
                serve=serve if isinstance(serve, str) else None)


def start_training(grade) -> None:
    """Send the training run ahead (conftest does, before the first check): with a spare worker it
    runs alongside the other items' checks."""
    grade.ahead("train", "train", "train.train", grade.spec.limits.train_timeout_s, **training_fields(grade))


def training_data(grade):
    """The Markov source, the training rows and the held-out rows; the same for every submission,
    so made once per process (27 ms) for the spec's training and seeds. Only ever read."""
    spec, tr = grade.spec, grade.spec.training
    key = (tr.model_dump_json(), spec.seeds.model_dump_json())
    if key not in _TRAINING_DATA:
        source = make_source(tr.model.vocab_size, tr.source_successors, spec.seeds.source)
        # Twice the rows that max_steps batches need, so a loop that ignores max_steps shows.
        data = sample_chunks(source, 2 * tr.batch_size * tr.max_steps, tr.model.context_length, spec.seeds.data)
        heldout = sample_chunks(source, tr.heldout_chunks, tr.model.context_length, spec.seeds.data + 1)
        _TRAINING_DATA[key] = source, data, heldout
    return _TRAINING_DATA[key]


_TRAINING_DATA: dict[tuple[str, str], tuple] = {}
