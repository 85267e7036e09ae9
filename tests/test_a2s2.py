"""A2S2, the mini-Transformer notebook: real notebooks graded by real `grade --assignment a2s2`
processes. Each planted bug (the guide's pitfalls) loses points on its own step only, with the
message and diagnosis that name it; correct variants and the reference get full marks; a zeros stub
of a step gets 0 on that step; the Gradescope bundle grades the reference."""

import ast
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import GRADE, REPO, grade_all, items, lost, messages, write_zip

from graders.checks.notebook import read_cells

A2S2 = REPO / "assignment" / "a2s2"
REFERENCE = (A2S2 / "reference" / "A2S2.py").read_text()
TEMPLATE = (A2S2 / "template" / "A2S2.py").read_text()
AUTO = {"1", "2", "3", "4", "5"}
# The notebook's own cells (tests, a short training run, the experiment) take a few seconds on a busy machine.
LIMITS = ["--assignment", "a2s2", "--limit", "call_timeout_s=8", "--limit", "train_timeout_s=30"]

SDPA = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
SOFTMAX = "return torch.softmax(scores, dim=-1) @ v"
MASK_FILL = 'scores = scores.masked_fill(~mask.bool(), float("-inf"))'
TRIL = "return torch.tril(torch.ones(T, T, dtype=torch.bool))"
SPLIT = "return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)"
MERGE = "return x.transpose(1, 2).reshape(B, T, n_heads * d_head)"
FORWARD = """        q = split_heads(self.q_proj(x), self.n_heads)
        k = split_heads(self.k_proj(x), self.n_heads)
        v = split_heads(self.v_proj(x), self.n_heads)
        out = scaled_dot_product_attention(q, k, v, causal_mask(x.shape[1]))
        return self.out_proj(merge_heads(out))
"""


def edit(*pairs: str, text: str = REFERENCE) -> str:
    """The reference with each (old, new) pair replaced; each old text must occur once."""
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def ipynb(text: str) -> str:
    """The percent-format notebook as a Jupyter notebook."""
    import json

    cells = []
    for cell in text.split("# %%")[1:]:
        header, _, body = cell.partition("\n")
        kind = "markdown" if "[markdown]" in header else "code"
        extra = {"outputs": [], "execution_count": None} if kind == "code" else {}
        cells.append({"cell_type": kind, "metadata": {}, "source": body.strip("\n").splitlines(True), **extra})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


PER_HEAD_LOOP = """        H = self.n_heads
        q = split_heads(self.q_proj(x), H)
        k = split_heads(self.k_proj(x), H)
        v = split_heads(self.v_proj(x), H)
        mask = causal_mask(x.shape[1])
        heads = [scaled_dot_product_attention(q[:, h], k[:, h], v[:, h], mask) for h in range(H)]
        return self.out_proj(merge_heads(torch.stack(heads, dim=1)))
"""
INLINE = """        B, T, D = x.shape
        H = self.n_heads
        q, k, v = (p(x).view(B, T, H, D // H).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D))
"""
EINSUM = ('scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])',
          'return torch.einsum("...qk,...kv->...qv", torch.softmax(scores, dim=-1), v)')

# name -> (notebook text, {item: points lost}, {item: words its message has}, {item: diagnosis id})
VARIANTS: dict[str, tuple[str, dict[str, float], dict[str, str], dict[str, str]]] = {
    "reference": (REFERENCE, {}, {}, {}),
    # step 1
    "transpose_fixed_axes": (edit("k.transpose(-2, -1)", "k.transpose(1, 2)"), {"1": 3},
                             {"1": "RuntimeError in scaled_dot_product_attention"}, {"1": "sdpa_transpose_fixed_axes"}),
    "softmax_over_queries": (edit("dim=-1) @ v", "dim=-2) @ v"), {"1": 3},
                             {"1": "scaled_dot_product_attention(q (2, 5, 4), k (2, 7, 4), v (2, 7, 3)) differs"},
                             {"1": "sdpa_softmax_over_queries"}),
    "no_scaling": (edit(" / math.sqrt(q.shape[-1])", ""), {"1": 3}, {"1": "differs from the reference"},
                   {"1": "sdpa_no_scaling"}),
    # step 2
    "mask_not_applied": (edit(MASK_FILL, MASK_FILL.removeprefix("scores = ")), {"2": 4 * 4 / 6},
                         {"2": "a mask that lets each query see exactly one key"}, {"2": "mask_ignored"}),
    "mask_upper_triangle": (edit("torch.tril(torch.ones(T, T", "torch.triu(torch.ones(T, T"), {"2": 4 * 3 / 6},
                            {"2": "causal_mask(2)[0, 1] is True"}, {"2": "mask_upper_triangle"}),
    # step 3
    "split_batch_mixed": (edit(SPLIT, "return x.reshape(n_heads, B, T, d_model // n_heads).transpose(0, 1)"),
                          {"3": 4 * 3 / 5}, {"3": "split_heads(x of shape (2, 5, 12), n_heads=3) differs"},
                          {"3": "split_batch_mixed"}),
    "merge_wrong_order": (edit(MERGE, "return x.permute(0, 2, 3, 1).reshape(B, T, n_heads * d_head)"),
                          {"3": 4 * 3 / 5}, {"3": "merge_heads(x of shape (2, 3, 5, 4)) differs"},
                          {"3": "merge_wrong_order"}),
    "split_not_divided": (edit(SPLIT, "return x.view(B, T, n_heads, d_model).transpose(1, 2)"), {"3": 4 * 3 / 5},
                          {"3": "is invalid for input of size 120"}, {"3": "split_not_divided"}),
    "merge_sums_heads": (edit(MERGE, "return x.sum(1)"), {"3": 4 * 3 / 5},
                         {"3": "merge_heads(x of shape (2, 3, 5, 4)) returned shape (2, 5, 4), expected (2, 5, 12)"},
                         {"3": "merge_not_concatenated"}),
    # step 4
    "no_out_proj": (edit("return self.out_proj(merge_heads(out))", "return merge_heads(out)"), {"4": 4 * 4 / 6},
                    {"4": "with the grader's stand-in split_heads"}, {"4": "self_attention_no_out_proj"}),
    # step 5
    "train_no_step": (edit("        optimizer.step()\n", ""), {"5": 4}, {"5": "took 0 optimizer steps"},
                      {"5": "training_no_step"}),
    # correct variants
    "einsum": (edit(SDPA, EINSUM[0], SOFTMAX, EINSUM[1]), {}, {}, {}),
    "torch_sdpa": (edit(SDPA, "return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"), {}, {}, {}),
    "minus_1e9_float_mask": (edit('float("-inf")', "-1e9", "~mask.bool()", "mask == 0",
                                  TRIL, "return torch.tril(torch.ones(T, T))"), {}, {}, {}),
    "per_head_loop": (edit(FORWARD, PER_HEAD_LOOP), {}, {}, {}),
    "inline_self_attention": (edit(FORWARD, INLINE), {}, {}, {}),
    "ipynb": (ipynb(REFERENCE), {}, {}, {}),
    # degenerate stubs: 0 on their step
    # (the stub replaces the mask's code too: step 2 keeps only causal_mask's half)
    "zeros_step1": (edit(SDPA, "return torch.zeros(*q.shape[:-1], v.shape[-1])"), {"1": 4, "2": 2}, {}, {}),
    "zeros_step2": (edit(MASK_FILL, "pass", TRIL, "return torch.zeros(T, T, dtype=torch.bool)"), {"2": 4}, {},
                    {"2": "mask_ignored"}),
    "zeros_step3": (edit(SPLIT, "return torch.zeros(B, n_heads, T, d_model // n_heads)",
                         MERGE, "return torch.zeros(B, T, n_heads * d_head)"), {"3": 4}, {}, {}),
    "zeros_step4": (edit(FORWARD, "        return torch.zeros_like(x)\n"), {"4": 4}, {}, {}),
    "zeros_step5": (edit("    losses = []\n    for step", "    return [0.0] * steps\n    for step"), {"5": 4}, {},
                    {"5": "training_no_step"}),
    # a hang in one call of merge_heads: the next check's fresh worker runs the notebook's cells again
    "merge_hangs_once": (edit(MERGE, "while tuple(x.shape) == (3, 8, 4, 1):\n        pass\n    " + MERGE),
                         {"3": 4 * 3 / 5}, {"3": "timed out after 8 s in merge_heads"}, {}),
    "template": (TEMPLATE, {i: 4 for i in AUTO},
                 {"1": "scaled_dot_product_attention is not answered (A2S2.py): cell 2 (line 22) is still the "
                       "template's placeholder", "3": "split_heads is not answered"}, {}),
}
SECONDS = {"merge_hangs_once": 25.0, "template": 3.0}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("a2s2")
    zips = [write_zip(folder / f"{name}.zip", {"A2S2.ipynb" if name == "ipynb" else "A2S2.py": text})
            for name, (text, *_) in VARIANTS.items()]
    return grade_all(zips, folder / "out", extra=LIMITS, seconds={z.stem: SECONDS.get(z.stem, 6.0) for z in zips})


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_loses_points_on_its_own_step(graded, name):
    _, loses, words, diagnoses = VARIANTS[name]
    r = graded[name]
    assert lost(r) - {"6"} == set(loses), {i: messages(r, i) for i in lost(r)}
    for item, points in loses.items():
        assert items(r)[item]["score"] == pytest.approx(4 - points, abs=0.01), messages(r, item)
    for item, text in words.items():
        assert text in messages(r, item), messages(r, item)
    for item in AUTO:
        # charged checks only: an excused one keeps what it saw (the whole SelfAttention unmasked)
        charged = [c for c in items(r)[item]["checks"] if c["status"] == "failed"]
        found = {c["diagnosis"]["id"] for c in charged if c.get("diagnosis")}
        assert found == ({diagnoses[item]} if item in diagnoses else set()), (item, found, messages(r, item))


def test_reference_full_marks_and_the_report_by_hand(graded):
    r = graded["reference"]
    assert r["score"] == 20 and r["max_score"] == 24 and not r["problems"] and not r["warnings"], r["warnings"]
    report = items(r)["6"]
    assert report["status"] == "manual" and report["max_score"] == 4 and len(report["rubric"]) == 4
    t = r["training"]
    assert t["steps"] == 120 and t["initial_loss"] - t["final_loss"] > 2 and len(t["recorded_losses"]) == 120
    assert graded["ipynb"]["submission"]["files"] == ["A2S2.ipynb"]


def test_the_template_is_the_reference_but_its_todos():
    """Every cell of the template without a TODO is the reference's, byte for byte: the scaffold
    students get is the one the grader's reference holds."""
    ref = {c.source for c in read_cells(A2S2 / "reference" / "A2S2.py")}
    given = [c for c in read_cells(A2S2 / "template" / "A2S2.py") if "TODO" not in c.source]
    assert len(given) >= 7 and all(c.source in ref for c in given), [c.where() for c in given if c.source not in ref]
    todo = {n.name for c in read_cells(A2S2 / "template" / "A2S2.py") if "TODO" in c.source
            for n in ast.walk(ast.parse(c.source)) if isinstance(n, ast.FunctionDef)}
    assert {"scaled_dot_product_attention", "causal_mask", "split_heads", "merge_heads", "forward", "train"} <= todo


def test_the_gradescope_bundle_grades_the_reference(tmp_path):
    from test_gradescope_bundle import _env, _root

    archive = tmp_path / "autograder-a2s2.zip"
    p = subprocess.run([*GRADE, "gradescope-bundle", "--assignment", "a2s2", "--out", str(archive)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"assignment/a2s2/spec.toml", "assignment/a2s2/checks/a2s2_checklib.py",
            "assignment/a2s2/reference/A2S2.py"} <= names
    assert not any(n.startswith(("assignment/a3/", "reference/a3/", "tests/")) for n in names)
    root = _root(tmp_path, "a2s2", archive, {"A2S2.py": REFERENCE})
    for step in (["bash", str(root / "source" / "setup.sh"), "perms"], [str(root / "run_autograder")]):
        p = subprocess.run(step, env=_env(root), capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    import json

    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 20, json.dumps(results)[:3000]
    by_hand = [t for t in results["tests"] if "graded by hand" in t.get("tags", [])]
    assert len(by_hand) == 1 and "rubric" not in json.dumps(by_hand[0]).lower()
    assert Path(root / "grader-out" / "results.json").exists()


@pytest.fixture
def checks_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(A2S2 / "checks"))


def _distinct(fps, expected, tol_factor: float = 10.0) -> None:
    """No fingerprint matches the right output, and no two match each other, within 10x the
    checks' tolerance, where both can be computed: a diagnosis is never the wrong one."""
    import torch

    from graders.checks.checking import tolerance

    outs = {}
    for f in fps:
        try:
            out = f.output().double()
        except RuntimeError:  # a mistake that cannot run on this case matches nothing
            continue
        if torch.isfinite(out).all():  # nor does one that gives NaN (diagnose's rule)
            outs.setdefault(f.id, []).append(out)
    flat = [(name, o) for name, os in outs.items() for o in os]
    for name, out in flat:
        if out.shape == expected.shape:
            assert float((out - expected).abs().max()) > tol_factor * tolerance(expected), name
    for i, (a, oa) in enumerate(flat):
        for b, ob in flat[i + 1:]:
            if a != b and oa.shape == ob.shape:
                assert float((oa - ob).abs().max()) > tol_factor * tolerance(oa), (a, b)


def test_fingerprints_never_match_the_reference_nor_each_other(checks_importable):
    import a2s2_fingerprints as fp
    import torch
    from a2s2_attend import EXPLICIT
    from a2s2_checklib import generator, randn, reference

    ref = reference()
    for case in EXPLICIT:
        q, k, v = case.tensors(1)
        _distinct(fp.attention(q, k, v), ref.scaled_dot_product_attention(q, k, v))
        mask = torch.rand(case.tq, case.tk, generator=generator(case.seed)) < 0.5
        mask[:, 0] = True
        _distinct(fp.masked(q, k, v, mask), ref.scaled_dot_product_attention(q, k, v, mask))
    for T in (2, 5, 7):
        _distinct(fp.causal_masks(T), ref.causal_mask(T).double())
    for B, T, D, H in ((2, 5, 12, 3), (2, 6, 16, 4), (3, 4, 8, 2)):
        x = randn(generator(B, T, D, H), B, T, D)
        _distinct(fp.split(x, H), ref.split_heads(x, H))
        heads = randn(generator(H, B), B, H, T, D // H)
        _distinct(fp.merge(heads), ref.merge_heads(heads))
    for d_model, n_heads in ((12, 3), (16, 4)):
        attn = ref.SelfAttention(d_model, n_heads).double()
        x = randn(generator(d_model), 2, 5, d_model)
        with torch.no_grad():
            _distinct(fp.self_attention(attn, x, ref), attn(x))
