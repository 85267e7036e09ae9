import re

import torch


def state_dict_converter(hf_state_dict):
    """Convert the state dict of Hugging Face's GPT2LMHeadModel to the names of our Transformer.

    HF's GPT-2 uses Conv1D layers instead of nn.Linear: their weight is (in_features, out_features),
    so every Conv1D weight has to be transposed. c_attn holds W_q, W_k and W_v side by side
    (out_features = 3 * d_model), in that order.
    """
    new_sd = {}

    # embeddings, final layer norm, lm head
    new_sd["embeddings.weight"] = hf_state_dict["transformer.wte.weight"]
    new_sd["position_embeddings.weight"] = hf_state_dict["transformer.wpe.weight"]
    new_sd["final_layer_norm.weight"] = hf_state_dict["transformer.ln_f.weight"]
    new_sd["final_layer_norm.bias"] = hf_state_dict["transformer.ln_f.bias"]
    new_sd["lm_head.weight"] = hf_state_dict["lm_head.weight"]

    # how many layers? look for transformer.h.<i>.
    layer_ids = set()
    for key in hf_state_dict:
        m = re.match(r"transformer\.h\.(\d+)\.", key)
        if m:
            layer_ids.add(int(m.group(1)))

    for i in sorted(layer_ids):
        hf = f"transformer.h.{i}."
        ours = f"backbone.{i}."

        # layer norms: same shapes, just renamed
        for a, b in (("ln_1", "pre_layer_norm"), ("ln_2", "post_layer_norm")):
            new_sd[ours + b + ".weight"] = hf_state_dict[hf + a + ".weight"]
            new_sd[ours + b + ".bias"] = hf_state_dict[hf + a + ".bias"]

        # fused qkv: weight (d, 3d), bias (3d,)
        w = hf_state_dict[hf + "attn.c_attn.weight"]
        b = hf_state_dict[hf + "attn.c_attn.bias"]
        d = w.shape[0]
        w_q, w_k, w_v = torch.split(w, d, dim=1)
        b_q, b_k, b_v = torch.split(b, d, dim=0)
        new_sd[ours + "attention.W_q.weight"] = w_q.T.contiguous()
        new_sd[ours + "attention.W_k.weight"] = w_k.T.contiguous()
        new_sd[ours + "attention.W_v.weight"] = w_v.T.contiguous()
        new_sd[ours + "attention.W_q.bias"] = b_q.clone()
        new_sd[ours + "attention.W_k.bias"] = b_k.clone()
        new_sd[ours + "attention.W_v.bias"] = b_v.clone()

        # the other three Conv1D layers
        for a, b in (("attn.c_proj", "attention.W_o"), ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            new_sd[ours + b + ".weight"] = hf_state_dict[hf + a + ".weight"].T.contiguous()
            new_sd[ours + b + ".bias"] = hf_state_dict[hf + a + ".bias"]

    return new_sd
