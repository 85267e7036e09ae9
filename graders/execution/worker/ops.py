"""What the trusted side may ask of the worker. Everything here runs beside student code."""

import ast
import builtins
import importlib
import linecache
import os
import platform
import sys
import traceback
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from . import annotations, asrun, nbstate, notes, offline, standins, training

_WIRE_DTYPES = {
    torch.float32,
    torch.float64,
    torch.float16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
}


def to_wire(value: Any) -> dict:
    """A value returned by student code, as plain data: tensors become raw arrays."""
    if isinstance(value, torch.Tensor):
        t = torch.Tensor.detach(value)
        meta = {
            "kind": "tensor",
            "torch_dtype": str(t.dtype).removeprefix("torch."),
            "device": str(t.device),
            "requires_grad": bool(value.requires_grad),
            "shape": list(t.shape),
        }
        if t.device.type == "meta":
            return meta
        t = t.cpu()
        if t.dtype not in _WIRE_DTYPES:
            t = t.float() if t.is_floating_point() else t.to(torch.int64)
        meta["array"] = t.contiguous().numpy()
        return meta
    if isinstance(value, (bool, int, float)) or value is None:
        return {"kind": type(value).__name__, "value": value}
    return {"kind": type(value).__name__, "repr": repr(value)[:200]}


def from_wire(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    if isinstance(value, dict):
        return {k: from_wire(v) for k, v in value.items()}
    return value


class NoSuchHandle(LookupError):
    """A request named a model built in an earlier incarnation of this worker (ours, not the student's)."""


def describe_exception(exc: BaseException, scratch: Path) -> dict:
    """Type, message and the innermost frame inside the submission, for feedback."""
    info: dict = {"type": type(exc).__name__, "message": str(exc)[:2000]}
    if isinstance(exc, SystemExit):
        info["message"] = f"sys.exit({exc.code!r}) was called"
        said = offline.argparse_error(exc)
        if said is not None:
            info["argparse"] = said
    network = offline.describe(exc, scratch)
    if network is not None:  # in our words: the library's text tells of its own settings and addresses
        info.update(
            type="NoNetwork",
            network=network,
            message=f"{network['called'] or 'a call'} ({network['package']}) needs the network, and a grade has none",
        )
    if isinstance(exc, SyntaxError) and exc.filename:
        info["file"], info["line"] = os.path.basename(exc.filename), exc.lineno
        return info
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        info["missing_module"] = exc.name
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        try:  # "<frozen os>" would resolve inside the working directory, which is scratch
            inside = os.path.isabs(frame.filename) and Path(frame.filename).resolve().is_relative_to(scratch)
        except (OSError, ValueError):
            inside = False
        if inside:
            info["file"], info["line"], info["code"] = os.path.basename(frame.filename), frame.lineno, frame.line
            break
    return info


class _NoIPython:
    """`get_ipython()` of an nbconvert script: magics and shell commands do nothing here."""

    def __getattr__(self, name: str):
        return lambda *a, **k: None


MAX_ANSWER_NUMBERS = 1 << 16  # a notebook's answers are a few numbers: a larger one is sent as its shape only


def _answer_to_wire(value: Any) -> dict:
    """A notebook's answer as plain data: a list or an array of numbers becomes a tensor."""
    if (
        not isinstance(value, torch.Tensor)
        and isinstance(value, (list, tuple, np.ndarray, int, float))
        and not isinstance(value, bool)
    ):
        try:
            value = torch.as_tensor(np.asarray(value, dtype=np.float64))
        except (TypeError, ValueError, OverflowError):
            return to_wire(value)
    if isinstance(value, torch.Tensor) and value.numel() > MAX_ANSWER_NUMBERS:
        return {
            "kind": "tensor",
            "torch_dtype": str(value.dtype).removeprefix("torch."),
            "device": "meta",
            "requires_grad": False,
            "shape": list(value.shape),
        }
    return to_wire(value)


class Ops:
    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.handles: dict[str, torch.nn.Module] = {}
        self.notebooks: dict[str, nbstate.NotebookState] = {}

    # -- notebooks -----------------------------------------------------------------------------
    def op_cell(self, source: str, filename: str, first_line: int, capture: list[str], cell: int = 0) -> dict:
        """Run one cell in its notebook's namespace (kept across cells, as in Jupyter) and send the
        `capture` names it changed, as they are at its end. A cell that raises keeps what it bound
        before the error, as in Jupyter: the reply carries both. The code is padded to its line in
        the file, so errors name it."""
        state = self.notebooks.get(filename)
        if state is None:
            namespace = {"__name__": "__main__", "get_ipython": _NoIPython, "display": lambda *a, **k: None}
            state = self.notebooks[filename] = nbstate.NotebookState(namespace, _answer_to_wire)
        path = str(self.scratch / filename)
        padded = "\n" * (first_line - 1) + source
        linecache.cache[path] = (len(padded), None, padded.splitlines(True), path)
        error = None
        try:
            exec(compile(padded, path, "exec"), state.namespace)  # noqa: S102  student code, in the worker only
        except BaseException as exc:  # SystemExit too: it costs this cell only, as in the serve loop
            error = describe_exception(exc, self.scratch)
        return {"values": state.record(cell, capture), "error": error}

    def _state(self, filename: str) -> nbstate.NotebookState:
        """The notebook's cells' state; a worker that never ran them has none."""
        if filename not in self.notebooks:
            raise NoSuchHandle(filename)
        return self.notebooks[filename]

    def _defined(self, filename: str, name: str) -> Any:
        """What the notebook's cells bound to `name` (as pinned, inside `pinned`)."""
        ns = self._state(filename).namespace
        if name not in ns:
            raise NameError(f"{name} is not defined: no cell of {filename} that ran defines it")
        return ns[name]

    def op_nb_call(self, filename: str, function: str, args: list, seed: int = 0, at: int | None = None) -> dict:
        """Call a function the notebook defined, with its answers as they were at the end of cell `at`."""
        with self._state(filename).pinned(at):
            fn = self._defined(filename, function)
            torch.manual_seed(seed)
            return {"out": to_wire(fn(*[from_wire(a) for a in args]))}

    def op_nb_build(
        self,
        handle: str,
        filename: str,
        cls: str,
        args: list,
        state: dict | None = None,
        seed: int = 0,
        at: int | None = None,
    ) -> dict:
        """Build a module from a class the notebook defined; `op_nb_method` then calls its methods."""
        with self._state(filename).pinned(at):
            torch.manual_seed(seed)
            model = self._defined(filename, cls)(*args)
            if state is not None:
                _load_state(model, from_wire(state))
        model.train(False)
        self.handles[handle] = model
        return {"params": {n: list(p.shape) for n, p in model.named_parameters()}}

    def op_nb_method(
        self, handle: str, filename: str, method: str, args: list, at: int | None = None, pieces: bool = False
    ) -> dict:
        """Call a method of a notebook's module with the notebook's answers as they were at the end
        of cell `at`; with `pieces`, the grader's stand-in pieces (standins.NOTEBOOK_PIECES) in the
        namespace for the call's duration too: its own code runs, its pieces do not."""
        with self._state(filename).pinned(at, standins.NOTEBOOK_PIECES if pieces else {}):
            return self.op_call(handle, method, args)

    def op_nb_train(
        self,
        filename: str,
        model_args: list,
        data: np.ndarray,
        steps: int,
        lr: float,
        seed: int = 0,
        at: int | None = None,
    ) -> dict:
        """The notebook's train() on its MiniTransformer, with the grader's stand-in attention."""
        with self._state(filename).pinned(at):
            model_cls, train = self._defined(filename, "MiniTransformer"), self._defined(filename, "train")
            return training.notebook_run(model_cls, train, model_args, from_wire(data), steps, lr, seed, to_wire)

    # -- modules -------------------------------------------------------------------------------
    def op_import(self, module: str) -> dict:
        """Import a module of the submission. One whose import fails inside evaluating an annotation
        (a file written for Python 3.14's deferred annotations) is imported again with postponed
        annotations, and the reply says where the first attempt failed."""
        asrun.prepare(self.scratch, module)
        try:
            importlib.import_module(module)
            return {}
        except Exception as exc:
            path = self.scratch / f"{module}.py"
            line = annotations.failed_in_annotation(exc, path)
            if line is None:
                raise
            first = f"{type(exc).__name__}: {str(exc)[:300]}"
        annotations.import_postponed(module, path)
        return {
            "postponed_annotations": {
                "file": path.name,
                "line": line,
                "error": first,
                "python": platform.python_version(),
            }
        }

    def op_notes(self) -> dict:
        """What this worker did in place of the student's environment so far (notes.py)."""
        return {"notes": notes.since()}

    def _model(self, handle: str) -> Any:
        if handle not in self.handles:  # built in a worker that was restarted since
            raise NoSuchHandle(handle)
        return self.handles[handle]

    def _module(self, name: str):
        return sys.modules[name]

    def op_build(
        self,
        handle: str,
        module: str,
        cls: str,
        config: dict,
        state: dict | None = None,
        seed: int = 0,
        train_mode: bool = False,
    ) -> dict:
        mod = self._module(module)
        torch.manual_seed(seed)
        model = getattr(mod, cls)(mod.ModelConfig(**config))
        if state is not None:
            _load_state(model, from_wire(state))
        model.train(train_mode)
        self.handles[handle] = model
        return {
            "params": {n: list(p.shape) for n, p in model.named_parameters()},
            "buffers": {n: list(b.shape) for n, b in model.named_buffers()},
        }

    def op_set_buffer(self, handle: str, name: str, value: Any) -> dict:
        count = 0
        for sub in self._model(handle).modules():
            if name in sub._buffers and sub._buffers[name] is not None:
                old = sub._buffers[name]
                sub._buffers[name] = from_wire(value).to(dtype=old.dtype, device=old.device)
                count += 1
        return {"count": count}

    def op_swap(self, handle: str, path: str, standin: dict) -> dict:
        """Replace the submodule at `path`, or with `method` set, that module's method."""
        model = self._model(handle)
        kind = standin["kind"]
        replacement: torch.nn.Module | standins.RuleForward | standins.FixedLogits  # a module, or a method
        if kind == "affine":
            replacement = standins.Affine(from_wire(standin["weight"]), from_wire(standin["bias"]))
        elif kind == "rule_forward":
            replacement = standins.RuleForward(standin["vocab_size"])
        elif kind == "fixed_logits":
            replacement = standins.FixedLogits(from_wire(standin["logits"]))
        else:
            raise ValueError(f"unknown stand-in {kind}")
        if standin.get("method"):
            target = model.get_submodule(path)
            object.__setattr__(target, standin["method"], replacement)
        else:
            parent_path, _, name = path.rpartition(".")
            setattr(model.get_submodule(parent_path), name, replacement)
        return {}

    def op_call(
        self, handle: str, method: str, args: list, seed: int = 0, grad: bool = False, return_inputs: bool = False
    ) -> dict:
        model = self._model(handle)
        inputs = [from_wire(a) for a in args]
        torch.manual_seed(seed)
        model.zero_grad(set_to_none=True)
        out = getattr(model, method)(*inputs)
        reply: dict = {"out": to_wire(out)}
        if grad:
            if not isinstance(out, torch.Tensor) or not out.requires_grad:
                reply["grad_error"] = "the returned value is not connected to the parameters (no gradient)"
            else:
                out.backward()
                reply["grads"] = {n: to_wire(p.grad) for n, p in model.named_parameters() if p.grad is not None}
        if return_inputs:
            reply["inputs_after"] = [to_wire(x) for x in inputs]
        return reply

    def op_function(self, module: str, function: str, args: list) -> dict:
        out = getattr(self._module(module), function)(*[from_wire(a) for a in args])
        if isinstance(out, dict):
            return {"out": {"kind": "dict", "items": {str(k): to_wire(v) for k, v in out.items()}}}
        return {"out": to_wire(out)}

    def op_factory_audit(self, handle: str, method: str, args: list) -> dict:
        """Names of tensor factories that `method` calls without device=: tensors pinned to the CPU,
        which break the model on a GPU. (The meta device finds the same, but its first use costs ~1 s.)"""
        from torch.overrides import TorchFunctionMode

        factories = {
            torch.ones,
            torch.zeros,
            torch.arange,
            torch.tensor,
            torch.full,
            torch.empty,
            torch.rand,
            torch.randn,
            torch.randint,
            torch.eye,
            torch.linspace,
            torch.tril_indices,
            torch.triu_indices,
        }
        found: list[str] = []

        class Audit(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                # A 0-d tensor (e.g. a -inf fill value) is fine on any device.
                if func in factories and "device" not in kwargs and isinstance(out, torch.Tensor) and out.dim() > 0:
                    found.append(f"torch.{func.__name__}")
                return out

        inputs = [from_wire(a) for a in args]
        with Audit():
            getattr(self._model(handle), method)(*inputs)
        return {"calls": sorted(set(found))}

    # -- written key -------------------------------------------------------------------------
    def op_claim(self, code: str) -> dict:
        """Run a key's claim in a fresh namespace; true iff its last expression is exactly true."""
        # Named as a file inside scratch, with its lines in linecache, so that describe_exception
        # reports an error's line (and text) within the claim's code.
        filename = str(self.scratch / "claim.py")
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename)
        last = cast(ast.Expr, tree.body.pop()) if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        namespace = {"__name__": "__claim__", "__builtins__": builtins}
        exec(compile(tree, filename, "exec"), namespace)  # noqa: S102  a key's claim, in the worker only
        if last is None:
            return {"true": False, "value": "(the code does not end with an expression)"}
        value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)  # noqa: S307  the claim's value
        try:
            shown = repr(value)[:200]
        except Exception:  # the value's own repr is broken: the verdict still stands
            shown = f"<{type(value).__name__}>"
        return {"true": _exactly_true(value), "value": shown, **_as_answer(value)}

    # -- training ------------------------------------------------------------------------------
    def op_train(
        self,
        module: str,
        function: str,
        kwargs: dict,
        config: dict,
        data: np.ndarray,
        data_path: str,
        record_class: str,
        seed: int = 0,
        serve: str | None = None,
        grader_loss: bool = False,
    ) -> dict:
        """Run the student's train() on our data, as `python train.py` runs; hand back the weights of
        the model it built, what raised after its loop was done (the model is graded, the error is a
        warning) or before (train() failed), how its loss compared with the definition, and what the
        run needed in place of the student's environment (`serve`: the handout's data function,
        answered with our data; `grader_loss`: our next-token loss in place of the student's)."""
        asrun.prepare(self.scratch, module)
        began = notes.mark()
        training.data_file(self.scratch, data_path, data)
        options = training.Options(record_class, seed, grader_loss, serve, torch.from_numpy(data.copy()))
        record, after, raised = training.run(
            self._module(module), function, kwargs, config, options, lambda exc: describe_exception(exc, self.scratch)
        )
        reply: dict = {"models": len(record.models), "loss_calls": record.loss_calls, "notes": notes.since(began)}
        reply["loss_check"] = record.loss_check
        if raised is not None:
            reply["raised"] = raised
        if not record.models or raised is not None:
            return reply
        reply.update(
            recorded=record.recorded,
            initial={k: to_wire(v) for k, v in (record.initial or {}).items()},
            final={k: to_wire(v) for k, v in record.models[-1].state_dict().items()},
            plot=self._plot(),
            buffers=[n for n, _ in record.models[-1].named_buffers()],
        )
        if after is not None:
            reply["raised_after_loop"] = after
        return reply

    def _plot(self, name: str = "losses_and_grad_norms.png", cap: int = 4 << 20) -> np.ndarray | None:
        """The plot train() saved, as bytes: the scratch folder may live only inside the sandbox.
        A link, a FIFO or an oversized file is not sent; the trusted side checks what is."""
        try:
            fd = os.open(self.scratch / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            if not os.path.isfile(f"/proc/self/fd/{fd}") or os.fstat(fd).st_size > cap:
                return None
            return np.frombuffer(fh.read(cap), dtype=np.uint8)


def _load_state(model: torch.nn.Module, state: dict) -> None:
    """Load every parameter by the assignment's names, strictly; a buffer of the student's own (a
    persistent mask or cache) that the state does not have keeps the value the student gave it."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    buffers = {name for name, _ in model.named_buffers()}
    missing = [k for k in missing if k not in buffers]
    if missing or unexpected:
        problems = [
            f"Missing key(s) in state_dict: {', '.join(map(repr, missing))}." if missing else "",
            f"Unexpected key(s) in state_dict: {', '.join(map(repr, unexpected))}." if unexpected else "",
        ]
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(model).__name__}: " + " ".join(p for p in problems if p)
        )


def _as_answer(value: Any) -> dict:
    """A claim's value as a key answer is compared with it (a claim about a part): a plain number,
    or a sympy expression's text, which the trusted side parses with its own safe parser."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        number = value.item() if isinstance(value, (np.integer, np.floating)) else value
        return {"number": number if abs(number) < 2**63 else float(number)}
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(value, sympy.Basic):
        return {"text": str(value)[:1000]}
    return {}


def _exactly_true(value: Any) -> bool:
    """Python True, numpy's True or sympy's true; never mere truthiness (a non-empty list, an
    unevaluated Eq, a nonzero number)."""
    if value is True or (isinstance(value, np.bool_) and bool(value)):
        return True
    sympy = sys.modules.get("sympy")  # only a claim that imported sympy can return its true
    return sympy is not None and value is sympy.true
