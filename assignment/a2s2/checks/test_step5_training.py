"""Step 5: the student's train() on the grader's data, judged by the held-out loss the grader
recomputes from the weights it leaves. The run uses the given scaffold with the grader's stand-in
attention (a causal running mean) in every block, so it grades the loop alone: a bug of steps 1-4
costs points there, never here."""

import math

import numpy as np
import pytest
import torch
from a2s2_checklib import A2S2, reference
from a2s2_fingerprints import known

from graders.checks.checking import fail
from graders.checks.synthdata import make_source, sample_chunks
from graders.checks.vacuous import TRIVIAL
from graders.execution.client import StudentError, WorkerError
from graders.execution.worker import standins
from graders.scoring.results import Training

MODEL = ("vocab_size", "d_model", "n_heads", "n_layers", "context_length")


def data(nb: A2S2) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The source's entropy rate, the training rows and the held-out rows (context_length + 1 tokens)."""
    p, seeds = nb.grade.spec.params, nb.grade.spec.seeds
    source = make_source(int(p["vocab_size"]), int(p["successors"]), seeds.source)
    length = int(p["context_length"]) + 1
    return (source.entropy_rate, sample_chunks(source, int(p["train_rows"]), length, seeds.data),
            sample_chunks(source, int(p["heldout_rows"]), length, seeds.data + 1))


def heldout_loss(nb: A2S2, state: dict, heldout: torch.Tensor) -> float:
    """The scaffold with the stand-in attention, holding `state`: its loss on the held-out rows."""
    p, ref = nb.grade.spec.params, reference()
    model = ref.MiniTransformer(*(int(p[k]) for k in MODEL))
    for block in model.blocks:
        block.attn = standins.CausalMean(int(p["d_model"]))
    model.load_state_dict({k: torch.from_numpy(v["array"]) for k, v in state.items() if "array" in v})
    with torch.no_grad():
        return float(ref.lm_loss(model.double(), heldout))


@pytest.fixture(scope="module")
def run(grade) -> tuple[dict | None, str | None]:
    """One run shared by the step's checks: (reply, failure message)."""
    nb = A2S2(grade, "train")
    p = grade.spec.params
    floor, rows, heldout = data(nb)
    grade.training = Training(floor=floor, required_improvement=float(p["min_improvement_nats"]))
    grade.worker.begin_check()
    try:
        nb.require("MiniTransformer", "lm_loss", "train")
        reply = grade.worker.request("nb_train", "train", grade.spec.limits.train_timeout_s,
                                     filename=nb.run.filename, model_args=[int(p[k]) for k in MODEL],
                                     data=rows.numpy(), steps=int(p["train_steps"]), lr=float(p["train_lr"]),
                                     seed=nb.seed, at=nb.at)
        losses = [heldout_loss(nb, reply[key], heldout) for key in ("initial", "final")]
    except (StudentError, WorkerError) as e:
        return None, f"train() failed: {e}"
    except AssertionError as e:  # require() failed
        return None, str(e)
    except RuntimeError as e:
        return None, f"the model train() left does not load into the given scaffold: {str(e)[:400]}"
    grade.training.initial_loss, grade.training.final_loss = losses
    grade.training.steps = reply["steps"]
    if isinstance(reply.get("losses"), list):
        grade.training.recorded_losses = [x if _finite(x) else None for x in reply["losses"]]
    return reply, None


def test_training_improves(grade, run):
    reply, problem = run
    if problem:
        fail(problem)
    t, need = grade.training, float(grade.spec.params["min_improvement_nats"])
    if not math.isfinite(t.final_loss) or t.initial_loss - t.final_loss < need:
        fail(f"held-out loss, recomputed by the grader from the weights train() left, went from {t.initial_loss:.3f} "
             f"to {t.final_loss:.3f} nats (floor {t.floor:.3f}); it must drop by at least {need:g}. Check that every "
             "step computes lm_loss on a batch, calls backward, optimizer.step() and zero_grad, with the lr given",
             measured=t.initial_loss - t.final_loss, tolerance=need,
             diagnosis=known("training_no_step") if reply["steps"] == 0 else None)


def test_training_steps(grade, run):
    reply, problem = run
    if problem:
        fail(problem)
    steps = int(grade.spec.params["train_steps"])
    if reply["steps"] != steps:
        fail(f"train(model, data, steps={steps}, lr) took {reply['steps']} optimizer steps; it should take exactly "
             f"{steps}", diagnosis=known("training_no_step") if reply["steps"] == 0 else None)
    if not _moved(reply):
        fail(f"train() took {steps} steps but no parameter of the model changed; {TRIVIAL}")
    losses = reply.get("losses")
    if not isinstance(losses, list) or len(losses) != steps or not all(map(_finite, losses)):
        got = f"{len(losses)} numbers" if isinstance(losses, list) else f"a {reply.get('returned')}"
        fail(f"train() returned {got}; it should return the {steps} training losses, one float per step")


def _moved(reply: dict) -> bool:
    initial, final = reply["initial"], reply["final"]
    return any(isinstance(v, dict) and "array" in v and "array" in final.get(k, {})
               and not np.array_equal(v["array"], final[k]["array"]) for k, v in initial.items())


def _finite(x: object) -> bool:
    return isinstance(x, float) and math.isfinite(x)
