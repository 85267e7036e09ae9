"""The written engine's grade: a submission's answers file against the assignment's key, on the
trusted side (nothing of the submission runs: YAML is read as data, expressions parsed by our own
parser), and the key's code parts, run in the sandboxed worker (graders/written/code.py). Manual
questions are listed with their points, never scored."""

from graders.execution.breaker import Breaker
from graders.execution.client import Worker, WorkerError
from graders.execution.outcomes import describe_import_error
from graders.intake.submission import Intake
from graders.scoring.results import CheckResult
from graders.spec import Limits, Spec, assignment_dir
from graders.written.answerfile import AnswersProblem, load_answers
from graders.written.answers import answer_warnings, grade_answers
from graders.written.key import AnswerKey, check_name, load_key


def _key(spec: Spec) -> AnswerKey:
    assert spec.key is not None  # engine written: the spec requires a key
    return load_key(assignment_dir(spec) / spec.key)


def check_answers(spec: Spec, intake: Intake) -> tuple[dict[str, CheckResult], list[str], dict[str, str]]:
    """Every number and expression part's result by name, warnings (ids the key does not have), and
    the problem of the answers file as a whole (missing, not YAML, ...), by file, if it has one."""
    key = _key(spec)
    name = spec.answers_file()
    try:
        if name in intake.problems:
            raise AnswersProblem(intake.problems[name])
        answers = load_answers(intake.files[name])
    except AnswersProblem as e:
        failed = {
            check_name(q, p): CheckResult(
                name=check_name(q, p), title=p.rubric, weight=p.weight, status="failed", message=str(e)
            )
            for q in key.questions
            for p in q.parts
            if p.code is None  # the code parts do not need the answers file
        }
        return failed, [], {name: str(e)}
    return grade_answers(key, answers), answer_warnings(key, answers), {}


def launch_code_worker(spec: Spec, intake: Intake, limits: Limits) -> Worker | None:
    """The worker for the key's code parts, spawned now (it imports torch while the answers are
    graded); None when there is nothing to run: no code parts, or no usable .py submitted."""
    code_file = spec.code_file()
    if code_file is None or code_file not in intake.files or not _key(spec).code_parts():
        return None
    worker = Worker(intake.folder, limits, [code_file.removesuffix(".py")])
    # A function that hangs or kills its worker is paid for once per grade, not once per check.
    worker.breaker = Breaker({f: {f} for f in {p.code.function for _, p in _key(spec).code_parts() if p.code}})
    worker.launch()
    return worker


def check_code(spec: Spec, intake: Intake, worker: Worker | None) -> tuple[dict[str, CheckResult], dict[str, str]]:
    """Every code part's result by name, and why the .py could not be run (by file), if it could not."""
    from graders.written.code import code_results  # torch: only for an assignment with code parts

    key, code_file = _key(spec), spec.code_file()
    if code_file is None or not key.code_parts():
        return {}, {}
    module = code_file.removesuffix(".py")
    functions = ", ".join(sorted({f"{p.code.function}()" for _, p in key.code_parts() if p.code}))
    broken = intake.problems.get(code_file)
    if worker is not None and broken is None:
        try:
            worker.start()
        except WorkerError as e:
            broken = f"the worker could not start: {e}"
        if module in worker.import_errors:
            broken = describe_import_error(module, worker.import_errors[module], intake.problems)
    reason = None if broken is None else f"{broken}; the code parts run {functions} from {code_file}, so they get 0"
    problems = {code_file: broken} if broken is not None and code_file not in intake.problems else {}
    return code_results(key, module, worker, reason), problems
