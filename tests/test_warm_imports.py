"""The zygote's matplotlib (graders/execution/worker/warm.py) is handed to a forked worker only where
a fresh import would have given the same: each submission here prints what its train.py sees of
matplotlib, graded once with the zygote and once with spawned workers (GRADER_ZYGOTE=0), and the
two must agree, while the plain ones really get the warm modules."""

import json
import os
import subprocess

import pytest
from conftest import GRADE, REPO, TEST_LIMITS, edited, reference_files, write_zip

AFTER_PYPLOT = "import matplotlib.pyplot as plt\n"
PROBE = AFTER_PYPLOT + '''import json as _j, os as _o, random as _r, sys as _s
import numpy as _np
import matplotlib as _m
from matplotlib import font_manager as _fm, style as _st, texmanager as _tx
_cfg = _o.environ["MPLCONFIGDIR"]
print("MPLPROBE" + _j.dumps({
    "fresh": any(_n.startswith("fontlist") for _n in _o.listdir(_cfg)),
    "linewidth": _m.rcParams["lines.linewidth"],
    "backend": _m.get_backend(),
    "folders": [_m.get_configdir() == _cfg, _m.get_cachedir() == _cfg,
                _st.USER_LIBRARY_PATHS == [_o.path.join(_cfg, "stylelib")],
                str(_tx.TexManager._cache_dir) == _o.path.join(_cfg, "tex.cache")],
    "one_pil": _s.modules["PIL.Image"] is _s.modules["matplotlib.image"].PIL.Image,
    "spec": [_m.__spec__.name, _m.__spec__.origin == _m.__file__, _s.modules["matplotlib"] is _m,
             plt.matplotlib is _m, _s.modules["matplotlib.pyplot"] is plt],
    "fonts": sorted(_f.name for _f in _fm.fontManager.ttflist),
    "draws": [_r.random(), float(_np.random.random())],
}), flush=True)
'''
# Intake keeps only the assignment's files, so a matplotlibrc or a module named matplotlib can only
# come from student code that writes it before importing matplotlib. This one runs, then loads the
# real package in its place.
SHADOW = """import importlib.machinery, importlib.util, sys
print("SHADOWED matplotlib", flush=True)
_spec = importlib.machinery.PathFinder.find_spec("matplotlib", sys.path[1:])
_real = importlib.util.module_from_spec(_spec)
sys.modules["matplotlib"] = _real
_spec.loader.exec_module(_real)
"""
BEFORE_MATPLOTLIB = "import matplotlib\n\nmatplotlib.use"


def _writes(name: str, text: str, then: str = "") -> str:
    return f"open({name!r}, 'w').write({text!r})\n__import__('importlib').invalidate_caches()\n{then}"


def _variants() -> dict[str, dict[str, str]]:
    probed = edited("train.py", AFTER_PYPLOT, PROBE, reference_files())
    before = {
        "plain": "",
        "pil_first": "from PIL import Image\n",
        "rc_in_cwd": _writes("matplotlibrc", "lines.linewidth: 7.5\n"),
        "rc_from_env": _writes("custom.rc", "lines.linewidth: 3.25\n", 'os.environ["MATPLOTLIBRC"] = "custom.rc"\n'),
        "shadowed": _writes("matplotlib.py", SHADOW),
    }
    return {name: edited("train.py", BEFORE_MATPLOTLIB, code + BEFORE_MATPLOTLIB, probed) for name, code in before.items()}


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> dict[str, dict[str, dict]]:
    """By sandbox path ("zygote", "spawned"), by variant: the probe line and whether the shadow ran."""
    base = tmp_path_factory.mktemp("warm")
    zips = [write_zip(base / f"{name}.zip", files) for name, files in _variants().items()]
    procs = {}
    for path, zygote in (("zygote", "1"), ("spawned", "0")):
        cmd = [*GRADE, *map(str, zips), "--out", str(base / path), "--quiet", "--only", "utils", *TEST_LIMITS]
        procs[path] = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "GRADER_ZYGOTE": zygote},
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found: dict[str, dict[str, dict]] = {}
    for path, proc in procs.items():
        log = proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, log[-3000:]
        found[path] = {}
        for z in zips:
            results = json.loads((base / path / z.stem / "results.json").read_text())
            out = results["output"]["stdout"]
            line = next(l for l in out.splitlines() if l.startswith("MPLPROBE"))
            found[path][z.stem] = {**json.loads(line[len("MPLPROBE"):]), "shadow_ran": "SHADOWED matplotlib" in out,
                                   "forks": results["timings"]["worker_forks"]}
    return found


def test_a_forked_worker_sees_the_matplotlib_a_spawned_one_imports(probes):
    for name, spawned in probes["spawned"].items():
        forked = probes["zygote"][name]
        assert spawned["fresh"] and spawned["forks"] == 0, (name, spawned)
        same = {k: v for k, v in forked.items() if k not in ("fresh", "forks", "draws")}
        assert same == {k: v for k, v in spawned.items() if k not in ("fresh", "forks", "draws")}, name
        assert all(forked["folders"]) and forked["one_pil"] and forked["spec"] == ["matplotlib", True, True, True, True], forked
        assert forked["backend"].lower() == "agg" and forked["fonts"], forked
    assert probes["zygote"]["rc_in_cwd"]["linewidth"] == 7.5
    assert probes["zygote"]["rc_from_env"]["linewidth"] == 3.25
    assert probes["zygote"]["shadowed"]["shadow_ran"]


def test_each_forked_worker_draws_its_own_random_numbers(probes):
    """Unseeded random and numpy.random differ between workers, as between spawned ones: forks of
    one zygote must not all start from its state."""
    for path in ("zygote", "spawned"):
        draws = [tuple(p["draws"][i] for p in probes[path].values()) for i in (0, 1)]
        assert all(len(set(d)) == len(d) for d in draws), (path, draws)


def test_the_warm_modules_are_used_only_where_nothing_differs(probes):
    zygote = probes["zygote"]
    if os.geteuid() != 0:
        pytest.skip("the zygote serves only where bwrap runs as root")
    assert zygote["plain"]["forks"], "no worker was forked from the zygote (bwrap as root gives one)"
    assert not zygote["plain"]["fresh"] and not zygote["pil_first"]["fresh"], zygote
    for name in ("rc_in_cwd", "rc_from_env", "shadowed"):
        assert zygote[name]["fresh"], (name, zygote[name])
