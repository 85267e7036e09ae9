"""train.py as students really write it: whole files (tests/corpus/train_habits/<name>.py, each the
submission's train.py beside the reference's model_solution.py and utils.py), each with the
habits it shows and what the grade must say of it. Correct model code gets 30/30 whatever the
habit, with a warning naming the line of whatever the grader put in place of the student's
environment; a habit that truly stops training costs 3(b)iii with a message naming the line and
the fix; a planted loss bug costs 3(b)ii only. tests/test_train_habits.py grades them all with
real `grade` processes. docs/train-py.md has the same table, for TAs."""

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent.parent.parent / "reference" / "a3"

# get_loss_on_batch's body in reference/a3/model_solution.py, for the planted loss bugs
LOSS = """        logits = self(input_ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1))
"""
UNSHIFTED = """        logits = self(input_ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids.reshape(-1))
"""
DETACHED = """        logits = self(input_ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1))
        return torch.tensor(loss.item(), requires_grad=True)
"""
ONCE = "That is 3(b)ii's bug, and it costs points there only"
SHELL = "notebook shell commands or magics, not Python"
STAND_IN = "is left out of grading (trackers and notebook helpers need an account, the network or a notebook"


@dataclass(frozen=True)
class Case:
    train: str  # the file of this folder that is the submission's train.py
    habits: str  # what the file does the way students do it
    score: float
    lost: tuple[str, ...] = ()  # the items that lose points (none: 30/30)
    says: tuple[str, ...] = ()  # in the report's problems or the lost items' messages, each
    warns: tuple[str, ...] = ()  # in the report's warnings, each (none listed: no warnings at all)
    model: tuple[str, str] | None = None  # a planted bug: (old, new), once, in model_solution.py
    edit: tuple[str, str] | None = None  # a change to the train file, once: (old, new)


CASES = {
    # -- argparse in every position ---------------------------------------------------------------
    "argparse_module_level": Case("argparse_module_level", "argparse at module level (args = "
                                  "parser.parse_args()), logging.basicConfig, a parsed option read in train()", 30),
    "argparse_in_main": Case("argparse_in_main", "argparse in main() with a required --lr, seeds in a helper, "
                             "tqdm with set_postfix, zero_grad(set_to_none=True)", 30),
    "argparse_in_function": Case("argparse_in_function", "train() parses the command line itself (get_args())", 30),
    "argparse_required": Case(
        "argparse_required", "a required argument parsed at module level", 27, ("3(b)iii",),
        says=("train.py, line 19: argparse stopped it at import (the following arguments are required: --data_dir)",
              "with no arguments: give every argument a default")),
    # -- experiment tracking ------------------------------------------------------------------------
    "wandb_logging": Case("wandb_logging", "wandb.login/init(config=...)/watch/log/Image/finish, the learning "
                          "rate read back from wandb.config, a file saved into wandb.run.dir, tqdm.auto", 30,
                          warns=(f"train.py, line 5: wandb {STAND_IN}",)),
    "tensorboard_checkpoints": Case("tensorboard_checkpoints", "torch.utils.tensorboard's SummaryWriter, "
                                    "checkpoints into os.makedirs'd checkpoints/ every 25 steps", 30,
                                    warns=(f"train.py, line 12: torch.utils.tensorboard {STAND_IN}",)),
    "mlflow_comet_neptune": Case("mlflow_comet_neptune", "comet_ml imported before torch, mlflow runs as a "
                                 "context manager, neptune's run['train/loss'].append, swanlab", 30,
                                 warns=tuple(f"train.py, line {n}: {p} {STAND_IN}" for n, p in
                                             ((2, "comet_ml"), (4, "mlflow"), (5, "neptune"), (6, "swanlab")))),
    # -- notebooks ------------------------------------------------------------------------------------
    "colab_export": Case("colab_export", "Colab's Download .py: !pip and !nvidia-smi lines, drive.mount, "
                         "commented %magics, tqdm.notebook, IPython.display's clear_output and display, plt.show", 30,
                         warns=(f"train.py, lines 13, 14, 99: `!pip install -q datasets transformers einops "
                                f"jaxtyping`, `!nvidia-smi`, `!ls -la datasets` are {SHELL}",
                                f"train.py, line 16: google.colab {STAND_IN}", f"train.py, line 26: IPython {STAND_IN}",
                                "train.py, line 27: tqdm.notebook draws its bars as Jupyter widgets")),
    "jupyter_export": Case("jupyter_export", "Jupyter's Download as Python: get_ipython().system and "
                           "run_line_magic, # In[n]: markers, a bare expression, plt.show()", 30,
                           warns=("train.py, line 10: get_ipython().system('pip install datasets transformers') is "
                                  "a notebook's command", "train.py, line 13: get_ipython().run_line_magic("
                                  "'autoreload', '2') is a notebook's command")),
    # -- speed and reproducibility ----------------------------------------------------------------
    "amp_compile_scheduler": Case("amp_compile_scheduler", "torch.compile(model), autocast and GradScaler "
                                  "(enabled on CUDA only), warmup + cosine LambdaLR, TF32 switches", 30,
                                  warns=("train.py, line 70: torch.compile was skipped",)),
    "seeds_resume": Case("seeds_resume", "seeds at module level, deterministic algorithms, a checkpoint "
                         "resumed when present and removed when done, the final weights saved", 30),
    "dataloader_logging": Case("dataloader_logging", "a DataLoader with num_workers=2, logging to train.log "
                               "and stdout, enumerate with break", 30,
                               warns=("train.py, line 59: DataLoader with worker processes",)),
    # -- plots --------------------------------------------------------------------------------------
    "plots_live": Case("plots_live", "no matplotlib.use: plt.ion, plt.pause, plt.show(block=False), a copy "
                       "saved into plots/", 30),
    # After pyplot's import, use() switches at once (before it, a fresh matplotlib would fail only at the
    # first figure, the zygote's, whose pyplot is loaded, at once: see docs/train-py.md's limits).
    "tk_backend": Case("tk_backend", "matplotlib.use('TkAgg') for a plot window, after importing pyplot", 27,
                       ("3(b)iii",), says=("train.py failed at import (train.py, line 8): ImportError: Cannot load "
                                           "backend 'TkAgg'", "A grade has no screen")),
    # -- data and the network -----------------------------------------------------------------------
    "data_always_downloaded": Case("data_always_downloaded", "train() calls get_chunked_tinystories every "
                                   "time, never the cached file", 30,
                                   warns=("train.py, line 39: get_chunked_tinystories(32) would download its data, "
                                          "and a grade has no network: it was given the grader's own training data",)),
    "download_at_import": Case(
        "download_at_import", "the tokenizer loaded at module level", 27, ("3(b)iii",),
        says=("train.py needs the network at import: line 16 calls AutoTokenizer.from_pretrained (transformers), "
              "and a grade has no network", 'move line 16 (and what uses its result) under `if __name__ == '
              '"__main__":`')),
    "download_in_train": Case(
        "download_in_train", "train() loads the tokenizer to print a sample", 27, ("3(b)iii",),
        says=("train() needs the network: line 56 calls AutoTokenizer.from_pretrained (transformers), and a grade "
              "has no network", "move that call out of train()")),
    "no_main_guard": Case(
        "no_main_guard", "the run started at the bottom of the file, no __main__ guard", 27, ("3(b)iii",),
        says=("line 79 calls train, which at line 52 calls get_chunked_tinystories, which at line 26 calls "
              "load_dataset (datasets)", "move line 79")),
    # -- the student's own machine ------------------------------------------------------------------
    "input_prompt": Case(
        "input_prompt", "input() at module level", 27, ("3(b)iii",),
        says=("train.py failed at import (train.py, line 16): EOFError: input('Name this run: ') was called, but a "
              "grade runs without a keyboard",)),
    "cuda_assumed": Case(
        "cuda_assumed", "device = torch.device('cuda')", 27, ("3(b)iii",),
        says=("(train.py, line 51)", "A grade runs on a CPU: pick the device as the handout does")),
    "checkpoint_folder_missing": Case(
        "checkpoint_folder_missing", "checkpoints saved into a checkpoints/ folder made by hand", 27, ("3(b)iii",),
        says=("(train.py, line 74): Parent directory checkpoints does not exist",
              "make a folder before writing into it")),
    "drive_paths": Case(
        "drive_paths", "the data file's path hard-coded on Colab's Drive", 27, ("3(b)iii",),
        says=("(train.py, line 53)", "'/content' is a path on your own machine (or Colab's Drive)"),
        warns=("train.py, line 52: get_chunked_tinystories(32) would download its data",)),
    # -- a planted loss bug costs 3(b)ii only ---------------------------------------------------------
    "loss_unshifted_wandb": Case("wandb_logging", "the loss not shifted, with wandb_logging's train.py", 24,
                                 ("3(b)ii",), model=(LOSS, UNSHIFTED),
                                 warns=(ONCE, f"train.py, line 5: wandb {STAND_IN}")),
    "loss_detached_colab": Case("colab_export", "a detached loss (a fresh tensor of loss.item()), with "
                                "colab_export's train.py", 28, ("3(b)ii",), model=(LOSS, DETACHED),
                                warns=(ONCE, "no gradient reaches the model's parameters")),
    "loss_unshifted_no_step": Case(
        "argparse_module_level", "the loss not shifted and the loop never steps: both items lose", 21,
        ("3(b)ii", "3(b)iii"), model=(LOSS, UNSHIFTED), edit=("        optimizer.step()\n", ""),
        says=("with the grader's next-token loss in place of your get_loss_on_batch (see the warnings), held-out "
              "loss",), warns=(ONCE,)),
}


def _once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} must occur once"
    return text.replace(old, new)


def files(name: str) -> dict[str, str]:
    """The submission of case `name`: its train.py, and the reference's other two files."""
    case = CASES[name]
    out = {f: (REFERENCE / f).read_text() for f in ("model_solution.py", "utils.py")}
    out["train.py"] = (HERE / f"{case.train}.py").read_text()
    if case.model:
        out["model_solution.py"] = _once(out["model_solution.py"], *case.model)
    if case.edit:
        out["train.py"] = _once(out["train.py"], *case.edit)
    return out
