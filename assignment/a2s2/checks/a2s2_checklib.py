"""Shared pieces of the A2S2 checks: the staff notebook's definitions as the trusted reference, the
student's notebook run once per grade in the worker, and calls into what its cells defined.
Everything here runs on the trusted side; the student's code runs only in the worker."""

import ast
import functools
import math
from types import SimpleNamespace

import torch

from graders.checks.checking import expect_tensor, fail
from graders.checks.notebook import NotebookRun, read_cells
from graders.checks.notebook_answers import Notebook, graded_notebook
from graders.checks.session import GradeContext
from graders.checks.vacuous import require_work
from graders.execution.client import StudentError
from graders.paths import REPO

NOTEBOOK = "A2S2.py"
REFERENCE = REPO / "assignment" / "a2s2" / "reference" / NOTEBOOK
INTERFACE = ("scaled_dot_product_attention", "causal_mask", "split_heads", "merge_heads", "SelfAttention",
             "MiniTransformer", "lm_loss", "train")
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)


@functools.cache
def reference() -> SimpleNamespace:
    """The staff notebook's definitions: its cells that only import and define (not the ones that
    run tests or train), run here. Our own code, so the checks and the staff solution are one."""
    ns: dict = {"__name__": "a2s2_reference"}
    for cell in read_cells(REFERENCE):
        if all(isinstance(node, _DEFINITIONS) for node in ast.parse(cell.source).body):
            exec(compile(cell.source, str(REFERENCE), "exec"), ns)  # noqa: S102  the staff notebook, trusted
    return SimpleNamespace(**{name: ns[name] for name in INTERFACE})


def generator(*salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(hash(salt) % (2**31))


def randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def random_state(module: torch.nn.Module, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Weights that keep activations O(1) and make every bias count (default init hides bugs)."""
    state = {}
    for name, p in module.named_parameters():
        if name.endswith("bias"):
            state[name] = 0.3 * torch.randn(p.shape, generator=gen)
        else:
            state[name] = torch.randn(p.shape, generator=gen) * (1.2 / math.sqrt(p.shape[-1]))
    return state


def shown(t: torch.Tensor) -> str:
    return "(" + ", ".join(map(str, t.shape)) + ")"


class A2S2:
    """One check's view of the student's notebook, run in the worker, and of the reference. `answer`:
    the name the check's item grades (its spec `runs`): the check calls the notebook's answers as
    they stood at the end of that answer's cell, so a later cell (an experiment that redefines
    attention) never changes what an earlier step is graded on."""

    def __init__(self, grade: GradeContext, answer: str | None = None):
        self.grade, self.worker, self.ref = grade, grade.worker, reference()
        self.seed = grade.spec.seeds.weights
        self.answer = answer

    @property
    def notebook(self) -> Notebook:
        """The notebook, run once per grade for all the checks."""
        return graded_notebook(self.grade, NOTEBOOK, list(INTERFACE))

    @property
    def run(self) -> NotebookRun:
        return self.notebook.run

    @property
    def at(self) -> int | None:
        """The cell whose end the checks see the notebook's answers at: the end of the item's own."""
        found = self.notebook.answers.get((self.answer, 0)) if self.answer else None
        return found.cell.number if found and found.cell and not found.missing else None

    def require(self, *names: str) -> None:
        """Fail unless the notebook ran and answered `names` (saying which cell, and why, if not)."""
        run = self.run
        if run.problem:
            fail(run.problem)
        for name in names:
            answer = self.notebook.answers.get((name, 0))
            if answer is not None and answer.missing:
                fail(f"{name} is not answered ({run.filename}): {answer.missing}")
            if name not in run.values:
                why = run.before()
                fail(f"{name} is not defined in {run.filename}" + (f" ({why})" if why else ""))

    def call(self, function: str, *args) -> dict:
        """The wire form of function(*args), a function the notebook defined."""
        self.require(function)
        wire = [a.float().numpy() if isinstance(a, torch.Tensor) and a.is_floating_point() else
                a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
        return self.worker.request("nb_call", function, filename=self.run.filename, function=function,
                                   args=wire, at=self.at)["out"]

    def tensor(self, function: str, *args, shape: tuple[int, ...], what: str | None = None,
               **explain) -> torch.Tensor:
        """function(*args), checked to be a finite float tensor of `shape`, as float64."""
        return expect_tensor(self.call(function, *args), shape, what or function, **explain)

    def build(self, cls: str, args: list, state: dict[str, torch.Tensor], handle: str = "m") -> str:
        self.require(cls)
        wire = {k: v.float().numpy() for k, v in state.items()}
        try:
            self.worker.request("nb_build", f"{cls}.__init__", handle=handle, filename=self.run.filename, cls=cls,
                                args=args, state=wire, at=self.at)
        except StudentError as e:
            message = e.info.get("message", "")
            if "state_dict" in message or "Missing key" in message or "Unexpected key" in message:
                fail(f"{cls}'s layers are not the given ones (keep __init__ as given): {message[:600]}")
            raise
        return handle

    def forward(self, x: torch.Tensor, handle: str = "m", pieces: bool = False, **explain) -> torch.Tensor:
        """SelfAttention.forward(x) on the module built last; with `pieces`, the grader's stand-in
        pieces are in the notebook's namespace for the call."""
        reply = self.worker.request("nb_method", "SelfAttention.forward", filename=self.run.filename, handle=handle,
                                    method="forward", args=[x.float().numpy()], at=self.at, pieces=pieces)
        what = "SelfAttention.forward" + (" with the grader's stand-in pieces" if pieces else "")
        return expect_tensor(reply["out"], tuple(x.shape), what, **explain)

    def does_work(self, what: str, outs: list[torch.Tensor], refs: list[torch.Tensor],
                  inputs: list[torch.Tensor] = ()) -> None:
        """A property earns points only when the outputs do the reference's work (not constant,
        not the input handed back, the right scale)."""
        require_work(what, outs, refs, inputs)

    # -- the reference ----------------------------------------------------------------------------
    def ref_attention(self, d_model: int, n_heads: int, salt: int) -> tuple[dict, torch.nn.Module]:
        """Random weights for SelfAttention(d_model, n_heads) and the float64 reference holding them."""
        module = self.ref.SelfAttention(d_model, n_heads)
        state = random_state(module, generator(self.seed, d_model, n_heads, salt))
        module.load_state_dict(state)
        return state, module.double().eval()
