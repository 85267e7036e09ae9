"""A notebook's namespace in the worker, and what its watched names (the answers) held at the end
of each cell. Runs beside student code.

A name gets a new version whenever a cell leaves it different from its last version: rebound, or
changed in place (item assignment, `index_put_`, `+=`, a helper that mutates it). A version holds
a copy of numbers (tensors, arrays, lists), so a later cell that edits the object in place never
changes an earlier answer; other objects (functions, classes) are kept as they are. A request may
run with the watched names as they stood at the end of a given cell (`pinned`)."""

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

_MISSING = object()
# What may change in place, and is compared by content at the end of every cell; anything else, by identity.
_NUMBERS = (torch.Tensor, np.ndarray, list, tuple, dict, set)


def _copied(value: Any) -> Any:
    """A copy that a later in-place edit of `value` cannot reach; the object itself where it
    cannot be copied (a function, a module, an object whose copy fails)."""
    if isinstance(value, torch.Tensor):
        return torch.Tensor.detach(value).clone()
    if isinstance(value, _NUMBERS):
        try:
            return copy.deepcopy(value)
        except Exception:  # noqa: BLE001  a student object that refuses: kept as it is
            return value
    return value


def _wire_copy(wire: dict) -> dict:
    """The wire form with its array copied: `to_wire` shares a contiguous tensor's memory."""
    return {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in wire.items()}


def _same_wire(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k, va in a.items():
        vb = b[k]
        if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
            if not (isinstance(va, np.ndarray) and isinstance(vb, np.ndarray)):
                return False
            if va.dtype != vb.dtype or va.shape != vb.shape or va.tobytes() != vb.tobytes():
                return False
        elif va != vb:
            return False
    return True


@dataclass
class Version:
    cell: int  # the cell that left the name so
    origin: Any  # the object the name was bound to (kept alive, so identity is meaningful)
    value: Any  # what a pinned request sees: a copy of numbers
    wire: dict  # its wire form, arrays copied


@dataclass
class NotebookState:
    namespace: dict
    wire: Callable[[Any], dict]  # an answer's wire form (ops._answer_to_wire)
    versions: dict[str, list[Version]] = field(default_factory=dict)
    at_end: dict[int, dict[str, int]] = field(default_factory=dict)  # cell -> name -> its version then

    def record(self, cell: int, watch: list[str]) -> dict[str, dict]:
        """After `cell` ran (to the end or not): a new version of each watched name it changed;
        their wire forms."""
        changed = {}
        for name in watch:
            obj = self.namespace.get(name, _MISSING)
            history = self.versions.setdefault(name, [])
            if obj is _MISSING or (history and history[-1].origin is obj and not isinstance(obj, _NUMBERS)):
                continue  # the same function or object: not asked again for a repr that may hang
            try:
                wire = _wire_copy(self.wire(obj))
            except Exception:  # noqa: BLE001  an object whose repr raises: still an answer, of its type
                wire = {"kind": type(obj).__name__, "repr": "(no repr)"}
            if history and history[-1].origin is obj and _same_wire(history[-1].wire, wire):
                continue
            history.append(Version(cell, obj, _copied(obj), wire))
            changed[name] = wire
        self.at_end[cell] = {name: len(history) - 1 for name, history in self.versions.items() if history}
        return changed

    @contextmanager
    def pinned(self, at: int | None, extra: dict[str, Any] | None = None) -> Iterator[None]:
        """For a request's duration: the watched names as they were at the end of cell `at` (the
        latest recorded cell up to it; a name not set by then keeps its value), then `extra`."""
        recorded = [c for c in self.at_end if at is not None and c <= at]
        pins = self.at_end[max(recorded)] if recorded else {}
        bound = {name: _copied(self.versions[name][i].value) for name, i in pins.items()} | dict(extra or {})
        saved = {name: self.namespace.get(name, _MISSING) for name in bound}
        self.namespace.update(bound)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is _MISSING:
                    self.namespace.pop(name, None)
                else:
                    self.namespace[name] = value
