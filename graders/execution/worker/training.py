"""The student's train() on the grader's data, recorded: the models it built, their first and last
weights, its loss calls and optimizer steps, and what it asked to plot. Runs beside student code."""

import copy
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from . import losscheck, notes, standins


@dataclass
class Record:
    models: list = field(default_factory=list)
    initial: dict | None = None
    loss_calls: int = 0
    steps: int = 0  # optimizer steps, of any optimizer
    recorded: dict | None = None
    plots: dict[str, tuple] = field(default_factory=dict)  # one pending draw per distinct call, in order
    logits: Any = None  # what the model's forward returned within the loss call now running
    capturing: bool = False
    # The student's get_loss_on_batch against the next-token cross entropy of the logits its own
    # forward gave in that call: calls compared, and the first that differed (losscheck.py).
    loss_check: dict = field(default_factory=lambda: {"checked": 0, "logits": 0, "wrong": None})


@dataclass(frozen=True)
class Options:
    record_class: str  # the model class train() is to build (A3: Transformer)
    seed: int
    grader_loss: bool = False  # the grader's next-token loss in place of the student's get_loss_on_batch
    serve: str | None = None  # the handout's data function, answered with `data` (it would download)
    data: Any = None


def _floats(values: Any) -> list[float] | None:
    try:
        return [float(v) for v in list(values)[:100_000]]
    except Exception:  # whatever the student recorded, it is only shown
        return None


def _recorded_class(base: type, record: Record, grader_loss: bool) -> type:
    class Recorded(base):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            record.models.append(self)
            if record.initial is None:
                record.initial = {n: v.detach().clone() for n, v in self.state_dict().items()}

        def forward(self, *a, **k):
            out = super().forward(*a, **k)
            if record.capturing:
                record.logits = out
            return out

        def get_loss_on_batch(self, *a, **k):
            record.loss_calls += 1
            ids = losscheck.input_ids(a, k)
            if grader_loss and ids is not None:
                return standins.next_token_loss(self, ids)
            record.capturing, record.logits = True, None
            try:
                loss = super().get_loss_on_batch(*a, **k)
            finally:
                record.capturing = False
            losscheck.compare(record.loss_check, record.loss_calls, loss, ids, record.logits)
            return loss

    Recorded.__name__ = Recorded.__qualname__ = base.__name__
    return Recorded


def _served(name: str, data: torch.Tensor) -> Callable:
    """The handout's data function (it downloads and tokenises TinyStories), answered with the
    grader's rows, cut to the chunk size asked for."""

    def served(*args: Any, **kwargs: Any) -> torch.Tensor:
        size = args[0] if args else next(iter(kwargs.values()), None)
        notes.record("served", name, asked=repr(size)[:40])
        rows = data
        if isinstance(size, int) and 0 < size != rows.shape[1] and size <= rows.numel():
            flat = rows.reshape(-1)
            rows = flat[: flat.numel() // size * size].view(-1, size)
        return rows.clone()

    return served


@contextmanager
def recording(train_mod: ModuleType, options: Options, record: Record) -> Iterator[None]:
    """Within: train_mod's `record_class` (and model_solution's) records into `record`, optimizer
    steps are counted, plot_results only notes what to draw, and the handout's data function (if
    asked to serve it) gives the grader's data.

    plot_results(losses, grad_norms, save_path) only draws (A3's interface), and train() calls it
    every 10 steps: each draw costs ~0.3 s of matplotlib, more than the steps between. Only each
    path's last picture survives, so draw_plots draws just those, from copies, after train()."""
    name = options.record_class
    base = getattr(train_mod, name)
    recorded = _recorded_class(base, record, options.grader_loss)
    model_mod = sys.modules.get(base.__module__)
    patch_model = model_mod is not None and getattr(model_mod, name, None) is base

    def recording_plot(losses, grad_norms, *a, **k):
        record.recorded = {"losses": _floats(losses), "grad_norms": _floats(grad_norms)}
        record.plots[repr((a, sorted(k.items())))[:1000]] = (copy.copy(losses), copy.copy(grad_norms), a, k)

    def count_step(*_: Any) -> None:
        record.steps += 1

    swaps: dict[str, Any] = {name: recorded}
    if callable(getattr(train_mod, "plot_results", None)):
        swaps["plot_results"] = recording_plot
    if options.serve and callable(getattr(train_mod, options.serve, None)):
        swaps[options.serve] = _served(options.serve, options.data)
    saved = {k: getattr(train_mod, k) for k in swaps}
    hook = register_optimizer_step_post_hook(count_step)
    for k, v in swaps.items():
        setattr(train_mod, k, v)
    if patch_model:
        setattr(model_mod, name, recorded)
    try:
        yield
    finally:
        hook.remove()
        for k, v in saved.items():
            setattr(train_mod, k, v)
        if patch_model and getattr(model_mod, name, None) is recorded:
            setattr(model_mod, name, base)


def draw_plots(plot: Callable | None, record: Record) -> None:
    """Draw what train() asked to plot, each path's last call; the first error is raised at the end."""
    error: BaseException | None = None
    for losses, grad_norms, a, k in record.plots.values():
        try:
            plot(losses, grad_norms, *a, **k)  # type: ignore[misc]
        except Exception as exc:  # the other paths are still drawn
            error = error or exc
    if error is not None:
        raise error


def loop_done(record: Record, max_steps: Any) -> bool:
    """train() got through its loop: max_steps loss calls and optimizer steps on a model it built.
    An error after that (saving a checkpoint to a folder that is not there) leaves a trained model."""
    return (
        bool(record.models)
        and isinstance(max_steps, int)
        and record.loss_calls >= max_steps
        and record.steps >= max_steps
    )


def run(
    train_mod: ModuleType,
    function: str,
    kwargs: dict,
    config: dict,
    options: Options,
    describe: Callable[[BaseException], dict],
) -> tuple[Record, dict | None, dict | None]:
    """Run train(): (the record, what raised after its loop, what raised before its loop was done:
    that train() failed, and the record says how far it got)."""
    record = Record()
    plot = getattr(train_mod, "plot_results", None)
    torch.manual_seed(options.seed)
    after: dict | None = None
    with recording(train_mod, options, record):
        try:
            getattr(train_mod, function)(model_config=train_mod.ModelConfig(**config), **kwargs)
        except Exception as exc:
            if not loop_done(record, kwargs.get("max_steps")):
                return record, None, describe(exc)
            after = describe(exc)
    try:
        draw_plots(plot, record)
    except Exception as exc:
        if not loop_done(record, kwargs.get("max_steps")):
            return record, None, describe(exc)
        after = after or describe(exc)
    return record, after, None


def data_file(scratch: Path, data_path: str, data: Any) -> None:
    target = scratch / data_path
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torch.from_numpy(data.copy()), target)


def notebook_run(
    model_cls: Callable,
    train: Callable,
    model_args: list,
    data: torch.Tensor,
    steps: int,
    lr: float,
    seed: int,
    to_wire: Callable[[Any], dict],
) -> dict:
    """A notebook's train(model, data, steps, lr) on its MiniTransformer(*model_args), each block's
    attention replaced by the grader's stand-in: the first and last weights, the optimizer steps
    taken and the losses train() returned."""
    torch.manual_seed(seed)
    model = model_cls(*model_args)
    for block in model.blocks:
        block.attn = standins.CausalMean(model_args[1])
    initial = {k: to_wire(v.detach().clone()) for k, v in model.state_dict().items()}
    record = Record()

    def count_step(*_: Any) -> None:
        record.steps += 1

    hook = register_optimizer_step_post_hook(count_step)
    try:
        torch.manual_seed(seed)
        losses = train(model, data, steps, lr)
    finally:
        hook.remove()
    returned = _floats(losses) if isinstance(losses, (list, tuple, torch.Tensor)) else None
    return {
        "steps": record.steps,
        "initial": initial,
        "final": {k: to_wire(v) for k, v in model.state_dict().items()},
        "losses": returned,
        "returned": type(losses).__name__,
    }
