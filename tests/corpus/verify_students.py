"""Check the student corpus (tests/corpus/students/, listed in students.py) against the staff
reference, outside the grader (a script, not a pytest test).

    .venv/bin/python tests/corpus/verify_students.py [--only NAME ...] [--workers N] [--keep]

Each solution runs in its own subprocess, from a temp folder holding its three files (utils.py
from reference/a3 when it has none), imported as the top-level modules utils, model_solution and
train. Files written for Python 3.14's deferred annotations (students.DEFERRED) raise at import on
Python < 3.14 (e.g. jaxtyping's `Float[Tensor, ...]`, or an annotation naming a class defined later
in the file): there the script first checks that a plain import does fail, then imports every file
of that solution with compile(..., flags=__future__.annotations.compiler_flag), i.e. as if it began
with `from __future__ import annotations`. On 3.14+ the plain import must work.

Checks, in eval mode, with the reference's random weights (LayerNorm 1 + 0.3N, biases 0.3N,
embeddings N(0, 1), Linear weights N(0, 1.44 / fan_in)) loaded strictly into both, on configs
(d_model, n_heads) = (12, 3), (16, 1), (8, 8) (d_attention 1), (15, 5); n_layers 2, context 8,
vocab 50; B 1 and 3; T 8 (== context_length), 5 and 1; float64 and float32:

  mlp attn block fwd   MLP, CausalAttention, DecoderBlock, Transformer.forward
  loss                 get_loss_on_batch: value, and in float64 the gradient of every parameter
  gen                  generate: int64, prompt unchanged, greedy tokens equal to the reference's
                       (float64: exactly; float32: each token an argmax up to 1e-4) for
                       prompt + new tokens within the context (1+7, 3+4, 7+1, 2+0, 8+0)
  train                train() on random tokens, ModelConfig(32, 2, 2, 32, 128), lr 3e-3, batch 16:
                       max_steps=5 with gradient_clipping=None, then 3 steps with 1.0. One model,
                       exactly max_steps loss calls, ./losses_and_grad_norms.png saved. A raise is
                       allowed only for students.RAISES_AFTER_TRAINING, only after the whole loop
                       (all steps done, plot saved), and those must raise.

Tolerance: max |diff| <= 1e-4 * max(1, max |reference|). Also shown, never a failure: `past`,
whether generate agrees with the reference past context_length (8 + 3 tokens).
Prints one line per solution; exits 1 if any check fails.
"""

import __future__
import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
REFERENCE = REPO / "reference" / "a3"
MODULES = ("utils", "model_solution", "train")
CONFIGS = ((12, 3), (16, 1), (8, 8), (15, 5))
N_LAYERS, CTX, VOCAB = 2, 8, 50
TOL = 1e-4
TRAIN_CFG = dict(d_model=32, n_heads=2, n_layers=2, context_length=32, vocab_size=128)
COLUMNS = ("import", "mlp", "attn", "block", "fwd", "loss", "gen", "train")


# ---------------------------------------------------------------------------------------------
# worker side: one solution per process
# ---------------------------------------------------------------------------------------------

def load(folder: Path, name: str, postponed: bool):
    path = folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    flags = __future__.annotations.compiler_flag if postponed else 0
    code = compile(path.read_bytes(), str(path), "exec", flags=flags, dont_inherit=True)
    sys.modules[name] = mod
    try:
        exec(code, mod.__dict__)  # noqa: S102
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def load_set(folder: Path, postponed: bool, with_train: bool = True) -> dict:
    for m in MODULES:
        sys.modules.pop(m, None)
    sys.path.insert(0, str(folder))
    try:
        return {m: load(folder, m, postponed) for m in MODULES if with_train or m != "train"}
    finally:
        sys.path.remove(str(folder))


def short(e: BaseException) -> str:
    lines = str(e).splitlines()
    return f"{type(e).__name__}: {lines[0][:160] if lines else ''}"


def randomize(model, gen):
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if "norm" in name:
                p.copy_((1.0 if leaf == "weight" else 0.0) + 0.3 * torch.randn(p.shape, generator=gen))
            elif leaf == "bias":
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif "embeddings" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * (1.2 / math.sqrt(p.shape[1])))


def rel_diff(got, want) -> float:
    import torch
    if not isinstance(got, torch.Tensor):
        raise TypeError(f"returned {type(got).__name__}, not a tensor")
    if got.numel() == 1 and want.numel() == 1:
        got, want = got.reshape(()), want.reshape(())
    if tuple(got.shape) != tuple(want.shape):
        raise ValueError(f"shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    d = (got.detach().double() - want.detach().double()).abs()
    if torch.isnan(d).any():
        return math.inf
    return float(d.max()) / max(1.0, float(want.detach().abs().max())) if d.numel() else 0.0


def model_checks(R, V) -> dict[str, list[str]]:
    """Failures per column (empty list: all agree)."""
    import torch
    bad: dict[str, list[str]] = {c: [] for c in COLUMNS[1:-1]}

    def check(col, case, fn):
        try:
            d = fn()
            if d > TOL:
                bad[col].append(f"{case}: rel diff {d:.2g}")
        except Exception as e:  # noqa: BLE001
            bad[col].append(f"{case}: {short(e)}")

    def sub(sd, prefix):
        return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}

    for ci, (d_model, n_heads) in enumerate(CONFIGS):
        kw = dict(d_model=d_model, n_heads=n_heads, n_layers=N_LAYERS, context_length=CTX, vocab_size=VOCAB)
        rcfg, vcfg = R.ModelConfig(**kw), V.ModelConfig(**kw)
        ref = R.Transformer(rcfg)
        randomize(ref, torch.Generator().manual_seed(1000 + ci))
        sd = ref.state_dict()
        for dtype in (torch.float64, torch.float32):
            tag = "f64" if dtype == torch.float64 else "f32"

            def build(lib, cls, prefix="", cfg=None):
                m = getattr(lib, cls)(cfg)
                m.load_state_dict(sub(sd, prefix) if prefix else sd, strict=True)
                return m.to(dtype).eval()

            for B in (1, 3):
                for T in (CTX, 5, 1):
                    case = f"d{d_model}h{n_heads} {tag} B{B} T{T}"
                    g = torch.Generator().manual_seed(ci * 100 + B * 10 + T)
                    x = 1.5 * torch.randn(B, T, d_model, generator=g, dtype=dtype)
                    ids = torch.randint(0, VOCAB, (B, T), generator=g)
                    for col, cls, prefix in (("mlp", "MLP", "backbone.0.mlp."),
                                             ("attn", "CausalAttention", "backbone.0.attention."),
                                             ("block", "DecoderBlock", "backbone.1.")):
                        def run(cls=cls, prefix=prefix, x=x):
                            with torch.no_grad():
                                want = build(R, cls, prefix, rcfg)(x)
                                xin = x.clone()
                                got = build(V, cls, prefix, vcfg)(xin)
                                if not torch.equal(xin, x):
                                    raise RuntimeError("modified its input")
                            return rel_diff(got, want)
                        check(col, case, run)

                    def fwd(ids=ids):
                        with torch.no_grad():
                            return rel_diff(build(V, "Transformer", cfg=vcfg)(ids), build(R, "Transformer", cfg=rcfg)(ids))
                    check("fwd", case, fwd)

                    if T >= 2:
                        def loss(ids=ids):
                            r, v = build(R, "Transformer", cfg=rcfg), build(V, "Transformer", cfg=vcfg)
                            want, got = r.get_loss_on_batch(ids), v.get_loss_on_batch(ids)
                            d = rel_diff(got, want)
                            if d > TOL or dtype != torch.float64:
                                return d
                            want.backward()
                            got.backward()
                            vp = dict(v.named_parameters())
                            for n, p in r.named_parameters():
                                if p.grad is None:
                                    continue
                                if vp[n].grad is None:
                                    raise RuntimeError(f"no gradient on {n}")
                                d = max(d, rel_diff(vp[n].grad, p.grad))
                            return d
                        check("loss", case, loss)

                for T0, n in ((1, CTX - 1), (3, 4), (CTX - 1, 1), (2, 0), (CTX, 0)):
                    case = f"d{d_model}h{n_heads} {tag} B{B} gen {T0}+{n}"
                    prompt = torch.randint(0, VOCAB, (B, T0), generator=torch.Generator().manual_seed(7 + ci + T0 + B))

                    def gen(prompt=prompt, n=n, T0=T0):
                        r, v = build(R, "Transformer", cfg=rcfg), build(V, "Transformer", cfg=vcfg)
                        want = r.generate(prompt.clone(), n)
                        given = prompt.clone()
                        torch.manual_seed(0)
                        got = v.generate(given, n)
                        if not isinstance(got, torch.Tensor) or got.dtype != torch.int64:
                            raise TypeError(f"returned {getattr(got, 'dtype', type(got).__name__)}, not int64")
                        if tuple(got.shape) != tuple(want.shape):
                            raise ValueError(f"shape {tuple(got.shape)}, expected {tuple(want.shape)}")
                        if not torch.equal(given, prompt) or not torch.equal(got[:, :T0], prompt):
                            raise RuntimeError("the prompt changed")
                        if dtype == torch.float64:
                            return float((got != want).sum())  # exact tokens
                        with torch.no_grad():  # float32: every new token an argmax, up to rounding
                            logits = r(got[:, :-1]) if got.shape[1] > 1 else None
                        for pos in range(T0, got.shape[1]):
                            row = logits[:, pos - 1].double()
                            best = row.max(-1).values
                            chosen = row.gather(1, got[:, pos:pos + 1]).squeeze(1)
                            if (chosen < best - 1e-4 * best.abs().clamp(min=1.0)).any():
                                return math.inf
                        return 0.0
                    check("gen", case, gen)
    return bad


def past_context(R, V) -> str:
    import torch
    kw = dict(d_model=12, n_heads=3, n_layers=N_LAYERS, context_length=CTX, vocab_size=VOCAB)
    ref = R.Transformer(R.ModelConfig(**kw))
    randomize(ref, torch.Generator().manual_seed(99))
    v = V.Transformer(V.ModelConfig(**kw))
    v.load_state_dict(ref.state_dict())
    prompt = torch.randint(0, VOCAB, (2, CTX), generator=torch.Generator().manual_seed(3))
    try:
        got = v.double().eval().generate(prompt.clone(), 3)
        return "ok" if torch.equal(got, ref.double().eval().generate(prompt.clone(), 3)) else "differs"
    except Exception as e:  # noqa: BLE001
        return f"crash ({short(e)[:60]})"


def train_checks(mods: dict, folder: Path, raises_after: bool) -> list[str]:
    import torch
    tr, ms = mods["train"], mods["model_solution"]
    base = tr.Transformer
    problems = []
    for run, (clip, steps) in enumerate(((None, 5), (1.0, 3))):
        record = {"models": 0, "calls": 0}

        class Recorded(base):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                record["models"] += 1

            def get_loss_on_batch(self, *a, **k):
                record["calls"] += 1
                return super().get_loss_on_batch(*a, **k)

        where = folder / f"run{run}"
        (where / "datasets").mkdir(parents=True)
        torch.manual_seed(0)
        torch.save(torch.randint(0, TRAIN_CFG["vocab_size"], (200, TRAIN_CFG["context_length"])),
                   where / f"datasets/tinystories_10pct_chunk_size_{TRAIN_CFG['context_length']}.pt")
        cwd = os.getcwd()
        os.chdir(where)
        tr.Transformer = Recorded
        if getattr(ms, "Transformer", None) is base:
            ms.Transformer = Recorded
        raised = None
        try:
            tr.train(learning_rate=3e-3, gradient_clipping=clip, model_config=tr.ModelConfig(**TRAIN_CFG),
                     batch_size=16, max_steps=steps)
        except Exception as e:  # noqa: BLE001
            raised = e
        finally:
            os.chdir(cwd)
            tr.Transformer = base
            if ms.Transformer is Recorded:
                ms.Transformer = base
        what = f"clip={clip} max_steps={steps}"
        if record["models"] != 1 or record["calls"] != steps:
            problems.append(f"{what}: {record['models']} models, {record['calls']} loss calls")
        if not (where / "losses_and_grad_norms.png").exists():
            problems.append(f"{what}: no ./losses_and_grad_norms.png")
        if raised is not None and not raises_after:
            problems.append(f"{what}: raised {short(raised)}")
        if raised is None and raises_after:
            problems.append(f"{what}: meant to raise after its loop, did not")
    return problems


def worker(folder: Path, postponed: bool, raises_after: bool) -> dict:
    import torch
    torch.set_num_threads(1)
    res: dict = {"bad": {}, "notes": []}
    for m in MODULES:
        sys.modules.pop(m, None)
    ref = load_set(REFERENCE, False, with_train=False)
    R = ref["model_solution"]
    if postponed:
        try:
            load_set(folder, False)
            if sys.version_info < (3, 14):
                res["bad"]["import"] = ["plain import works on Python < 3.14: not a deferred-annotation file"]
        except Exception as e:  # noqa: BLE001
            if sys.version_info >= (3, 14):
                res["bad"]["import"] = [f"plain import fails on {sys.version.split()[0]}: {short(e)}"]
            else:
                res["notes"].append(f"plain import: {short(e)[:70]}; imported postponed")
                postponed = True
    try:
        mods = load_set(folder, postponed and sys.version_info < (3, 14))
    except Exception:  # noqa: BLE001
        res["bad"]["import"] = [traceback.format_exc(limit=3)[-400:]]
        return res
    bad = model_checks(R, mods["model_solution"])
    res["bad"].update({k: v for k, v in bad.items() if v})
    res["past"] = past_context(R, mods["model_solution"])
    try:
        t = train_checks(mods, folder, raises_after)
    except Exception:  # noqa: BLE001
        t = [traceback.format_exc(limit=3)[-400:]]
    if t:
        res["bad"]["train"] = t
    return res


# ---------------------------------------------------------------------------------------------
# driver side
# ---------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        folder, postponed, raises = args.worker
        print("RESULT " + json.dumps(worker(Path(folder), postponed == "1", raises == "1")), flush=True)
        return 0

    sys.path.insert(0, str(HERE))
    import students

    names = [n for n in students.STUDENTS if not args.only or n in args.only]
    root = Path(tempfile.mkdtemp(prefix="a3_students_"))

    def one(name: str) -> tuple[str, dict]:
        folder = root / name
        folder.mkdir()
        for f, text in students.files(name).items():
            (folder / f).write_text(text)
        flags = [str(int(name in students.DEFERRED)), str(int(name in students.RAISES_AFTER_TRAINING))]
        p = subprocess.run([sys.executable, __file__, "--worker", str(folder), *flags], cwd=folder,
                           capture_output=True, text=True, timeout=600)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            return name, {"bad": {"import": [f"worker exited {p.returncode}: {p.stderr[-500:]}"]}, "notes": []}
        return name, json.loads(line[len("RESULT "):])

    with ThreadPoolExecutor(max(1, args.workers)) as pool:
        results = dict(pool.map(one, names))

    width = max(len(n) for n in names)
    print(f"{'solution':<{width}}  " + " ".join(f"{c:<6}" for c in COLUMNS) + " past      verdict")
    failed = []
    for name in names:
        r = results[name]
        cells = " ".join(f"{('FAIL' if c in r['bad'] else '.'):<6}" for c in COLUMNS)
        verdict = "FAIL" if r["bad"] else "OK"
        print(f"{name:<{width}}  {cells} {r.get('past', '-')[:9]:<9} {verdict}"
              + (f"   ({'; '.join(r['notes'])})" if r["notes"] else ""))
        if r["bad"]:
            failed.append(name)
    for name in failed:
        for col, msgs in results[name]["bad"].items():
            print(f"  {name} {col}: {msgs[0]}" + (f" (+{len(msgs) - 1} more)" if len(msgs) > 1 else ""))
    print(f"\n{len(names) - len(failed)}/{len(names)} solutions agree with the reference "
          f"(Python {sys.version.split()[0]})")
    if args.keep:
        print(f"kept {root}")
    else:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
