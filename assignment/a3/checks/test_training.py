"""3(b)iii: the student's own train() for max_steps steps, judged by the grader's own loss."""

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import a3_fingerprints as fp
import numpy as np
import pytest
import torch
from a3_checklib import A3, Case, next_token_loss, start_training, training_data, training_fields

from graders.paths import REPO
from graders.checks.checking import fail
from graders.execution import habits
from graders.execution.client import StudentError, WorkerError
from graders.scoring.results import Training
from graders.checks.vacuous import TRIVIAL


@dataclass
class Run:
    """One run of the student's train(), graded: the worker's reply, why it cannot be graded (None:
    it can), and the held-out losses of its first and last weights."""

    reply: dict | None
    problem: str | None
    losses: tuple[float, float] | None = None
    grader_loss: bool = False  # run with the grader's next-token loss in place of the student's


LOSS_ITEM_RUNS = "Transformer.get_loss_on_batch"


@pytest.fixture(scope="module")
def run(grade):
    """The training run this item's checks grade. The student's own first; when it fails and the
    student's loss was not the next-token cross entropy of their own model's logits in it (3(b)ii
    charges that), a second run with the grader's loss in place of theirs, so that the loop is
    graded and the loss bug costs points once (the report says so)."""
    tr = grade.spec.training
    source, data, heldout = training_data(grade)
    summary = Training(floor=source.entropy_rate, required_improvement=tr.min_improvement_nats)
    summary.reference_losses, summary.reference_final_loss = reference_curve(grade, data, heldout)
    grade.training = summary
    grade.worker.begin_check()
    start_training(grade)  # a no-op when conftest already sent it
    own = _graded(grade, lambda: grade.collect("train"), heldout)
    chosen, check = own, _loss_check(own.reply)
    # Only a model whose forward gave logits of the batch can train with the grader's loss instead.
    if check["wrong"] is not None and check["logits"] and (own.problem or _improvement(grade, own)
                                                           or _steps_problem(grade, own)):
        chosen = _graded(grade, lambda: _rerun(grade), heldout, grader_loss=True)
        grade.extra_warnings.append(_rerun_warning(check["wrong"], own))
    if check["wrong"] is not None or check["checked"] > 0:  # the loss was replaced, or seen to be right
        loss_items = {i.id for i in grade.spec.items if i.runs == LOSS_ITEM_RUNS}
        for name in ("training_improves", "training_steps"):
            grade.ruled_out[name] = loss_items
    _summarize(grade, summary, own, chosen)
    return chosen


def _rerun(grade) -> dict:
    """train() again with the grader's loss, in a fresh worker (and folder): nothing the first run
    left, such as a checkpoint it would resume from, is there."""
    worker = grade.spare or grade.worker
    worker.kill()
    return worker.request("train", "train.train", grade.spec.limits.train_timeout_s, **training_fields(grade),
                          grader_loss=True)


def _graded(grade, get_reply: Callable[[], dict], heldout: torch.Tensor, grader_loss: bool = False) -> Run:
    try:
        reply = get_reply()
    except (StudentError, WorkerError) as e:
        return Run(None, f"train() failed: {e}", grader_loss=grader_loss)
    if isinstance(reply.get("raised"), dict):
        return Run(reply, _failed(grade, reply["raised"]), grader_loss=grader_loss)
    if reply.get("models", 0) == 0:
        return Run(reply, "train() never built a Transformer (it must build Transformer(model_config))",
                   grader_loss=grader_loss)
    tr = grade.spec.training
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
            return Run(reply, f"the model train() built does not match model_config: {str(e)[:400]}",
                       grader_loss=grader_loss)
        with torch.no_grad():
            loss = float(next_token_loss(model(heldout), heldout))
        if not torch.isfinite(torch.tensor(loss)):
            return Run(reply, f"the {key} weights give a held-out loss of {loss}", grader_loss=grader_loss)
        losses.append(loss)
    return Run(reply, None, (losses[0], losses[1]), grader_loss)


def _failed(grade, info: dict) -> str:
    """Why train() raised before its loop was done: a download in our words, else the error, with
    what it takes on a grading machine."""
    offline = habits.network_message(info, "train()", grade.spec.training.data_path)
    if offline:
        return offline
    hint = ""
    if "does not require grad" in str(info.get("message")):
        hint = " (get_loss_on_batch must return a loss computed from the model's outputs: not implemented yet?)"
    return habits.with_hint(f"train() failed: {StudentError(info, 'train.train')}{hint}", info)


def _loss_check(reply: dict | None) -> dict:
    """The worker's comparison of the student's loss with the definition in the run, checked."""
    check = reply.get("loss_check") if isinstance(reply, dict) else None
    check = check if isinstance(check, dict) else {}
    counts = {k: check[k] if isinstance(check.get(k), int) else 0 for k in ("checked", "logits")}
    return {**counts, "wrong": check.get("wrong") if isinstance(check.get("wrong"), dict) else None}


def _how_wrong(wrong: dict) -> str:
    yours, expected, call = wrong.get("yours"), wrong.get("expected"), wrong.get("call")
    if wrong.get("why") == "value" and isinstance(yours, float) and isinstance(expected, float):
        return (f"at its call {call if isinstance(call, int) else '?'} it gave {yours:.4f}, where the next-token "
                f"cross entropy of the logits your model gave in that call is {expected:.4f}")
    return str(wrong.get("why", ""))[:200]


def _rerun_warning(wrong: dict, own: Run) -> str:
    if own.problem:
        outcome = own.problem[:300]
    elif own.losses:
        outcome = f"the held-out loss went from {own.losses[0]:.3f} to {own.losses[1]:.3f}"
    else:
        outcome = "nothing could be graded"
    return (f"3(b)iii: in your train() run, get_loss_on_batch was not the next-token cross entropy of your model's "
            f"logits: {_how_wrong(wrong)}. That is 3(b)ii's bug, and it costs points there only: 3(b)iii was graded "
            f"on a second run of your train() with the grader's next-token loss in place of your get_loss_on_batch. "
            f"In your own run {outcome}")


def _summarize(grade, summary: Training, own: Run, chosen: Run) -> None:
    """The report's training section and warnings, from the run that is graded."""
    for run in (own, chosen):
        for w in habits.note_warnings((run.reply or {}).get("notes")):
            if w not in grade.extra_warnings:
                grade.extra_warnings.append(w)
    reply = chosen.reply
    if reply is None or chosen.problem:
        return
    after = reply.get("raised_after_loop")
    if isinstance(after, dict):  # the loop was done: its model is graded, the error is told
        grade.extra_warnings.append(habits.with_hint(
            f"train() raised after its training loop had finished: {StudentError(after, 'train()')}; "
            "the model it had trained is graded as it was", after))
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
    if chosen.losses:
        summary.initial_loss, summary.final_loss = chosen.losses


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


def _with_grader_loss(run: Run, message: str) -> str:
    if not run.grader_loss:
        return message
    return ("with the grader's next-token loss in place of your get_loss_on_batch (see the warnings), " + message)


def _improvement(grade, run: Run) -> dict | None:
    """How the run falls short of the required drop in held-out loss, as fail()'s arguments."""
    need = grade.spec.training.min_improvement_nats
    if run.losses is None or run.losses[0] - run.losses[1] >= need:
        return None
    (initial, final), floor = run.losses, grade.training.floor
    return dict(message=f"held-out loss, recomputed by the grader from your model's weights, went from {initial:.3f} "
                        f"to {final:.3f} nats after train() (floor {floor:.3f}); it must drop by at least {need:g}. "
                        "Check that the loop calls optimizer.step() and uses the learning rate it is given",
                measured=initial - final, tolerance=need)


def _steps_problem(grade, run: Run) -> str | None:
    reply, steps = run.reply, grade.spec.training.max_steps
    if reply is None or run.problem:
        return None
    if reply["models"] != 1:
        return f"train() built {reply['models']} Transformer models; it should train one"
    if reply["loss_calls"] != steps:
        return (f"train(max_steps={steps}) computed the loss {reply['loss_calls']} times; it should take exactly "
                f"{steps} steps when the data has more batches than that")
    if not _moved(reply):
        return f"train() took {steps} steps but no parameter of the model changed; {TRIVIAL}"
    return None


def test_training_improves(grade, run):
    if run.problem:
        fail(_with_grader_loss(run, run.problem))
    short = _improvement(grade, run)
    if short:
        # The diagnosis recomputes losses with the student's own get_loss_on_batch: not after a run without it.
        diagnosis = None if run.grader_loss else fp.training_diagnosis(A3(grade), run.reply)
        fail(_with_grader_loss(run, short.pop("message")), diagnosis=diagnosis, **short)


def test_training_steps(grade, run):
    if run.problem:
        fail(_with_grader_loss(run, run.problem))
    problem = _steps_problem(grade, run)
    if problem:
        fail(_with_grader_loss(run, problem))


def _moved(reply: dict) -> bool:
    """Some parameter's weights differ between the start and the end of the run."""
    initial, final = reply.get("initial", {}), reply.get("final", {})
    return any(isinstance(v, dict) and isinstance(final.get(k), dict) and "array" in v and "array" in final[k]
               and not np.array_equal(v["array"], final[k]["array"]) for k, v in initial.items())

