"""Shared pieces of the A2S1 checks: the notebook's key and value rebuilt from the spec, the answers
taken from one run of the student's notebook (each the value its name holds at the end of its own
cell: graders/checks/notebook_answers.py), and feedback that names what an output selects.
Everything here runs on the trusted side; the student's own key and value are never used."""

import itertools

import torch

from graders.checks.session import GradeContext
from graders.checks.checking import fail
from graders.checks.notebook_answers import Notebook, graded_notebook
from graders.scoring.results import Diagnosis

NOTEBOOK = "A2S1.py"
ANSWERS = ("query121", "query122", "query131", "query132", "m_key")


def notebook_data(seed: int, rows: int, dim: int, decimals: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The notebook's key and value, in float64: seeded once, key drawn before value."""
    gen = torch.Generator().manual_seed(seed)
    drawn = []
    for _ in range(2):
        t = torch.randn(rows, dim, generator=gen)
        drawn.append((t / t.norm(dim=1, keepdim=True)).round(decimals=decimals).double())
    return drawn[0], drawn[1]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The notebook's attention, softmax(q·kᵀ)·v with no scaling: the output and the weights."""
    weights = torch.softmax(q @ k.T, dim=-1)
    return weights @ v, weights


def _name(rows: tuple[int, ...], count: int) -> str:
    if len(rows) == 1:
        return f"value[{rows[0]}]"
    if len(rows) == count:
        return f"the mean of all {count} values"
    listed = [f"value[{r}]" for r in rows]
    return "the mean of " + ", ".join(listed[:-1]) + " and " + listed[-1]


class A2S1:
    def __init__(self, grade: GradeContext):
        self.grade = grade
        p = grade.spec.params
        self.key, self.value = notebook_data(int(p["seed"]), int(p["rows"]), int(p["dim"]), int(p["decimals"]))
        self.tol = float(p["tolerance"])
        self.radius = float(p["diagnosis_radius"])
        self.unchanged_tol = float(p["unchanged_tolerance"])

    @property
    def notebook(self) -> Notebook:
        """The notebook, run once per grade for all the checks."""
        return graded_notebook(self.grade, NOTEBOOK, list(ANSWERS))

    # -- answers -------------------------------------------------------------------------------
    def answer(self, name: str, shapes: tuple[tuple[int, ...], ...], which: int = 0) -> tuple[torch.Tensor, str]:
        """The `which`-th answer named `name` (the template's cells in order), as a float64 tensor of
        one of `shapes`, and where it is, for messages."""
        nb = self.notebook
        if nb.run.problem:
            fail(nb.run.problem)
        answer = nb.answer(name, which)
        label = answer.slot.label()
        if answer.missing or answer.wire is None:
            fail(f"{label} is not answered ({nb.run.filename}): {answer.missing}")
        wire, where = answer.wire, answer.where(nb.run.filename)
        kind = wire.get("kind")
        want = " or ".join(str(s) for s in shapes)
        if kind == "NoneType":
            fail(f"{label} is still None ({where}): not answered yet")
        if kind != "tensor":
            fail(f"{label} is a {kind} ({where}), expected a tensor of shape {want}")
        shape = tuple(wire["shape"])
        if shape not in shapes:
            fail(f"{label} has shape {shape} ({where}), expected {want}")
        if "array" not in wire:
            fail(f"{label} is on the {wire.get('device')} device ({where}); make it a CPU tensor")
        t = torch.from_numpy(wire["array"]).double()
        if not torch.isfinite(t).all():
            fail(f"{label} has NaN or inf entries ({where})")
        return t.reshape(-1, shapes[0][-1]), where

    def query(self, name: str, rows: int) -> torch.Tensor:
        shapes = ((rows, self.key.shape[1]),) + (((self.key.shape[1],),) if rows == 1 else ())
        return self.answer(name, shapes)[0]

    # -- judging -------------------------------------------------------------------------------
    def targets(self) -> dict[tuple[int, ...], torch.Tensor]:
        n = self.value.shape[0]
        return {rows: self.value[list(rows)].mean(0) for r in range(1, n + 1) for rows in itertools.combinations(range(n), r)}

    def diagnose(self, out: torch.Tensor, weights: torch.Tensor, target: tuple[int, ...]) -> Diagnosis | None:
        """What one output row is, when it is something else than `target`: another selection or
        mean of values, or the right keys with too soft a softmax."""
        n = self.value.shape[0]
        near = [rows for rows, t in self.targets().items() if float((out - t).abs().max()) <= self.radius]
        if len(near) == 1 and near[0] != target:
            got = near[0]
            return Diagnosis(id=f"output_is_{'_'.join(map(str, got))}",
                             explanation=f"Your output is {_name(got, n)}, not {_name(target, n)}: the query "
                                         f"attends to key{'s' if len(got) > 1 else ''} {', '.join(map(str, got))}.")
        top = tuple(sorted(int(i) for i in torch.topk(weights, len(target)).indices))
        if top == target:
            shown = ", ".join(f"{float(weights[i]):.2f}" for i in target)
            if len(target) == 1:
                return Diagnosis(id="softmax_not_sharp", explanation=(
                    f"Your query attends most to key {target[0]}, but only with weight {shown}: the softmax is "
                    f"not sharp enough for the output to be {_name(target, n)}. Scale the query up: the larger "
                    "the score gap, the closer softmax gets to a one-hot selection."))
            return Diagnosis(id="weights_not_equal_or_not_sharp", explanation=(
                f"Your query attends most to keys {', '.join(map(str, target))} (weights {shown}), but the output is "
                f"not {_name(target, n)}: an average needs equal scores on those keys and much lower scores on "
                "the others."))
        return None

    def expect_output(self, q: torch.Tensor, k: torch.Tensor, targets: list[tuple[int, ...]], what: str) -> None:
        """Row i of attention(q, k, value) must be the mean of value rows targets[i]."""
        out, weights = attention(q, k, self.value)
        n = self.value.shape[0]
        errors = [float((out[i] - self.value[list(t)].mean(0)).abs().max()) for i, t in enumerate(targets)]
        worst = max(range(len(errors)), key=errors.__getitem__)
        if errors[worst] <= self.tol:
            return
        row = f"row {worst} of " if len(targets) > 1 else ""
        shown = "[" + ", ".join(f"{float(w):.2f}" for w in weights[worst]) + "]"
        fail(f"{row}{what} differs from {_name(targets[worst], n)} by up to {errors[worst]:.3g} (tolerance "
             f"{self.tol:g}); its attention weights on the {n} keys are {shown}",
             measured=errors[worst], tolerance=self.tol, where=f"row {worst}" if row else None,
             diagnosis=self.diagnose(out[worst], weights[worst], targets[worst]))

    def modified_key(self, which: int) -> torch.Tensor:
        """m_key's answer for part `which` (0 the first cell, 1 the second), checked to replace row 2 only."""
        m, where = self.answer("m_key", (tuple(self.key.shape),), which)
        label = self.notebook.answer("m_key", which).slot.label()
        changed = [r for r in range(self.key.shape[0])
                   if float((m[r] - self.key[r]).abs().max()) > self.unchanged_tol]
        others = [r for r in changed if r != 2]
        if others:
            fail(f"{label} ({where}) changes row{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} of key; "
                 "only row 2 may be replaced")
        if not changed:
            fail(f"{label} ({where}) is key unchanged: row 2 is to be replaced")
        return m
