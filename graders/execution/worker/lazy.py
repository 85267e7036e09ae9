"""Lazy stand-ins for packages student files import mostly for names.

`from transformers import GPT2LMHeadModel` costs about 2 s and may touch the network; the
assignment's graded code never uses it. A stand-in module hands out proxies for every name, and
the first real use of a proxy (a call or an attribute) imports the real package and forwards to it.
"""

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

LAZY_PACKAGES = ("transformers", "huggingface_hub", "datasets")


class _LazyName:
    def __init__(self, package: str, name: str):
        self._package, self._name = package, name

    def _resolve(self):
        return getattr(_materialize(self._package), self._name)

    def __call__(self, *args, **kwargs):
        return self._resolve()(*args, **kwargs)

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return getattr(self._resolve(), attr)

    def __repr__(self) -> str:
        return f"<lazy {self._package}.{self._name}>"


class _LazyModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _LazyName(self.__name__, name)


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _LazyModule(spec.name)
        module.__path__ = []  # a package, so that `import transformers.x` reaches our finder
        return module

    def exec_module(self, module) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, packages: tuple[str, ...]):
        self.pending = set(packages)

    def find_spec(self, fullname, path, target=None):
        top = fullname.partition(".")[0]
        if top not in self.pending:
            return None
        if fullname == top:
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        _materialize(top)  # a submodule import is a real use of the package
        return importlib.util.find_spec(fullname)


_finder: _Finder | None = None


def _materialize(package: str) -> types.ModuleType:
    if _finder is not None:
        _finder.pending.discard(package)
    current = sys.modules.get(package)
    if isinstance(current, _LazyModule):
        del sys.modules[package]
    return importlib.import_module(package)


def install(packages: tuple[str, ...] = LAZY_PACKAGES) -> None:
    """For the worker's whole life: the named packages load on first real use."""
    global _finder
    _finder = _Finder(packages)
    sys.meta_path.insert(0, _finder)


@contextlib.contextmanager
def stand_ins(packages: tuple[str, ...] = LAZY_PACKAGES) -> Iterator[None]:
    """Only while importing (the trusted side's reference): leaves the real packages importable."""
    global _finder
    previous, _finder = _finder, _Finder(packages)
    sys.meta_path.insert(0, _finder)
    try:
        yield
    finally:
        sys.meta_path.remove(_finder)
        for name in packages:
            if isinstance(sys.modules.get(name), _LazyModule):
                del sys.modules[name]
        _finder = previous


# -- torch._dynamo -----------------------------------------------------------------------------
# optimizer.step() runs `import torch._dynamo; torch._dynamo.graph_break()` and the optimizers'
# methods are wrapped in torch._dynamo.disable: the first step of any training loop imports the
# compiler, 1.3 s here, for two calls that do nothing unless something is being compiled. Nothing
# can be compiled before torch._dynamo is really loaded, so until then a stand-in answers those two
# (graph_break: nothing; disable: a wrapper that defers to the real disable once it is loaded), and
# any other use of it (torch.compile, a submodule, any other name) loads the real one first.


class _DynamoStandIn(types.ModuleType):
    real: types.ModuleType | None = None
    graph_break: Callable[..., Any]  # set below: the two compiler calls a training loop makes
    disable: Callable[..., Any]

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(_real_dynamo(), name)


_DYNAMO = _DynamoStandIn("torch._dynamo")
_DYNAMO.__path__ = []  # a package: `import torch._dynamo.x` reaches the finder below


def _real_dynamo() -> types.ModuleType:
    if _DYNAMO.real is None:
        import torch

        if sys.modules.get("torch._dynamo") is _DYNAMO:
            del sys.modules["torch._dynamo"]
        if torch.__dict__.get("_dynamo") is _DYNAMO:
            del torch._dynamo
        _DYNAMO.real = importlib.import_module("torch._dynamo")
    return _DYNAMO.real


def _graph_break() -> None:
    if _DYNAMO.real is not None:
        _DYNAMO.real.graph_break()


def _disable(fn=None, recursive: bool = True, **kwargs):
    if _DYNAMO.real is not None:
        return _DYNAMO.real.disable(fn, recursive, **kwargs)
    if fn is None:  # used as @disable(recursive=False)
        return lambda f: _disable(f, recursive, **kwargs)
    done: list = []

    def call(*args, **kw):
        if _DYNAMO.real is None:
            return fn(*args, **kw)
        if not done:
            done.append(_DYNAMO.real.disable(fn, recursive, **kwargs))
        return done[0](*args, **kw)

    return call


_DYNAMO.graph_break = _graph_break
_DYNAMO.disable = _disable


class _DynamoFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("torch._dynamo.") or _DYNAMO.real is not None:
            return None
        _real_dynamo()
        return importlib.util.find_spec(fullname)


def install_dynamo_standin() -> None:
    """In the worker, after `import torch` and before any student code."""
    import torch

    if "torch._dynamo" in sys.modules:
        return
    sys.meta_path.insert(0, _DynamoFinder())
    sys.modules["torch._dynamo"] = _DYNAMO
    torch._dynamo = _DYNAMO
