"""utils.state_dict_converter (no points): Hugging Face GPT-2 weights in, ours out."""

import a3_fingerprints as fp
import torch
from a3_checklib import A3, Case, generator, tokens

from graders.checks.checking import CheckFailure, assert_close, diagnose, fail


def to_hf(state: dict[str, torch.Tensor], n_layers: int) -> dict[str, torch.Tensor]:
    """Our names back to GPT2LMHeadModel's (tests/ prove this matches transformers' own keys)."""
    hf = {"transformer.wte.weight": state["embeddings.weight"],
          "transformer.wpe.weight": state["position_embeddings.weight"],
          "transformer.ln_f.weight": state["final_layer_norm.weight"],
          "transformer.ln_f.bias": state["final_layer_norm.bias"],
          "lm_head.weight": state["lm_head.weight"]}
    for i in range(n_layers):
        ours, theirs = f"backbone.{i}.", f"transformer.h.{i}."
        for a, b in (("pre_layer_norm", "ln_1"), ("post_layer_norm", "ln_2")):
            hf[f"{theirs}{b}.weight"], hf[f"{theirs}{b}.bias"] = state[f"{ours}{a}.weight"], state[f"{ours}{a}.bias"]
        qkv = [state[f"{ours}attention.{n}.weight"] for n in ("W_q", "W_k", "W_v")]
        hf[f"{theirs}attn.c_attn.weight"] = torch.cat(qkv, dim=0).T.contiguous()
        hf[f"{theirs}attn.c_attn.bias"] = torch.cat([state[f"{ours}attention.{n}.bias"] for n in ("W_q", "W_k", "W_v")])
        for a, b in (("attention.W_o", "attn.c_proj"), ("mlp.fc1", "mlp.c_fc"), ("mlp.fc2", "mlp.c_proj")):
            hf[f"{theirs}{b}.weight"] = state[f"{ours}{a}.weight"].T.contiguous()
            hf[f"{theirs}{b}.bias"] = state[f"{ours}{a}.bias"]
    return hf


def test_converter_agrees(a3: A3):
    case = Case(12, 3, 2, 8, 21, 2, 8, 3)
    state, ref = a3.weights("Transformer", case)
    hf = to_hf(state, case.n_layers)
    reply = a3.worker.request("function", "utils.state_dict_converter", module="utils",
                              function="state_dict_converter", args=[{k: v.numpy() for k, v in hf.items()}])
    out = reply["out"]
    if out.get("kind") != "dict":
        fail(f"state_dict_converter returned {out.get('kind')}, expected a dict of tensors")
    converted = {k: torch.from_numpy(v["array"]).double() for k, v in out["items"].items() if "array" in v}
    model = a3.ref_module("Transformer", case)

    def mistake():  # which known conversion mistake the converted weights are, on failure only
        return diagnose(fp.flat_state(converted), fp.converter(state, hf, case.n_layers))

    try:
        model.load_state_dict(converted)
    except RuntimeError as e:
        fail(f"the converted state dict does not load into the Transformer: {str(e)[:500]}", diagnosis=mistake())
    ids = tokens(case, generator(case, 1, a3.seed))
    try:
        assert_close(model(ids).detach(), ref(ids).detach(), "logits with converted GPT-2 weights")
    except CheckFailure as failure:
        failure.diagnosis = mistake()
        raise
