"""A corpus of whole, correct A3 solutions written the way students write them (tests/corpus/students/
<name>/: model_solution.py and train.py, and utils.py for a few; the rest take reference/a3/utils.py,
which students are given). Each must get 30/30 from a fair grader: tests/test_students.py grades them,
tests/corpus/verify_students.py checks them against the reference outside the grader."""

from pathlib import Path

HERE = Path(__file__).resolve().parent / "students"
REFERENCE = HERE.parent.parent.parent / "reference" / "a3"

# extension tag -> what it is
EXTENSIONS = {
    "kv_cache": "Transformer.forward takes a KV cache (use_cache/past_key_values, past=, kv_cache=, start_pos=)",
    "extra_args": "attention/blocks take extra optional arguments, return tuples only when asked",
    "cached_generate": "generate runs its own cached path through forward (last token only, position offsets)",
    "helper_generate": "generate calls a private helper instead of self.forward",
    "block_attention_args": "the block calls self.attention(h, mask=None) / self.attention(h, layer_past)",
    "raise_after_train": "train() raises after its loop (missing checkpoints/, runs/<name>/, plots/)",
    "dropout": "attention and/or residual dropout, active only in train mode",
    "custom_init": "own weight init (GPT-2 scaled W_o/fc2, xavier), still via _init_weights()",
    "arange_no_device": "torch.arange(T) (or a mask) made without device=",
    "tabs": "a whole file indented with tabs",
    "non_ascii": "non-ASCII comments/docstrings (Chinese, accents, √, ·)",
    "dead_code": "dead code after a return",
    "einops": "einops.rearrange / einops.einsum",
    "jaxtyping": "jaxtyping annotations Float[Tensor, 'B T D']",
    "optional_mask": "attention takes an optional mask argument",
    "sdpa_causal": "F.scaled_dot_product_attention(is_causal=True)",
    "sdpa_mask": "F.scaled_dot_product_attention(attn_mask=<causal_mask buffer>)",
    "head_loop": "a python loop over the heads",
    "mask_neg1e9": "masked scores set to -1e9",
    "mask_finfo_min": "masked scores set to torch.finfo(dtype).min",
    "mask_where": "mask applied with torch.where",
    "inline_tril": "mask built inline with torch.tril(torch.ones(T, T))",
    "masked_fill_inplace": "masked_fill_ on a freshly computed scores tensor",
    "loss_flat": "F.cross_entropy on flattened logits",
    "loss_transposed": "F.cross_entropy on (B, V, T) transposed logits",
    "loss_gather": "log_softmax + gather",
    "gen_topk": "generate picks with torch.topk",
    "gen_max": "generate picks with torch.max",
    "gen_argmax_keepdim": "generate picks with argmax(keepdim=True)",
    "train_while": "a while training loop",
    "train_dataloader": "a DataLoader training loop",
    "train_enumerate_break": "enumerate over batches with break",
    "tqdm": "tqdm progress bar in the loop",
    "zero_grad_none": "optimizer.zero_grad(set_to_none=True)",
    "no_clip_inf": "gradient_clipping=None: no clipping, norm still recorded (max_norm=inf or by hand)",
    "deferred_annotations": "written for Python 3.14's deferred annotations: raises at import on 3.11",
    "own_utils": "the student's own (correct) utils.py",
}

_TAGS = {
    "amir_hf_cache": "kv_cache extra_args cached_generate block_attention_args loss_flat tqdm zero_grad_none",
    "bea_private_helper": "kv_cache extra_args helper_generate einops mask_finfo_min loss_transposed train_dataloader",
    "chen_chinese_comments": "non_ascii head_loop inline_tril gen_topk loss_flat train_while no_clip_inf tqdm",
    # KV caches and extended call protocols
    "dana_kv_dict": "kv_cache extra_args cached_generate einops loss_transposed train_while",
    "eli_start_pos": "kv_cache cached_generate sdpa_mask gen_topk raise_after_train",
    "fay_return_cache": "extra_args helper_generate mask_finfo_min loss_gather zero_grad_none",
    "gus_layer_past": "block_attention_args optional_mask head_loop gen_max train_dataloader",
    "hana_kv_dropout": "kv_cache cached_generate dropout custom_init arange_no_device no_clip_inf",
    "ivan_crop_context": "helper_generate mask_where tabs loss_flat train_enumerate_break",
    "jin_past_key_values": "kv_cache extra_args cached_generate jaxtyping mask_neg1e9 gen_argmax_keepdim",
    "kim_padding_mask": "optional_mask block_attention_args sdpa_causal loss_flat raise_after_train",
    # habits and style
    "leo_tabs": "tabs dead_code inline_tril mask_neg1e9 train_enumerate_break",
    "mia_py314": "deferred_annotations jaxtyping einops sdpa_causal loss_flat",
    "noor_accents": "non_ascii head_loop masked_fill_inplace gen_argmax_keepdim train_while",
    "omar_dropout": "dropout custom_init raise_after_train zero_grad_none loss_transposed",
    "pia_einsum": "einops mask_where loss_gather train_while tqdm",
    "quinn_dead_code": "dead_code arange_no_device optional_mask gen_topk no_clip_inf",
    "raj_own_utils": "own_utils mask_finfo_min loss_transposed train_dataloader",
    "sara_py314_forward_ref": "deferred_annotations tabs sdpa_mask gen_max",
    # more
    "tom_runs_dir": "raise_after_train tqdm custom_init loss_flat zero_grad_none",
    "uma_fused_qkv": "mask_neg1e9 gen_max arange_no_device train_while",
    "vik_sdpa_dropout": "sdpa_causal dropout raise_after_train gen_argmax_keepdim",
    "wen_chinese": "non_ascii einops inline_tril arange_no_device train_enumerate_break",
    "xav_manual_softmax": "head_loop loss_gather gen_argmax_keepdim masked_fill_inplace",
    "yara_prealloc_cache": "kv_cache cached_generate extra_args mask_where no_clip_inf",
    "zed_index_loop": "dead_code zero_grad_none no_clip_inf gen_topk tqdm",
    "abe_block_mask": "block_attention_args optional_mask mask_where jaxtyping dropout",
}

# folder name -> one line: what it covers
STUDENTS = {name: ", ".join(tags.split()) for name, tags in _TAGS.items()}
COVERAGE = {tag: [n for n, tags in _TAGS.items() if tag in tags.split()] for tag in EXTENSIONS}
DEFERRED = set(COVERAGE["deferred_annotations"])
RAISES_AFTER_TRAINING = set(COVERAGE["raise_after_train"])


def files(name: str) -> dict[str, str]:
    """The solution's three files as {filename: text}."""
    folder = HERE / name
    out = {f: (folder / f).read_text(encoding="utf-8") for f in ("model_solution.py", "train.py")}
    utils = folder / "utils.py"
    out["utils.py"] = (utils if utils.exists() else REFERENCE / "utils.py").read_text(encoding="utf-8")
    return out


def write_zips(folder: Path, names: list[str] | None = None) -> dict[str, Path]:
    """One submission.zip per solution (its three files at the top), in `folder`, by name."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    zips = {}
    for name in names or [n for n in STUDENTS if (HERE / n).is_dir()]:
        zips[name] = folder / f"{name}.zip"
        with zipfile.ZipFile(zips[name], "w") as z:
            for f, text in files(name).items():
                z.writestr(f, text)
    return zips


if __name__ == "__main__":  # python tests/corpus/students.py OUT [NAME ...]: the zips, to grade by hand
    import sys

    for path in write_zips(Path(sys.argv[1]), sys.argv[2:] or None).values():
        print(path)
