"""The written engine's grade: a submission's answers file against the assignment's key, on the
trusted side (nothing of the submission runs: YAML is read as data, expressions parsed by our own
parser). Manual questions are listed with their points, never scored."""

from graders.intake.submission import Intake
from graders.scoring.results import CheckResult
from graders.spec import Spec, assignment_dir
from graders.written.answers import AnswersProblem, answer_warnings, grade_answers, load_answers
from graders.written.key import load_key


def check_answers(spec: Spec, intake: Intake) -> tuple[dict[str, CheckResult], list[str], dict[str, str]]:
    """Every auto-graded check's result by name, warnings (ids the key does not have), and the
    problem of the answers file as a whole (missing, not YAML, ...), by file, if it has one."""
    assert spec.key is not None  # engine written: the spec requires a key
    key = load_key(assignment_dir(spec) / spec.key)
    [name] = spec.required_files
    try:
        if name in intake.problems:
            raise AnswersProblem(intake.problems[name])
        answers = load_answers(intake.files[name])
    except AnswersProblem as e:
        failed = {
            c.name: CheckResult(name=c.name, title=c.title, weight=c.weight, status="failed", message=str(e))
            for item in spec.items
            for c in item.checks
        }
        return failed, [], {name: str(e)}
    return grade_answers(key, answers), answer_warnings(key, answers), {}
