"""The worker's lazy stand-ins (graders/execution/worker/lazy.py), each in a fresh interpreter as the worker
starts: cheap while unused, and the real package, unchanged, at the first real use."""

import subprocess
import sys
import textwrap

from conftest import REPO

PRELUDE = f"""
import sys
sys.path.insert(0, {str(REPO / "graders" / "execution")!r})
import torch
from worker import lazy
lazy.install_dynamo_standin()
lazy.install()
"""


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_a_training_loop_never_loads_the_compiler():
    out = _run("""
        m = torch.nn.Linear(3, 2)
        opt = torch.optim.AdamW(m.parameters(), lr=0.1)
        before = m.weight.detach().clone()
        for _ in range(3):
            opt.zero_grad()
            m(torch.randn(4, 3)).pow(2).sum().backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
        print("moved", not torch.equal(before, m.weight))
        print("loaded", lazy._DYNAMO.real is not None, "torch._dynamo.eval_frame" in sys.modules)
    """)
    assert "moved True" in out and "loaded False False" in out, out


def test_the_same_steps_as_with_the_real_compiler_loaded():
    """Stand-in or not, AdamW takes bit-identical steps (the stand-in only skips no-ops)."""
    code = """
        torch.manual_seed(0)
        m = torch.nn.Linear(5, 3)
        opt = torch.optim.AdamW(m.parameters(), lr=0.01)
        for _ in range(5):
            opt.zero_grad()
            m(torch.randn(8, 5)).pow(2).mean().backward()
            opt.step()
        print(m.weight.double().sum().item().hex())
    """
    assert _run(code).split()[-1] == _run("import torch._dynamo.config\n" + textwrap.dedent(code)).split()[-1]


def test_torch_compile_and_submodules_get_the_real_compiler():
    out = _run("""
        m = torch.nn.Linear(3, 2)
        opt = torch.optim.AdamW(m.parameters(), lr=0.1)
        compiled = torch.compile(m, backend="eager")
        compiled(torch.randn(4, 3)).sum().backward()
        opt.step()
        import torch._dynamo.config as config
        from torch._dynamo import graph_break
        print("real", sys.modules["torch._dynamo"] is lazy._DYNAMO.real, torch._dynamo is lazy._DYNAMO.real,
              config.__name__, graph_break.__module__)
    """)
    assert "real True True torch._dynamo.config torch._dynamo" in out, out


def test_transformers_is_a_stand_in_until_used():
    out = _run("""
        from transformers import GPT2LMHeadModel
        print("loaded", "transformers.models" in sys.modules)
        print(type(GPT2LMHeadModel.from_pretrained).__name__)
        print("loaded", "transformers.models.gpt2" in sys.modules)
    """)
    assert out.splitlines()[0] == "loaded False" and out.splitlines()[-1] == "loaded True", out
