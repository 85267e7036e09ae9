"""Inert, offline stand-ins for packages a submission imports for side work only: experiment
tracking (wandb, tensorboard, mlflow, ...) and a notebook's helpers (google.colab, IPython). The
spec lists them (Spec.inert_packages). In the worker, and only there, importing one gives a stand-in
whatever is installed: every attribute is callable and returns another stand-in, nothing is sent
anywhere and nothing is written. Each import is noted (notes.py) with its line, for the warning.

A few things a stand-in keeps, so that ordinary use reads back what it was given: a `config=`
mapping passed to any call becomes the package's `config` (`wandb.init(config=cfg)`, then
`wandb.config.lr`), and values set on a stand-in (`run.name = ...`, `run["x"] = 1`,
`config.update(d)`) are read back. It is false in a test (`if wandb.run:`), and using one as a
number raises a TypeError that says where it came from.

tqdm.notebook draws its bars as Jupyter widgets, which a grade has not (it raises at the first
bar): it is given tqdm's plain text bars instead, noted the same way."""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from . import notes

_PLAIN_BARS = "tqdm.notebook"


def _no_number(self: "Inert", *_: Any) -> Any:
    raise TypeError(
        f"{self._name} belongs to a stand-in for {self._package}, which grading runs without: it holds no "
        "value to compute with. Use the value train() is given (or a default) instead"
    )


class Inert:
    """Any attribute, item or call of a stand-in package."""

    def __init__(self, name: str, package: str, root: Any = None, given: Mapping | None = None):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_package", package)
        object.__setattr__(self, "_root", root)
        object.__setattr__(self, "_given", dict(given or {}))
        object.__setattr__(self, "_made", {})

    def _child(self, key: Any, label: str) -> Any:
        try:
            hash(key)
        except TypeError:  # a slice: `version_info[:2]`
            return Inert(f"{self._name}{label}", self._package, self._root)
        if key in self._given:
            return self._given[key]
        if key not in self._made:
            self._made[key] = Inert(f"{self._name}{label}", self._package, self._root)
        return self._made[key]

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return self._child(attr, f".{attr}")

    def __setattr__(self, attr: str, value: Any) -> None:
        self._given[attr] = value

    def __getitem__(self, key: Any) -> Any:
        return self._child(key, f"[{key!r}]")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._given[key] = value

    def __call__(self, *args: Any, **kwargs: Any) -> "Inert":
        config = kwargs.get("config")
        result = Inert(f"{self._name}()", self._package, self._root)
        if isinstance(config, Mapping) and self._root is not None:
            shared = self._root.config  # the package's own config: wandb.init(config=...) fills wandb.config
            shared.update(config)
            result._given["config"] = shared
        return result

    # -- a mapping of what it was given ---------------------------------------------------------
    def update(self, values: Mapping | Iterable | None = None, **more: Any) -> None:
        self._given.update(dict(values or {}), **more)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._given.get(key, default)

    def keys(self) -> Any:
        return self._given.keys()

    def items(self) -> Any:
        return self._given.items()

    def values(self) -> Any:
        return self._given.values()

    def __contains__(self, key: Any) -> bool:
        return key in self._given

    def __iter__(self) -> Iterator:
        return iter(list(self._given))

    def __len__(self) -> int:
        return len(self._given)

    def __bool__(self) -> bool:
        return False

    # -- the rest of what scripts do with a run or a writer ----------------------------------------
    def __enter__(self) -> "Inert":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __fspath__(self) -> str:
        return "."  # `os.path.join(wandb.run.dir, "model.pt")`: the working folder, scratch

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (InertBase,)  # `class Logger(SummaryWriter)`: a class that takes anything

    def __repr__(self) -> str:
        return f"<stand-in {self._name}>"

    __int__ = __float__ = __index__ = _no_number
    __lt__ = __le__ = __gt__ = __ge__ = _no_number
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_number
    __truediv__ = __rtruediv__ = __floordiv__ = __pow__ = __neg__ = _no_number


class InertBase:
    """The base of a class a student derived from a stand-in."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Inert(f"{type(self).__name__}.{attr}", "a stand-in package")


# What libraries read of a stand-in they find in sys.modules, as a real import with nothing running
# would answer: matplotlib, tqdm and transformers look for a running IPython shell (none; and a
# version past matplotlib's check for IPython < 8.24, whose answer would need more of IPython).
_AS_REAL = {"IPython": {"get_ipython": lambda: None, "version_info": (9, 0, 0, "")}}


class InertModule(types.ModuleType):
    __version__ = "0+stand-in"

    def __init__(self, name: str, package: str):
        super().__init__(name)
        self.__path__: list[str] = []  # a package: `import wandb.sdk` comes back to the finder
        self._package = package
        self._made: dict[str, Inert] = {}
        vars(self).update(_AS_REAL.get(name, {}))

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        if attr not in self._made:
            self._made[attr] = Inert(f"{self.__name__}.{attr}", self._package, root=self)
        return self._made[attr]


class _Loader(importlib.abc.Loader):
    """Noted here, not when found: a library that only asks whether a package is there
    (importlib.util.find_spec) imports nothing, and the student did not import it."""

    def __init__(self, package: str, noted: bool = True):
        self.package, self.noted = package, noted

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if self.noted:
            notes.record("stand_in", self.package)
        return InertModule(spec.name, self.package)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _PlainBarsLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        notes.record("plain_bars", spec.name)
        std = importlib.import_module("tqdm.std")
        module = types.ModuleType(spec.name, "tqdm's plain text bars, for tqdm.notebook")
        module.tqdm = module.tqdm_notebook = std.tqdm  # type: ignore[attr-defined]
        module.trange = module.tnrange = std.trange  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, packages: tuple[str, ...]):
        self.packages = packages

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == _PLAIN_BARS:
            return importlib.machinery.ModuleSpec(fullname, _PlainBarsLoader())
        listed = next((p for p in self.packages if fullname == p or fullname.startswith(p + ".")), None)
        if listed is not None:
            return importlib.machinery.ModuleSpec(fullname, _Loader(listed), is_package=True)
        if any(p.startswith(fullname + ".") for p in self.packages) and not _really_there(fullname, path):
            # the parent of a listed package (google, of google.colab) that is not installed
            return importlib.machinery.ModuleSpec(fullname, _Loader(fullname, noted=False), is_package=True)
        return None


def _really_there(fullname: str, path: Any) -> bool:
    return importlib.machinery.PathFinder.find_spec(fullname, path) is not None


def install(packages: Iterable[str]) -> None:
    """For the worker's life, before any student code: the listed packages (and tqdm.notebook)
    import as stand-ins. What was imported of them already is dropped, so that the student's
    import comes here."""
    listed = tuple(packages)
    for name in list(sys.modules):
        if name == _PLAIN_BARS or any(name == p or name.startswith(p + ".") for p in listed):
            del sys.modules[name]
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None and "notebook" in vars(tqdm):
        delattr(tqdm, "notebook")
    sys.meta_path.insert(0, _Finder(listed))
