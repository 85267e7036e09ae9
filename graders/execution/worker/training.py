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

from . import standins


@dataclass
class Record:
    models: list = field(default_factory=list)
    initial: dict | None = None
    loss_calls: int = 0
    steps: int = 0  # optimizer steps, of any optimizer
    recorded: dict | None = None
    plots: dict[str, tuple] = field(default_factory=dict)  # one pending draw per distinct call, in order


def _floats(values: Any) -> list[float] | None:
    try:
        return [float(v) for v in list(values)[:100_000]]
    except Exception:  # whatever the student recorded, it is only shown
        return None


def _recorded_class(base: type, record: Record) -> type:
    class Recorded(base):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            record.models.append(self)
            if record.initial is None:
                record.initial = {n: v.detach().clone() for n, v in self.state_dict().items()}

        def get_loss_on_batch(self, *a, **k):
            record.loss_calls += 1
            return super().get_loss_on_batch(*a, **k)

    Recorded.__name__ = Recorded.__qualname__ = base.__name__
    return Recorded


@contextmanager
def recording(train_mod: ModuleType, record_class: str, record: Record) -> Iterator[None]:
    """Within: train_mod's `record_class` (and model_solution's) records into `record`, optimizer
    steps are counted, and plot_results only notes what to draw.

    plot_results(losses, grad_norms, save_path) only draws (A3's interface), and train() calls it
    every 10 steps: each draw costs ~0.3 s of matplotlib, more than the steps between. Only each
    path's last picture survives, so draw_plots draws just those, from copies, after train()."""
    base = getattr(train_mod, record_class)
    recorded = _recorded_class(base, record)
    model_mod = sys.modules.get(base.__module__)
    patch_model = model_mod is not None and getattr(model_mod, record_class, None) is base
    plot = getattr(train_mod, "plot_results", None)

    def recording_plot(losses, grad_norms, *a, **k):
        record.recorded = {"losses": _floats(losses), "grad_norms": _floats(grad_norms)}
        record.plots[repr((a, sorted(k.items())))[:1000]] = (copy.copy(losses), copy.copy(grad_norms), a, k)

    def count_step(*_: Any) -> None:
        record.steps += 1

    hook = register_optimizer_step_post_hook(count_step)
    setattr(train_mod, record_class, recorded)
    if patch_model:
        setattr(model_mod, record_class, recorded)
    if callable(plot):
        setattr(train_mod, "plot_results", recording_plot)
    try:
        yield
    finally:
        hook.remove()
        setattr(train_mod, record_class, base)
        if patch_model and getattr(model_mod, record_class, None) is recorded:
            setattr(model_mod, record_class, base)
        if callable(plot):
            setattr(train_mod, "plot_results", plot)


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
    record_class: str,
    seed: int,
    describe: Callable[[BaseException], dict],
) -> tuple[Record, dict | None]:
    """Run train(); (the record, what raised after its loop or None). An error before the loop is
    done propagates: that train() fails."""
    record = Record()
    plot = getattr(train_mod, "plot_results", None)
    torch.manual_seed(seed)
    after: dict | None = None
    with recording(train_mod, record_class, record):
        try:
            getattr(train_mod, function)(model_config=train_mod.ModelConfig(**config), **kwargs)
        except Exception as exc:
            if not loop_done(record, kwargs.get("max_steps")):
                raise
            after = describe(exc)
    try:
        draw_plots(plot, record)
    except Exception as exc:
        if not loop_done(record, kwargs.get("max_steps")):
            raise
        after = after or describe(exc)
    return record, after


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
