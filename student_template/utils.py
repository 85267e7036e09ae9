"""Given: converts Hugging Face GPT-2 weights to the names of model_solution.Transformer."""

import torch

# GPT-2 stores these four projections as Conv1D, whose weight is (in, out): nn.Linear wants (out, in).
_CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")

_TOP_LEVEL = {
    "transformer.wte.weight": "embeddings.weight",
    "transformer.wpe.weight": "position_embeddings.weight",
    "transformer.ln_f.weight": "final_layer_norm.weight",
    "transformer.ln_f.bias": "final_layer_norm.bias",
    "lm_head.weight": "lm_head.weight",
}

_PER_LAYER = {
    "ln_1": "pre_layer_norm",
    "ln_2": "post_layer_norm",
    "attn.c_proj": "attention.W_o",
    "mlp.c_fc": "mlp.fc1",
    "mlp.c_proj": "mlp.fc2",
}


def state_dict_converter(hf_state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map a Hugging Face GPT2LMHeadModel state dict onto the A3 Transformer's names."""
    out = {}
    for key, value in hf_state_dict.items():
        if key in _TOP_LEVEL:
            out[_TOP_LEVEL[key]] = value
            continue
        if not key.startswith("transformer.h."):
            continue  # e.g. the causal-mask buffers some transformers versions keep
        layer, rest = key[len("transformer.h."):].split(".", 1)
        if rest in ("attn.bias", "attn.masked_bias"):
            continue
        if rest in _CONV1D_WEIGHTS:
            value = value.t()
        prefix = f"backbone.{layer}."
        if rest.startswith("attn.c_attn."):
            kind = rest.rsplit(".", 1)[1]
            q, k, v = value.chunk(3, dim=0)  # after the transpose the fused q,k,v run along rows
            for name, part in zip(("W_q", "W_k", "W_v"), (q, k, v)):
                out[f"{prefix}attention.{name}.{kind}"] = part.contiguous()
            continue
        module, kind = rest.rsplit(".", 1)
        out[prefix + _PER_LAYER[module] + "." + kind] = value.contiguous()
    return out
