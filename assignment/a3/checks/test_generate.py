"""3(a)vi Transformer.generate: greedy decoding."""

import a3_fingerprints as fp
import torch
from a3_checklib import A3, Case, cases, generator, greedy_violation, standin_or_full, tokens
from hypothesis import example, given
from hypothesis import strategies as st

from graders.checks.checking import CheckFailure, diagnose, fail
from graders.execution.client import StudentError, WorkerError
from graders.checks.vacuous import require_work
from graders.execution.worker.standins import rule_next_token

CLS = "Transformer"


def _generated(a3: A3, case: Case, state, prompt, n: int, what: str = "Transformer.generate") -> torch.Tensor:
    a3.build(CLS, case, state)
    out = a3.call("m", CLS, "generate", prompt, n)["out"]
    return a3.tokens_out(out, (prompt.shape[0], prompt.shape[1] + n), what,
                         shapes=fp.generate_shapes(prompt.shape[0], prompt.shape[1], n))


def _diagnosis(a3: A3, ref, prompt: torch.Tensor, n: int, seq: torch.Tensor):
    """Which known decoding mistake `seq` is: one that depends on the random seed samples."""
    try:
        again = a3.call("m", CLS, "generate", prompt, n, seed=1)["out"]
    except (StudentError, WorkerError):  # the failure already has its message; this only explains it
        return None
    if again.get("kind") == "tensor" and "array" in again and tuple(again["shape"]) == tuple(seq.shape) and \
            not torch.equal(torch.from_numpy(again["array"]).long(), seq):
        return fp.known("generate_samples")
    return diagnose(seq.double(), fp.generate(ref, prompt, n))


def _each_row_alone(a3: A3, ref, prompt: torch.Tensor, n: int) -> bool:
    """For a generate that crashed on a batch of prompts: it decodes every prompt alone greedily."""
    if prompt.shape[0] < 2 or n == 0:
        return False
    try:
        for b in range(prompt.shape[0]):
            row = a3.tokens_out(a3.call("m", CLS, "generate", prompt[b:b + 1], n)["out"], (1, prompt.shape[1] + n),
                                "Transformer.generate")
            if not torch.equal(row[:, :prompt.shape[1]], prompt[b:b + 1]) or greedy_violation(ref, row, prompt.shape[1]):
                return False
    except (CheckFailure, StudentError, WorkerError):  # only an explanation: the crash stands either way
        return False
    return True


@given(case=cases(), n=st.sampled_from([0, 1, 5]))
@example(case=Case(12, 3, 2, 9, 23, 3, 4, 1), n=5)
@example(case=Case(16, 1, 1, 6, 11, 1, 5, 2), n=1)
def test_generate_agrees(a3: A3, case, n):
    n = min(n, case.context_length - case.length)
    state, ref = a3.weights(CLS, case)
    prompt = tokens(case, generator(case, 1, a3.seed))
    try:
        seq = _generated(a3, case, state, prompt, n)
    except StudentError as e:
        if e.where == "Transformer.generate" and _each_row_alone(a3, ref, prompt, n):
            fail(str(e), diagnosis=fp.known("generate_argmax_flattened"))
        raise
    if not torch.equal(seq[:, :case.length], prompt):
        fail("generate changed the prompt: the input tokens must be returned unchanged in front")
    problem = greedy_violation(ref, seq, case.length)
    if problem:
        fail(f"generate is not greedy decoding of the model: {problem}", diagnosis=_diagnosis(a3, ref, prompt, n, seq))


@given(case=cases(), n=st.sampled_from([1, 5]))
@example(case=Case(12, 3, 2, 9, 23, 3, 4, 1), n=5)
def test_generate_follows_forward(a3: A3, case, n):
    n = min(n, case.context_length - case.length)
    if n == 0:
        n, case = 1, Case(**{**case.__dict__, "length": case.length - 1 or 1})
    state, ref = a3.weights(CLS, case)
    prompt = tokens(case, generator(case, 2, a3.seed))

    def full() -> bool:  # greedy decoding of the real model, prompt kept
        real = _generated(a3, case, state, prompt, n)
        return torch.equal(real[:, :case.length], prompt) and greedy_violation(ref, real, case.length) is None

    with standin_or_full("Transformer.generate", "a stand-in forward", full):
        _follows(a3, case, state, prompt, n)


def _follows(a3: A3, case: Case, state, prompt: torch.Tensor, n: int) -> None:
    a3.build(CLS, case, state)
    a3.swap("m", "", kind="rule_forward", method="forward", vocab_size=case.vocab_size)
    seq = a3.tokens_out(a3.call("m", CLS, "generate", prompt, n)["out"], (case.batch, case.length + n),
                        "Transformer.generate (with a stand-in forward)")
    expected = prompt
    for _ in range(n):
        expected = torch.cat([expected, rule_next_token(expected, case.vocab_size)[:, -1:]], dim=1)
    if torch.equal(seq, expected):
        return
    wrong = (seq != expected).nonzero()
    b, p = (int(wrong[0][0]), int(wrong[0][1])) if len(wrong) else (0, 0)
    fail(f"with a forward whose last-position argmax is known, batch {b} position {p} should be token "
         f"{int(expected[b, p])}, got {int(seq[b, p])}: append the argmax over the vocabulary of the last "
         "position's logits, one token at a time, feeding each new token back in")


def test_generate_contract(a3: A3):
    case = Case(12, 3, 1, 8, 19, 2, 3, 5)
    state, _ = a3.weights(CLS, case)
    prompt = tokens(case, generator(case, 3, a3.seed))
    a3.build(CLS, case, state)
    for n in (0, 1, 4):
        reply = a3.call("m", CLS, "generate", prompt, n, return_inputs=True)
        seq = a3.tokens_out(reply["out"], (case.batch, case.length + n), f"generate(x, num_new_tokens={n})")
        if not torch.equal(seq[:, :case.length], prompt):
            fail(f"generate(x, {n}) changed the prompt: it must be returned unchanged in front")
        after = a3.tokens_out(reply["inputs_after"][0], tuple(prompt.shape), "the prompt after generate")
        if not torch.equal(after, prompt):
            fail("generate modified its input tensor in place")
    _consults_the_model(a3, case, prompt)


def _consults_the_model(a3: A3, case: Case, prompt: torch.Tensor, n: int = 4) -> None:
    """A generate that never consults the model (a constant token, the last one echoed) keeps the
    contract trivially: for the same prompt its new tokens must change with the model's weights
    where the reference's do."""
    new, right = [], []
    for salt in (0, 1):
        state, model = a3.weights(CLS, case, salt=salt)
        a3.build(CLS, case, state)
        seq = a3.tokens_out(a3.call("m", CLS, "generate", prompt, n)["out"], (case.batch, case.length + n),
                            f"generate(x, num_new_tokens={n})")
        new.append(seq[:, case.length:].double())
        right.append(model.generate(prompt, n)[:, case.length:].double())
    require_work("Transformer.generate's new tokens", new, right, positions=None, scale=False)
