"""A broken submission costs seconds: a method that hangs or crashes its worker is run once per
grade (graders/execution/breaker.py), so a hang in attention, a fork bomb in the block, a segfault
in the MLP and a daemon at import each grade within a bound of a normal grade plus one call timeout
per broken request (conftest.within_cost_bound; bench/hostile_cost.py measures the strict 2x),
losing the same items as before, and the later checks say why they did not run it."""

import pytest
from conftest import TEST_LIMITS, edited, grade_all, lost, reference_files, within_cost_bound, write_zip

CALL_TIMEOUT_S = 2  # TEST_LIMITS
ATTENTION = "        B, T, _ = x.shape\n"
BLOCK = "        x = x + self.attention(self.pre_layer_norm(x))\n"
MLP = "        return self.fc2(self.gelu(self.fc1(x)))\n"
FORK_BOMB = """        import os, time
        end = time.time() + 20
        while time.time() < end:
            try:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
            except OSError:
                time.sleep(0.01)
"""
DAEMON = """

import os as _os, time as _time
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        while True:
            _time.sleep(1)
    _os._exit(0)
_os.wait()
"""

# case -> (files, the items it loses: its own, and the training run that needs it)
CASES = {
    "hang_in_attention": (edited("model_solution.py", ATTENTION, ATTENTION + "        while True:\n            pass\n"),
                          {"3(a)iii", "3(b)iii"}),
    "fork_bomb_in_block": (edited("model_solution.py", BLOCK, FORK_BOMB + BLOCK), {"3(a)iv", "3(b)iii"}),
    "segfault_in_mlp": (edited("model_solution.py", MLP, "        import ctypes; ctypes.string_at(0)\n" + MLP),
                        {"3(a)ii", "3(b)iii"}),
    "daemon_at_import": ({**reference_files(), "model_solution.py": reference_files()["model_solution.py"] + DAEMON},
                         set()),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("cost")
    zips = [write_zip(folder / f"{n}.zip", files) for n, (files, _) in CASES.items()]
    zips.append(write_zip(folder / "normal.zip", reference_files()))
    return grade_all(zips, tmp_path_factory.mktemp("cost-out"), extra=TEST_LIMITS)


@pytest.mark.parametrize("name", CASES)
def test_a_broken_method_costs_one_timeout_and_the_same_points(graded, name):
    r, normal = graded[name], graded["normal"]
    assert lost(r) == CASES[name][1], lost(r)
    t = r["timings"]
    assert t["broken_requests"] <= 3, t
    assert within_cost_bound(r, normal, CALL_TIMEOUT_S * t["broken_requests"]), (t, normal["timings"])


@pytest.mark.parametrize("name, item, method", [("hang_in_attention", "3(a)iii", "CausalAttention.forward"),
                                                ("segfault_in_mlp", "3(a)ii", "MLP.forward")])
def test_later_checks_say_they_did_not_run_the_broken_method_again(graded, name, item, method):
    r = graded[name]
    checks = next(i for i in r["items"] if i["id"] == item)["checks"]
    first, *later = [c["message"] for c in checks]
    assert method in first and "not re-run" not in first, first
    assert later and all(m.startswith("not re-run: ") and method in m and ", earlier (check '" in m for m in later), later
    assert r["timings"]["failed_fast"] >= len(later)


def test_the_checks_with_a_stand_in_for_the_broken_method_still_run(graded):
    """The block's wiring check swaps a stand-in in for the attention that hangs: it runs, and passes."""
    block = next(i for i in graded["hang_in_attention"]["items"] if i["id"] == "3(a)iv")
    assert {c["name"]: c["status"] for c in block["checks"]}["block_wiring"] == "passed"
