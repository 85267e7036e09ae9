"""Check the variant corpus against the staff reference (a script, not a pytest test).

    .venv/bin/python tests/corpus/verify_variants.py [--reference DIR] [--workers N] [--only NAME ...]
                                                     [--train-all] [--keep]

Every variant is written to its own temp folder; worker subprocesses import each folder's
model_solution / utils / train as top-level modules (sys.modules cleared between variants) and
compare them with the reference on random weights (all params normal(0, 0.3), LayerNorm weights
1 + normal(0, 0.3)) over several configs, T < and == context_length, batch 1 and 3:

  3(a)ii   MLP                     full
  3(a)iii  CausalAttention         full (and its input left unchanged)
  3(a)iv   DecoderBlock            full (own submodules) and iso (reference attention/mlp swapped in)
  3(a)v    Transformer.forward     full and iso (reference DecoderBlocks swapped in)
  3(a)vi   generate (prompt + new tokens within context_length)
                                   full and iso (forward swapped for the reference model's)
  3(b)ii   get_loss_on_batch value and parameter gradients, full and iso (forward swapped)
  utils    state_dict_converter on a random small Hugging Face GPT-2 (keys, shapes, values)
  3(b)iii  train(): smoke run (5 steps, random (200, 32) data) for train.py variants, and the
           grading criterion (100 steps, lr 3e-3, batch 16, ModelConfig(32, 2, 2, 32, 128), on
           Markov-chain data; held-out loss of the initial vs final weights of the model train()
           builds, recomputed with the reference code, must drop by >= 1 nat) for the reference,
           train.py variants, correct variants and bugs that list 3(b)iii (all with --train-all).

A correct variant must agree everywhere (max abs diff <= 1e-4, generate exactly) and pass the
training checks; a bug must differ/crash in the iso check of every item in `loses` (criterion fail
or crash for 3(b)iii) and agree everywhere for every item in `keeps`.
"""

import argparse
import importlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_REFERENCE = REPO / "reference" / "a3"
MODULES = ("model_solution", "utils", "train")
MODEL_ITEMS = ("3(a)ii", "3(a)iii", "3(a)iv", "3(a)v", "3(a)vi", "3(b)ii")
ALL_ITEMS = MODEL_ITEMS + ("3(b)iii", "utils")
TOL = 1e-4
CONFIGS = ((12, 3), (16, 1), (8, 8))  # (d_model, n_heads); n_layers 2, context 8, vocab 50
N_LAYERS, CTX, VOCAB = 2, 8, 50
TRAIN_CFG = dict(d_model=32, n_heads=2, n_layers=2, context_length=32, vocab_size=128)
TRAIN_LR, TRAIN_BATCH, TRAIN_STEPS, MIN_DROP = 3e-3, 16, 100, 1.0
TRAIN_CLIP = float(os.environ.get("A3_VERIFY_CLIP", "1.0")) or None  # 0 means no clipping
PER_VARIANT_TIMEOUT_S = 300


# =============================================================================================
# worker side
# =============================================================================================

class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout("variant timed out")


def load_set(folder: str):
    """Import model_solution and utils (train lazily) from folder as fresh top-level modules."""
    for name in MODULES:
        sys.modules.pop(name, None)
    sys.path.insert(0, folder)
    importlib.invalidate_caches()
    try:
        ms = importlib.import_module("model_solution")
        ut = importlib.import_module("utils")
    finally:
        sys.path.remove(folder)
    return ms, ut


def load_train(folder: str):
    """Import folder's train.py against the model_solution already in sys.modules."""
    sys.modules.pop("train", None)
    sys.path.insert(0, folder)
    importlib.invalidate_caches()
    try:
        return importlib.import_module("train")
    finally:
        sys.path.remove(folder)


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}"


def _diff(a, b) -> tuple[float, str]:
    """Max abs difference of two tensors (inf when shapes differ or there are NaNs)."""
    import torch
    if not isinstance(a, torch.Tensor):
        return math.inf, f"returned {type(a).__name__}, not a tensor"
    if a.numel() == 1 and b.numel() == 1:
        a, b = a.reshape(()), b.reshape(())
    if tuple(a.shape) != tuple(b.shape):
        return math.inf, f"shape {tuple(a.shape)} != {tuple(b.shape)}"
    if b.dtype in (torch.int64, torch.int32):
        if a.dtype not in (torch.int64, torch.int32):
            return math.inf, f"dtype {a.dtype}"
        n = int((a != b).sum())
        return float(n), f"{n} tokens differ" if n else ""
    d = (a.detach().double() - b.detach().double()).abs()
    if torch.isnan(d).any():
        return math.inf, "NaN"
    return float(d.max()) if d.numel() else 0.0, ""


def _rec(records, case, mode, fn, tol=TOL):
    try:
        d, msg = fn()
        status = "agree" if d <= tol else "differ"
    except _Timeout:
        raise
    except BaseException as e:  # noqa: BLE001 — a student's code may raise anything
        d, msg, status = math.inf, _short(e), "crash"
    records.append({"case": case, "mode": mode, "status": status, "diff": d, "msg": msg})


def randomize(model):
    import torch
    import torch.nn as nn
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1.0 + 0.3 * torch.randn_like(m.weight))


def sub(sd, prefix):
    return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}


def grads_diff(model_a, model_b):
    """Compare .grad of same-named parameters (relative-ish tolerance folded into the number)."""
    worst, msg = 0.0, ""
    pa = dict(model_a.named_parameters())
    for name, pb in model_b.named_parameters():
        ga = pa[name].grad if name in pa else None
        if pb.grad is None:
            continue
        if ga is None:
            return math.inf, f"no gradient on {name}"
        d, m = _diff(ga, pb.grad)
        d = d / (1.0 + float(pb.grad.abs().max()))
        if d > worst:
            worst, msg = d, f"grad {name}" + (f" {m}" if m else "")
    return worst, msg


def model_checks(R, V) -> dict:
    import torch
    res = {item: [] for item in MODEL_ITEMS}
    for ci, (d_model, n_heads) in enumerate(CONFIGS):
        kw = dict(d_model=d_model, n_heads=n_heads, n_layers=N_LAYERS, context_length=CTX, vocab_size=VOCAB)
        rcfg = R.ModelConfig(**kw)
        try:
            vcfg = V.ModelConfig(**kw)
        except BaseException as e:  # noqa: BLE001
            for item in MODEL_ITEMS:
                res[item].append({"case": f"cfg{ci}", "mode": "full", "status": "crash", "diff": math.inf,
                                  "msg": _short(e)})
            continue
        torch.manual_seed(1000 + ci)
        ref = R.Transformer(rcfg).eval()
        randomize(ref)
        sd = ref.state_dict()
        blk = "backbone.0."

        def ref_module(cls, prefix):
            m = cls(rcfg)
            m.load_state_dict(sub(sd, prefix))
            return m.eval()

        def var_module(cls, prefix):
            m = cls(vcfg)
            m.load_state_dict(sub(sd, prefix))
            return m.eval()

        def var_model():
            m = V.Transformer(vcfg)
            m.load_state_dict(sd)
            return m.eval()

        def ref_model():
            m = R.Transformer(rcfg)
            m.load_state_dict(sd)
            return m.eval()

        for B in (1, 3):
            for T in (CTX, 5, 1):
                case = f"cfg{ci} B{B} T{T}"
                g = torch.Generator().manual_seed(ci * 100 + B * 10 + T)
                x = 1.5 * torch.randn(B, T, d_model, generator=g)
                ids = torch.randint(0, VOCAB, (B, T), generator=g)

                def mlp(x=x):
                    with torch.no_grad():
                        return _diff(var_module(V.MLP, blk + "mlp.")(x), ref_module(R.MLP, blk + "mlp.")(x))
                _rec(res["3(a)ii"], case, "full", mlp)

                def attn(x=x):
                    given = x.clone()  # the variant's input: it must come back unchanged
                    with torch.no_grad():
                        d, msg = _diff(var_module(V.CausalAttention, blk + "attention.")(given),
                                       ref_module(R.CausalAttention, blk + "attention.")(x))
                    return (d, msg) if torch.equal(given, x) else (math.inf, "input modified in place")
                _rec(res["3(a)iii"], case, "full", attn)

                expected_block = ref_module(R.DecoderBlock, blk)(x).detach()

                def block_full(x=x, e=expected_block):
                    with torch.no_grad():
                        return _diff(var_module(V.DecoderBlock, blk)(x), e)

                def block_iso(x=x, e=expected_block):
                    b = var_module(V.DecoderBlock, blk)
                    b.attention = ref_module(R.CausalAttention, blk + "attention.")
                    b.mlp = ref_module(R.MLP, blk + "mlp.")
                    with torch.no_grad():
                        return _diff(b(x), e)
                _rec(res["3(a)iv"], case, "full", block_full)
                _rec(res["3(a)iv"], case, "iso", block_iso)

                with torch.no_grad():
                    expected_logits = ref(ids)

                def fwd_full(ids=ids, e=expected_logits):
                    with torch.no_grad():
                        return _diff(var_model()(ids), e)

                def fwd_iso(ids=ids, e=expected_logits):
                    m = var_model()
                    for i in range(N_LAYERS):
                        m.backbone[i] = ref_module(R.DecoderBlock, f"backbone.{i}.")
                    with torch.no_grad():
                        return _diff(m(ids), e)
                _rec(res["3(a)v"], case, "full", fwd_full)
                _rec(res["3(a)v"], case, "iso", fwd_iso)

                if T >= 2:
                    r = ref_model()
                    ref_loss = r.get_loss_on_batch(ids)
                    ref_loss.backward()

                    def loss_check(m, grads_of, ids=ids, r=r, ref_loss=ref_loss):
                        loss = m.get_loss_on_batch(ids)
                        d, msg = _diff(loss, ref_loss)
                        if d > TOL:
                            return d, msg or f"loss {float(loss):.4f} vs {float(ref_loss):.4f}"
                        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
                            return math.inf, "loss carries no gradient"
                        loss.backward()
                        return grads_diff(grads_of, r)

                    def loss_full():
                        m = var_model()
                        return loss_check(m, m)

                    def loss_iso():
                        m, stand_in = var_model(), ref_model()
                        m.forward = stand_in.forward
                        return loss_check(m, stand_in)
                    _rec(res["3(b)ii"], case, "full", loss_full)
                    _rec(res["3(b)ii"], case, "iso", loss_iso)

            # generate: prompt + new tokens stay within the context
            for T0, n in ((1, CTX - 1), (3, 4), (CTX - 1, 1), (2, 0)):
                case = f"cfg{ci} B{B} T{T0}+{n}"
                g = torch.Generator().manual_seed(7 + ci * 100 + B * 10 + T0)
                prompt = torch.randint(0, VOCAB, (B, T0), generator=g)
                expected = ref_model().generate(prompt.clone(), n)

                def gen_full(prompt=prompt, n=n, e=expected):
                    torch.manual_seed(0)
                    return _diff(var_model().generate(prompt.clone(), n), e)

                def gen_iso(prompt=prompt, n=n, e=expected):
                    m, stand_in = var_model(), ref_model()
                    m.forward = stand_in.forward
                    torch.manual_seed(0)
                    return _diff(m.generate(prompt.clone(), n), e)
                _rec(res["3(a)vi"], case, "full", gen_full)
                _rec(res["3(a)vi"], case, "iso", gen_iso)
    return res


def utils_checks(R, RU, VU) -> list:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    out = []
    torch.manual_seed(5)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=CTX, n_embd=12, n_layer=2, n_head=3)).eval()
    randomize(hf)
    hf_sd = hf.state_dict()

    def convert():
        got = VU.state_dict_converter(dict(hf_sd))
        want = RU.state_dict_converter(dict(hf_sd))
        if set(got) != set(want):
            return math.inf, f"keys differ: {sorted(set(got) ^ set(want))[:3]}"
        worst, msg = 0.0, ""
        for k in want:
            d, m = _diff(got[k], want[k])
            if d > worst:
                worst, msg = d, f"{k} {m}"
        return worst, msg
    _rec(out, "hf-gpt2-small", "full", convert)
    return out


def hf_sanity(R, RU) -> float:
    """The reference itself: converted Hugging Face weights must give Hugging Face's logits."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(5)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=CTX, n_embd=12, n_layer=2, n_head=3)).eval()
    randomize(hf)
    m = R.Transformer(R.ModelConfig(12, 3, 2, CTX, VOCAB)).eval()
    m.load_state_dict(RU.state_dict_converter(hf.state_dict()))
    ids = torch.randint(0, VOCAB, (2, CTX))
    with torch.no_grad():
        return _diff(m(ids), hf(ids).logits)[0]


def markov_chunks(num_chunks, chunk_len, vocab, successors, seed):
    """Rows from a sparse random Markov chain (the kind of data the grader trains on)."""
    import numpy as np
    import torch
    rng = np.random.default_rng(1234)
    trans = np.zeros((vocab, vocab))
    for i in range(vocab):
        others = np.setdiff1d(np.arange(vocab), [(i + 1) % vocab])
        nxt = np.concatenate([[(i + 1) % vocab], rng.choice(others, successors - 1, replace=False)])
        trans[i, nxt] = rng.dirichlet(np.ones(successors))
    cum = np.cumsum(trans, axis=1)
    rng = np.random.default_rng(seed)
    out = np.empty((num_chunks, chunk_len), dtype=np.int64)
    out[:, 0] = rng.integers(0, vocab, num_chunks)
    for _ in range(50):  # burn in towards the stationary distribution
        out[:, 0] = np.minimum((rng.random(num_chunks)[:, None] > cum[out[:, 0]]).sum(1), vocab - 1)
    for t in range(1, chunk_len):
        out[:, t] = np.minimum((rng.random(num_chunks)[:, None] > cum[out[:, t - 1]]).sum(1), vocab - 1)
    return torch.from_numpy(out)


def train_checks(R, folder: str, criterion: bool) -> list:
    import torch
    out = []
    try:
        tr = load_train(folder)
    except BaseException as e:  # noqa: BLE001
        return [{"case": "import", "mode": "smoke", "status": "crash", "diff": math.inf, "msg": _short(e)}]
    original = tr.Transformer
    built = []

    class Recording(original):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            built.append((self, {k2: v.detach().clone() for k2, v in self.state_dict().items()}))

    cfg = tr.ModelConfig(**TRAIN_CFG)
    path_rel = f"datasets/tinystories_10pct_chunk_size_{TRAIN_CFG['context_length']}.pt"
    cwd = os.getcwd()
    try:
        tr.Transformer = Recording
        # smoke: 5 steps on random tokens
        run = Path(folder) / "smoke"
        (run / "datasets").mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        torch.save(torch.randint(0, TRAIN_CFG["vocab_size"], (200, TRAIN_CFG["context_length"])), run / path_rel)
        os.chdir(run)
        t0 = time.time()
        try:
            tr.train(learning_rate=TRAIN_LR, gradient_clipping=None, model_config=cfg, batch_size=TRAIN_BATCH,
                     max_steps=5)
            ok = Path("losses_and_grad_norms.png").exists()
            out.append({"case": "5 steps", "mode": "smoke", "status": "agree" if ok else "differ", "diff": 0.0,
                        "msg": f"{time.time() - t0:.1f}s" + ("" if ok else ", no plot saved")})
        except _Timeout:
            raise
        except BaseException as e:  # noqa: BLE001
            out.append({"case": "5 steps", "mode": "smoke", "status": "crash", "diff": math.inf, "msg": _short(e)})
        if criterion:
            run = Path(folder) / "train100"
            (run / "datasets").mkdir(parents=True, exist_ok=True)
            data = markov_chunks(TRAIN_BATCH * TRAIN_STEPS, TRAIN_CFG["context_length"], TRAIN_CFG["vocab_size"],
                                 3, seed=1)
            heldout = markov_chunks(64, TRAIN_CFG["context_length"], TRAIN_CFG["vocab_size"], 3, seed=2)
            torch.save(data, run / path_rel)
            os.chdir(run)
            built.clear()
            torch.manual_seed(0)
            t0 = time.time()
            try:
                tr.train(learning_rate=TRAIN_LR, gradient_clipping=TRAIN_CLIP, model_config=cfg, batch_size=TRAIN_BATCH,
                         max_steps=TRAIN_STEPS)
                if len(built) != 1:
                    raise RuntimeError(f"train() built {len(built)} Transformers")
                model, initial = built[0]
                final = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

                def heldout_loss(sd):
                    m = R.Transformer(R.ModelConfig(**TRAIN_CFG))
                    m.load_state_dict({k: v.cpu() for k, v in sd.items()})
                    with torch.no_grad():
                        return float(m.get_loss_on_batch(heldout))
                l0, l1 = heldout_loss(initial), heldout_loss(final)
                drop = l0 - l1
                out.append({"case": "100 steps", "mode": "criterion",
                            "status": "agree" if drop >= MIN_DROP else "differ", "diff": drop,
                            "msg": f"held-out {l0:.3f} -> {l1:.3f} ({time.time() - t0:.1f}s)"})
            except _Timeout:
                raise
            except BaseException as e:  # noqa: BLE001
                out.append({"case": "100 steps", "mode": "criterion", "status": "crash", "diff": math.inf,
                            "msg": _short(e)})
    finally:
        os.chdir(cwd)
        tr.Transformer = original
    return out


def worker(root: str, jobs: list[str]) -> None:
    import torch
    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    R, RU = load_set(os.path.join(root, "_reference"))
    print("SANITY " + json.dumps({"hf_logits_vs_reference": hf_sanity(R, RU)}), flush=True)
    for job in jobs:
        name, train_flag, crit_flag = job.split(":")
        folder = os.path.join(root, name)
        res = {"name": name}
        signal.alarm(PER_VARIANT_TIMEOUT_S)
        try:
            try:
                V, VU = load_set(folder)
            except _Timeout:
                raise
            except BaseException as e:  # noqa: BLE001
                msg = _short(e)
                res["import_error"] = msg
                for item in ALL_ITEMS:
                    res[item] = [{"case": "import", "mode": "full", "status": "crash", "diff": math.inf, "msg": msg}]
                print("RESULT " + json.dumps(res), flush=True)
                continue
            res.update(model_checks(R, V))
            res["utils"] = utils_checks(R, RU, VU)
            if train_flag == "1":
                res["3(b)iii"] = train_checks(R, folder, crit_flag == "1")
            else:
                res["3(b)iii"] = []
        except _Timeout as e:
            res["timeout"] = str(e)
        except BaseException as e:  # noqa: BLE001
            res["harness_error"] = traceback.format_exc()[-800:]
        finally:
            signal.alarm(0)
        print("RESULT " + json.dumps(res), flush=True)


# =============================================================================================
# driver side
# =============================================================================================

def summarize(item: str, records: list) -> tuple[str, str]:
    """(cell, note): '.' agree; 'D'/'X' iso (owner-level) differ/crash; 'd'/'x' only with own
    submodules; for 3(b)iii 'F' criterion fail, 'X' crash, 's' smoke-only pass; '-' not run."""
    if not records:
        return "-", ""
    if item == "3(b)iii":
        smoke = [r for r in records if r["mode"] == "smoke"]
        crit = [r for r in records if r["mode"] == "criterion"]
        bad = [r for r in smoke + crit if r["status"] != "agree"]
        note = "; ".join(f"{r['mode']}: {r['msg']}" for r in crit + [r for r in smoke if r["status"] != "agree"])
        if any(r["status"] == "crash" for r in bad):
            return "X", note
        if bad:
            return "F", note
        return ("." if crit else "s"), note
    iso_modes = {r["mode"] for r in records}
    owner = [r for r in records if r["mode"] == ("iso" if "iso" in iso_modes else "full")]
    first_bad = next((r for r in owner if r["status"] != "agree"), None)
    if first_bad:
        cell = "X" if any(r["status"] == "crash" for r in owner) else "D"
        return cell, f"{first_bad['case']} {first_bad['mode']}: {first_bad['msg'] or 'max diff %.2g' % first_bad['diff']}"
    other_bad = next((r for r in records if r["status"] != "agree"), None)
    if other_bad:
        cell = "x" if any(r["status"] == "crash" for r in records) else "d"
        return cell, f"{other_bad['case']} {other_bad['mode']}: {other_bad['msg'] or 'max diff %.2g' % other_bad['diff']}"
    return ".", ""


def verdict(variant, cells: dict, res: dict) -> tuple[bool, list[str]]:
    problems = []
    if "timeout" in res or "harness_error" in res:
        return False, [res.get("timeout") or res.get("harness_error")]
    if variant.kind == "correct":
        for item in ALL_ITEMS:
            if cells[item] not in (".", "-", "s"):
                problems.append(f"{item} {cells[item]}")
    else:
        for item in variant.loses:
            if cells[item] not in ("D", "X", "F"):
                problems.append(f"loses {item} but cell is {cells[item]!r}")
        for item in variant.keeps:
            if cells[item] not in (".", "s") or (item == "3(b)iii" and cells[item] != "."):
                problems.append(f"keeps {item} but cell is {cells[item]!r}")
    return not problems, problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", default=str(DEFAULT_REFERENCE))
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--train-all", action="store_true", help="run the 100-step criterion for every variant")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1:])
        return 0

    sys.path.insert(0, str(HERE))
    import variants as corpus

    from types import SimpleNamespace
    ref_variant = SimpleNamespace(name="_reference", kind="correct", description="the staff reference",
                                  edits=(), replace=(), loses=(), keeps=())
    chosen = [v for v in corpus.VARIANTS if not args.only or v.name in args.only]
    if not args.only:
        chosen = [ref_variant] + chosen
    names = [v.name for v in corpus.VARIANTS]
    assert len(names) == len(set(names)), "duplicate variant names"

    tmp = tempfile.mkdtemp(prefix="a3_variants_")
    root = Path(tmp)
    ref_files = {f: (Path(args.reference) / f).read_text() for f in corpus.FILES}
    (root / "_reference").mkdir()
    for f, text in ref_files.items():
        (root / "_reference" / f).write_text(text)
    jobs = []
    for v in chosen:
        files = ref_files if v is ref_variant else corpus.apply(v, args.reference)
        (root / v.name).mkdir(exist_ok=True)
        for f, text in files.items():
            (root / v.name / f).write_text(text)
        touches_train = any(e.file == "train.py" for e in v.edits) or any(f == "train.py" for f, _ in v.replace)
        wants_crit = (args.train_all or touches_train or v.kind == "correct"
                      or "3(b)iii" in v.loses or "3(b)iii" in v.keeps)
        run_train = touches_train or wants_crit
        jobs.append(f"{v.name}:{int(run_train)}:{int(wants_crit)}")

    t_start = time.time()
    results: dict[str, dict] = {}
    sanity = None
    pending = list(jobs)
    while pending:
        n = max(1, min(args.workers, len(pending)))
        chunks = [pending[i::n] for i in range(n)]
        procs = []
        for i, chunk in enumerate(chunks):
            log = open(root / f"worker{i}_{len(results)}.log", "w")
            p = subprocess.Popen([sys.executable, __file__, "--worker", str(root), *chunk], cwd=str(root),
                                 stdout=subprocess.PIPE, stderr=log, text=True)
            procs.append((p, chunk, log))
        for p, chunk, log in procs:
            stdout, _ = p.communicate()
            log.close()
            for line in stdout.splitlines():
                if line.startswith("RESULT "):
                    r = json.loads(line[len("RESULT "):])
                    results[r["name"]] = r
                elif line.startswith("SANITY "):
                    sanity = json.loads(line[len("SANITY "):])
        done = [j for j in pending if j.split(":")[0] in results]
        lost = [j for j in pending if j not in done]
        if lost and len(lost) == len(pending):
            # a worker died on the first job of its chunk: record that job as a harness error, go on
            for p, chunk, _ in procs:
                first = next((j for j in chunk if j in lost), None)
                if first:
                    results[first.split(":")[0]] = {"name": first.split(":")[0],
                                                    "harness_error": f"worker exited {p.returncode}"}
            lost = [j for j in lost if j.split(":")[0] not in results]
        pending = lost

    # ---- table ----------------------------------------------------------------------------------
    by_name = {v.name: v for v in chosen}
    header = ["variant", "kind", *[i.replace("3(a)", "a").replace("3(b)", "b") for i in ALL_ITEMS], "verdict"]
    rows, failures = [], []
    for v in chosen:
        res = results[v.name]
        cells, notes = {}, {}
        for item in ALL_ITEMS:
            cells[item], notes[item] = summarize(item, res.get(item, []))
        ok, problems = verdict(v, cells, res)
        rows.append([v.name, v.kind, *[cells[i] for i in ALL_ITEMS], "OK" if ok else "FAIL"])
        res["_cells"], res["_notes"], res["_problems"] = cells, notes, problems
        if not ok:
            failures.append(v.name)
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    print(fmt.format(*header))
    print(fmt.format(*["-" * w for w in widths]))
    for r in rows:
        print(fmt.format(*r))
    print("\nlegend: '.' agrees  D/X: differs/crashes in the isolated check (stand-ins)  d/x: only with the "
          "variant's own submodules  b iii: '.' criterion met, F missed, X crashed, s smoke only, '-' not run")
    print(f"reference sanity: HF GPT-2 logits vs converted reference max diff {sanity}")
    print("\ntraining criterion (held-out loss of the model train() built, 100 steps):")
    for v in chosen:
        note = results[v.name]["_notes"].get("3(b)iii")
        if note:
            print(f"  {v.name:<32} {note}")
    print("\nwhat each bug trips (first failing case of each non-'.' item):")
    for v in chosen:
        if v.kind != "bug":
            continue
        res = results[v.name]
        bits = [f"{i}={res['_cells'][i]} ({res['_notes'][i]})" for i in v.loses]
        print(f"  {v.name:<32} " + "; ".join(bits))
    if failures:
        print("\nFAILED verdicts:")
        for name in failures:
            print(f"  {name}: {results[name]['_problems']}")
    kinds = [by_name[n].kind for n in by_name if n != "_reference"]
    print(f"\n{kinds.count('bug')} bugs, {kinds.count('correct')} correct variants; "
          f"{len(failures)} verdict(s) not as intended; {time.time() - t_start:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if not args.keep:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kept {tmp}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
