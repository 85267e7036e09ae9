"""Loads the staff reference into the trusted process, under names no submission can collide with."""

import functools
import importlib
import sys
from types import SimpleNamespace

from graders.execution.worker import lazy
from graders.paths import REPO


@functools.cache
def load_reference(reference_dir: str, modules: tuple[str, ...]) -> SimpleNamespace:
    """Import `modules` (top-level names such as `utils`) from `reference_dir` in order, then take
    them out of sys.modules again so that nothing else in this process sees them by those names."""
    folder = str(REPO / reference_dir)
    saved = {name: sys.modules.pop(name) for name in modules if name in sys.modules}
    sys.path.insert(0, folder)
    loaded = {}
    try:
        with lazy.stand_ins():
            for name in modules:
                loaded[name] = importlib.import_module(name)
    finally:
        sys.path.remove(folder)
        for name in modules:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    return SimpleNamespace(**loaded)
