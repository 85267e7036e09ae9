"""matplotlib imported once in the zygote, and handed to a forked worker only where a fresh import
would have given it the same modules.

Most train.py files import matplotlib.pyplot: about 0.5 CPU-s in every worker, the same each time.
The zygote imports it before any student code, from an empty folder, under the environment every
worker gets but for its own folders. What matplotlib imports besides itself (PIL, pyparsing,
numpy's submodules, ...) stays loaded, as torch's own imports do; matplotlib's own modules, whose
state depends on where and under what environment they are imported, are taken out of sys.modules.
In a forked worker a finder stands in front of them, and the first import of matplotlib (or
mpl_toolkits), by student code or ours, decides once. They go back, pointed at this worker's
folders, only if a fresh import would read the same inputs at that moment:
- the environment the worker started with, which matches the zygote's but for HOME, TMPDIR and
  MPLCONFIGDIR (each worker's own);
- no matplotlibrc, style library, font list or font folder where matplotlib and fontconfig look;
- matplotlib found at the same file by today's sys.meta_path and sys.path (student code may have
  written a module of that name into its folder, which comes first);
- none of them imported afresh already.
Otherwise they are dropped and matplotlib is imported as in a spawned worker.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

_OWN_FOLDERS = ("HOME", "TMPDIR", "MPLCONFIGDIR")
_PACKAGES = ("matplotlib", "mpl_toolkits")
# Under HOME, what matplotlib's font search and fontconfig read (a fresh import builds the font list).
_HOME_FONTS = (".fonts", ".fonts.conf", ".local/share/fonts", ".config/fontconfig")

_stash: dict[str, ModuleType] = {}
_zygote_env: dict[str, str] = {}


def preload(folder: str) -> None:
    """In the zygote, before any fork: import matplotlib.pyplot from the empty `folder` (also its
    config folder), then stash matplotlib's own modules. Nothing is stashed if that fails."""
    os.makedirs(folder, exist_ok=True)
    os.environ["MPLCONFIGDIR"] = folder
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        import matplotlib.pyplot  # noqa: F401

        mpl = sys.modules["matplotlib"]
        ok = hasattr(mpl, "_logged_cached") and all(
            hasattr(getattr(mpl, f), "__wrapped__") for f in ("get_configdir", "get_cachedir")
        )
    except Exception:  # no matplotlib, or not one we know: workers import it themselves
        ok = False
    finally:
        os.chdir(cwd)
    _zygote_env.update(os.environ)
    for name in [n for n in sys.modules if n.split(".")[0] in _PACKAGES]:
        module = sys.modules.pop(name)
        if ok:
            _stash[name] = module


def arm() -> None:
    """In a forked worker, once its environment and sys.path are set, before any student code."""
    if not _stash:
        return
    if _but_folders(os.environ) != _but_folders(_zygote_env) or any(name in sys.modules for name in _stash):
        _stash.clear()
        return
    sys.meta_path.insert(0, _Finder(dict(os.environ), list(sys.meta_path)))


def _but_folders(env) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in _OWN_FOLDERS}


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, env: dict[str, str], meta_path: list):
        self.env, self.meta_path = env, meta_path
        self.lock = threading.Lock()
        self.adopted: dict[str, ModuleType] = {}

    def find_spec(self, fullname, path, target=None):
        if fullname not in _stash and fullname not in self.adopted:
            return None
        with self.lock:  # student threads may import at once: the first decides
            if self in sys.meta_path:
                sys.meta_path.remove(self)
                if self._unchanged():
                    self.adopted = dict(_stash)
                    _restore()
                _stash.clear()
        module = self.adopted.get(fullname)
        if module is None or sys.modules.get(fullname) is not module:
            return None
        # Out of sys.modules until our loader puts it back: the import system would otherwise hand
        # back the module's own spec, and its own loader would run matplotlib's code again.
        del sys.modules[fullname]
        return importlib.machinery.ModuleSpec(fullname, _Adopt(module), is_package=hasattr(module, "__path__"))

    def _unchanged(self) -> bool:
        """Whether a fresh import now would read what the zygote's read."""
        if dict(os.environ) != self.env or sys.meta_path != self.meta_path:
            return False
        if any(name in sys.modules for name in _stash) or _config_files_present():
            return False
        return all(_found_at(name) == _location(_stash[name].__spec__) for name in _PACKAGES if name in _stash)


class _Adopt(importlib.abc.Loader):
    """Hands back the stashed module as it is, its own spec kept."""

    def __init__(self, module: ModuleType):
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module) -> None:
        module.__spec__ = self.spec


def _config_files_present() -> bool:
    try:
        cwd_rc = os.path.exists(os.path.join(os.getcwd(), "matplotlibrc"))
    except OSError:
        cwd_rc = False
    config = os.environ.get("MPLCONFIGDIR", "")
    version = getattr(getattr(_stash.get("matplotlib.font_manager"), "FontManager", None), "__version__", None)
    if version is None:
        return True
    in_config = [os.path.join(config, n) for n in ("matplotlibrc", "stylelib", f"fontlist-v{version}.json")]
    home = os.environ.get("HOME", "")
    return cwd_rc or any(os.path.lexists(p) for p in in_config + [os.path.join(home, n) for n in _HOME_FONTS])


def _found_at(name: str):
    """Where today's sys.meta_path would import `name` from."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, None) if find else None
        if spec is not None:
            return _location(spec)
    return None


def _location(spec):
    return None if spec is None else (spec.origin, list(spec.submodule_search_locations or ()))


def _restore() -> None:
    """The stash back in sys.modules, matplotlib's cached folders this worker's, as a fresh import
    would have left them (it creates both folders and reads the style library from the first)."""
    sys.modules.update(_stash)
    mpl = _stash["matplotlib"]
    for name, fmt in (("get_configdir", "CONFIGDIR=%s"), ("get_cachedir", "CACHEDIR=%s")):
        setattr(mpl, name, mpl._logged_cached(fmt)(getattr(mpl, name).__wrapped__))
    configdir, cachedir = mpl.get_configdir(), mpl.get_cachedir()
    style = _stash.get("matplotlib.style")
    if style is not None:
        style.USER_LIBRARY_PATHS[:] = [os.path.join(configdir, "stylelib")]
    tex = _stash.get("matplotlib.texmanager")
    if tex is not None:
        tex.TexManager._cache_dir = Path(cachedir, "tex.cache")
