"""3(b)iii: the student's own train() for max_steps steps, judged by the grader's own loss."""

import hashlib
import json
import os
import tempfile
from pathlib import Path

import a3_fingerprints as fp
import numpy as np
import pytest
import torch
from a3_checklib import A3, Case, next_token_loss, start_training, training_data

from graders.paths import REPO
from graders.checks.checking import fail
from graders.execution.client import StudentError, WorkerError
from graders.scoring.results import Training
from graders.checks.vacuous import TRIVIAL


@pytest.fixture(scope="module")
def run(grade):
    """One training run shared by this item's checks: (reply, failure message)."""
    tr = grade.spec.training
    source, data, heldout = training_data(grade)
    summary = Training(floor=source.entropy_rate, required_improvement=tr.min_improvement_nats)
    summary.reference_losses, summary.reference_final_loss = reference_curve(grade, data, heldout)
    grade.training = summary
    grade.worker.begin_check()
    start_training(grade)  # a no-op when conftest already sent it
    try:
        reply = grade.collect("train")
    except (StudentError, WorkerError) as e:
        hint = ""
        if "does not require grad" in str(e):
            hint = " (get_loss_on_batch must return a loss computed from the model's outputs: not implemented yet?)"
        return None, f"train() failed: {e}{hint}"
    if reply.get("models", 0) == 0:
        return None, "train() never built a Transformer (it must build Transformer(model_config))"
    after = reply.get("raised_after_loop")
    if isinstance(after, dict):  # the loop was done: its model is graded, the error is told
        grade.extra_warnings.append(f"train() raised after its training loop had finished: {StudentError(after, 'train()')}; "
                                    "the model it had trained is graded as it was")
    summary.steps = reply["loss_calls"]
    if reply.get("recorded"):
        summary.recorded_losses = reply["recorded"]["losses"]
    plot = reply.get("plot")
    if isinstance(plot, np.ndarray) and plot.dtype == np.uint8 and plot.ndim == 1:
        # Written on the trusted side, outside the worker's scratch; _keep_plot checks it is a PNG.
        received = grade.intake.folder.parent / "received" / "losses_and_grad_norms.png"
        received.parent.mkdir(exist_ok=True)
        received.write_bytes(plot.tobytes())
        summary.plot = str(received)
    else:
        grade.extra_warnings.append("train() saved no losses_and_grad_norms.png")
    a3 = A3(grade)
    case = Case(**tr.model.model_dump(), batch=tr.heldout_chunks, length=tr.model.context_length, seed=0)
    losses = []
    for key in ("initial", "final"):
        # In float32, as the weights came: float64 gave the same losses to 1e-8, at 3x the cost (two
        # passes over 256 chunks were a fifth of the trusted side's time on a grade).
        model = a3.ref_module("Transformer", case, dtype=torch.float32)
        # A buffer of the student's own (a persistent mask) is not part of the assignment's model.
        own = {b for b in reply.get("buffers", []) if isinstance(b, str)} - set(model.state_dict())
        state = {k: torch.from_numpy(v["array"]) for k, v in reply[key].items() if "array" in v and k not in own}
        try:
            model.load_state_dict({k: v.float() for k, v in state.items()})
        except RuntimeError as e:
            return reply, f"the model train() built does not match model_config: {str(e)[:400]}"
        with torch.no_grad():
            loss = float(next_token_loss(model(heldout), heldout))
        if not torch.isfinite(torch.tensor(loss)):
            return reply, f"the {key} weights give a held-out loss of {loss}"
        losses.append(loss)
    summary.initial_loss, summary.final_loss = losses
    return reply, None


def _cache_dir() -> Path:
    return Path(os.environ.get("GRADER_CACHE_DIR") or Path.home() / ".cache" / "transformer-grader")


def reference_curve(grade, data: torch.Tensor, heldout: torch.Tensor) -> tuple[list[float], float]:
    """The reference's own run on the same data and seed, for the report's plot: its training losses
    and its held-out loss afterwards. Trusted code, run here, so cached on disk by everything that
    decides it (the reference's source, the training spec, torch's version); never part of a score."""
    spec, tr = grade.spec, grade.spec.training
    folder = REPO / spec.reference_dir
    key = hashlib.sha256(json.dumps([tr.model_dump(), spec.seeds.model_dump(), torch.__version__]).encode())
    for name in sorted(spec.required_files):
        key.update((folder / name).read_bytes())
    path = _cache_dir() / f"a3-reference-curve-{key.hexdigest()[:24]}.json"
    try:
        cached = json.loads(path.read_text())
        return [float(x) for x in cached["losses"]], float(cached["final"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    ref = grade.ref.model_solution
    with torch.random.fork_rng():
        torch.manual_seed(spec.seeds.weights)  # as the worker does before the student's train()
        model = ref.Transformer(ref.ModelConfig(**tr.model.model_dump()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=tr.learning_rate)
    clip = float("inf") if tr.gradient_clipping is None else tr.gradient_clipping
    losses = []
    for step in range(min(tr.max_steps, len(data) // tr.batch_size)):
        optimizer.zero_grad()
        loss = model.get_loss_on_batch(data[step * tr.batch_size:(step + 1) * tr.batch_size])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        final = float(next_token_loss(model.double()(heldout), heldout))
    try:  # written whole or not at all: parallel grades may race here
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as fh:
            json.dump({"losses": losses, "final": final}, fh)
        os.replace(fh.name, path)
    except OSError:
        pass
    return losses, final


def test_training_improves(grade, run):
    reply, problem = run
    if problem:
        fail(problem)
    t, need = grade.training, grade.spec.training.min_improvement_nats
    if t.initial_loss - t.final_loss < need:
        fail(f"held-out loss, recomputed by the grader from your model's weights, went from {t.initial_loss:.3f} to "
             f"{t.final_loss:.3f} nats after train() (floor {t.floor:.3f}); it must drop by at least {need:g}. "
             "Check that the loop calls optimizer.step() and uses the learning rate it is given",
             measured=t.initial_loss - t.final_loss, tolerance=need, diagnosis=fp.training_diagnosis(A3(grade), reply))


def test_training_steps(grade, run):
    reply, problem = run
    if problem:
        fail(problem)
    steps = grade.spec.training.max_steps
    if reply["models"] != 1:
        fail(f"train() built {reply['models']} Transformer models; it should train one")
    if reply["loss_calls"] != steps:
        fail(f"train(max_steps={steps}) computed the loss {reply['loss_calls']} times; it should take exactly "
             f"{steps} steps when the data has more batches than that")
    if not _moved(reply):
        fail(f"train() took {steps} steps but no parameter of the model changed; {TRIVIAL}")


def _moved(reply: dict) -> bool:
    """Some parameter's weights differ between the start and the end of the run."""
    initial, final = reply.get("initial", {}), reply.get("final", {})
    return any(isinstance(v, dict) and isinstance(final.get(k), dict) and "array" in v and "array" in final[k]
               and not np.array_equal(v["array"], final[k]["array"]) for k, v in initial.items())

