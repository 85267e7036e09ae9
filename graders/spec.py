"""The assignment spec: one TOML file per assignment, validated here.

The pydantic models are the single source of the spec's schema; a broken spec fails to load with
a message naming the field (pydantic's own location, e.g. `items.2.checks.0.weight`).
"""

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from graders.paths import ASSIGNMENTS_DIR


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Check(_Strict):
    """One hidden check of an item: the test `test_<name>` in the assignment's checks folder."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="the hidden test is test_<name>")
    weight: float = Field(ge=0, description="its share of the item's points, relative to the item's other checks")
    title: str = Field("", description="what it checks, in a few words: every report shows it")
    uses: tuple[str, ...] = Field(
        (),
        description="items whose student code this check also runs (e.g. the block's "
        "check runs the student's attention): when one of them fails on its own, the "
        "failure's message says it may be the cause",
    )


Visibility = Literal["visible", "hidden", "after_due_date", "after_published"]


class HandAnswer(_Strict):
    """Where a by-hand item's answer is in a submission, for `grade hand` (graders/handgrading/):
    answers, the answers file's entry of the item's id (the default of engine written); notebook,
    the notebook's cells from the markdown heading `heading` on; changes, `files` compared with the
    starter's, beside the grade's training run and the baseline's (`evidence`)."""

    source: Literal["answers", "notebook", "changes"] = Field(
        description="answers: the answers file entry; notebook: cells from a heading on; changes: files vs the starter"
    )
    heading: str = Field("", description="notebook: the heading's text, e.g. 'Step 6' (case and spacing ignored)")
    files: tuple[str, ...] = Field((), description="changes: the submitted files shown against the starter's")
    starter: str = Field("", description="changes: the folder of the starter files, relative to the repository")
    evidence: Literal["", "training"] = Field("", description="training: the graded run beside the baseline's")


class Item(_Strict):
    """One handout item: its points, shared among its checks by their weights."""

    id: str = Field(description="the handout's numbering, e.g. 3(a)iii; --only takes it")
    title: str = Field(description="what the item asks, shown in every report")
    points: float = Field(ge=0, description="what the item is worth (0: advice that earns nothing)")
    bonus: bool = Field(False, description="bonus points: counted apart from the score, out of the bonus maximum")
    manual: bool = Field(False, description="graded by hand: listed, never auto-scored")
    report_as: Literal["score", "warning"] = Field(
        "score", description="warning: a 0-point item whose failed checks are shown as advice, never as lost points"
    )
    rubric: tuple[str, ...] = Field(
        (),
        description="a manual item's guide for the graders: in results.json and "
        "report.html, never in Gradescope's student-facing results",
    )
    answer: HandAnswer | None = Field(None, description="a manual item: where `grade hand` finds the answer")
    needs: tuple[str, ...] = Field(default=(), description="submitted files the item's checks import")
    runs: str | None = Field(
        None,
        description="the student method the item grades, as its requests name it "
        "(`Transformer.forward`): a method that hangs or crashes its worker is run once "
        "per grade, and the items whose checks `uses` this one are known to run it too",
    )
    checks: tuple[Check, ...] = Field((), description="its hidden checks")
    visibility: Visibility = Field("visible", description="when students see the item on Gradescope")
    own_worker: bool = Field(
        False,
        description="its checks send a long request ahead, to a second worker "
        "that runs it alongside the other items' checks (when limits.workers is 2)",
    )

    @model_validator(mode="after")
    def _checks_carry_weight(self) -> "Item":
        if not self.manual and self.points > 0 and sum(c.weight for c in self.checks) <= 0:
            raise ValueError(f"item {self.id} has points but no check with weight")
        if self.answer is not None and not self.manual:
            raise ValueError(f"item {self.id} has an answer for grading by hand but is not manual")
        return self


class Limits(_Strict):
    """What student code may use, per worker and per grade (`--limit NAME=VALUE` overrides one)."""

    call_timeout_s: float = Field(10, gt=0, description="one request that runs student code")
    import_timeout_s: float = Field(60, gt=0, description="the worker's start-up (import torch) and each import")
    train_timeout_s: float = Field(120, gt=0, description="one long request (a training run)")
    total_timeout_s: float = Field(
        900, gt=0, description="the whole grade: a check still running then is cut, the finished ones keep their points"
    )
    memory_mb: int = Field(4096, gt=0, description="RLIMIT_AS of the worker")
    output_cap_bytes: int = Field(65536, gt=0, description="captured stdout and stderr kept per worker, each")
    reply_cap_bytes: int = Field(64 << 20, gt=0, description="the largest reply the grader reads from the worker")
    threads: int = Field(1, ge=1, description="torch's threads in each worker")
    cpu_s: float = Field(600, gt=0, description="RLIMIT_CPU of one worker (soft; SIGKILL 5 s later)")
    file_size_mb: int = Field(64, gt=0, description="RLIMIT_FSIZE: the largest file student code may write")
    open_files: int = Field(256, ge=32, description="RLIMIT_NOFILE")
    processes: int = Field(64, ge=8, description="RLIMIT_NPROC and the pids cgroup (threads count)")
    scratch_mb: int = Field(256, ge=16, description="size of the worker's scratch folder and /tmp, each (bwrap)")
    sandbox: Literal["full", "container", "minimal"] = Field(
        "full",
        description="the sandbox student code must run under, or the grade is refused before anything runs "
        "(graders/execution/policy.py): full, every layer (bwrap, the sandbox uid as root, Landlock, seccomp); "
        "container, all but bwrap, inside a container that isolates the grade (Gradescope, --backend docker); "
        "minimal, whatever the machine gives, every report then warning which layers were missing",
    )
    workers: int = Field(
        0,
        ge=0,
        le=2,
        description="workers per submission: 2 gives items marked own_worker "
        "(A3's training run) a worker of their own, running alongside the other checks; 0 picks 2 "
        "only on a machine with 3 or more cores",
    )

    def worker_count(self) -> int:
        # Measured on 2 cores: the trusted side and the first worker keep both busy, so a second
        # worker's start-up only delays them (12.3 s with one worker, 13.2 s with two).
        if self.workers:
            return self.workers
        return 2 if len(os.sched_getaffinity(0)) >= 3 else 1


class Seeds(_Strict):
    """The seeds of everything random the checks draw: the same submission, the same grade."""

    weights: int = Field(description="the random weights the checks load into the student's modules")
    data: int = Field(description="the training rows (and, with 1 added, the held-out rows)")
    source: int = Field(description="the Markov source the training data is drawn from")


class HypothesisSettings(_Strict):
    """Hypothesis, as the grade runs it: derandomized, no database, no shrinking."""

    max_examples: int = Field(10, ge=1, description="generated examples per property check, beside its explicit ones")


class ModelShape(_Strict):
    """The model of the training run."""

    d_model: int = Field(ge=1, description="the width of the residual stream")
    n_heads: int = Field(ge=1, description="attention heads (d_model must be a multiple)")
    n_layers: int = Field(ge=1, description="decoder blocks")
    context_length: int = Field(ge=2, description="the longest sequence")
    vocab_size: int = Field(ge=2, description="tokens, and states of the Markov source")

    @model_validator(mode="after")
    def _heads_divide(self) -> "ModelShape":
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be a multiple of n_heads")
        return self


class Training(_Strict):
    """The training run the grader makes the student's own train() do (A3's 3(b)iii)."""

    model: ModelShape = Field(description="the model it trains")
    learning_rate: float = Field(gt=0, description="passed to train()")
    gradient_clipping: float | None = Field(None, description="passed to train(); none: no clipping")
    batch_size: int = Field(ge=1, description="rows per step, passed to train()")
    max_steps: int = Field(ge=1, description="the steps train() must make (the handout's 100)")
    min_improvement_nats: float = Field(
        gt=0, description="how far the held-out loss, recomputed by the grader, must fall for full points"
    )
    source_successors: int = Field(ge=2, description="successors of each token in the Markov source of the data")
    heldout_chunks: int = Field(ge=1, description="held-out rows the grader computes the loss on")
    data_path: str = Field(description="where train() reads its data, relative to its working folder")


class Gradescope(_Strict):
    """What run_autograder keeps to on Gradescope."""

    time_budget_s: float = Field(
        480,
        gt=0,
        le=2400,
        description="run_autograder's own limit, under the "
        "platform's (10 min by default, 40 at most): past it the student would get 0",
    )
    wrap_up_s: float = Field(
        30,
        gt=0,
        description="of the budget, kept for writing the results after the checks' "
        "deadline (killing workers, the report) on a slow autograder machine",
    )

    @model_validator(mode="after")
    def _room_to_grade(self) -> "Gradescope":
        if self.wrap_up_s >= self.time_budget_s:
            raise ValueError("wrap_up_s must be less than time_budget_s")
        return self


class Scoring(_Strict):
    """How failed checks become lost points."""

    policy: Literal["charge_once", "cascade"] = Field(
        "charge_once",
        description="charge_once: a failed check that also runs another item's code (its `uses`) is "
        "excused, its weight moved to its item's other checks, when that item fails a check of its own, so one bug "
        "costs points once, where it is; cascade: every check that runs the bug loses its weight",
    )


Params = dict[str, bool | int | float | str | tuple[int | float | str, ...]]

# Packages student files import for side work only: experiment tracking, and a notebook's helpers
# (Colab's drive and files, IPython.display). In the worker they are inert offline stand-ins.
INERT_PACKAGES = (
    "wandb",
    "tensorboard",
    "tensorboardX",
    "torch.utils.tensorboard",
    "mlflow",
    "comet_ml",
    "neptune",
    "swanlab",
    "aim",
    "clearml",
    "dvclive",
    "google.colab",
    "IPython",
)


class Spec(_Strict):
    """One assignment. `engine` says how it is graded: "checks" runs the hidden pytest checks in
    `checks_dir` against student code in a worker; "written" compares an answers file with the
    answer key in `key` on the trusted side (no student code runs)."""

    assignment: str = Field(description="its name: the folder assignment/NAME/, and --assignment NAME")
    title: str = Field(description="its title in reports and summaries")
    engine: Literal["checks", "written"] = Field(
        "checks",
        description="checks: hidden pytest checks run the student's code; written: an answers file against a key",
    )
    required_files: tuple[str, ...] = Field(description="the files a submission holds (intake refuses others' absence)")
    alternatives: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="a required file that may come as another file instead, e.g. "
        "A2S1.py as A2S1.ipynb; the first name found, in this order after the file itself, is graded",
    )
    notebooks: tuple[str, ...] = Field(
        (),
        description="required files run cell by cell (Jupyter percent format or .ipynb) by the checks, "
        "not imported when the worker starts",
    )
    starter: str | None = Field(
        None,
        description="the starter code students were given, as they got it: a folder or a .zip, relative to "
        "the assignment's folder (or absolute). `grade similarity` and `grade batch --similarity` remove it "
        "before comparing (`--starter` overrides it); unset, the assignment's template is used "
        "(assignment/NAME/template/, for a3 student_template/)",
    )
    reference_dir: str | None = Field(
        None,
        description="the staff solution, relative to the repository: the checks compare with it, trusted side",
    )
    reference_modules: tuple[str, ...] = Field(
        (), description="modules of reference_dir the checks get, in import order"
    )
    checks_dir: str | None = Field(None, description="the hidden checks (engine checks), relative to the repository")
    key: str | None = Field(None, description="the answer key (engine written), relative to the assignment folder")
    limits: Limits = Field(Limits(), description="what student code may use")
    seeds: Seeds | None = Field(None, description="the seeds of the checks' random draws")
    hypothesis: HypothesisSettings = Field(HypothesisSettings(), description="the property checks' settings")
    training: Training | None = Field(None, description="the training run of an assignment that has one (A3)")
    params: Params = Field(default_factory=dict, description="the assignment's own constants, read by its checks")
    items: tuple[Item, ...] = Field((), description="the handout's items, in the order reports list them")
    gradescope: Gradescope = Field(Gradescope(), description="the Gradescope autograder's budget")
    scoring: Scoring = Field(Scoring(), description="how failures become lost points")
    stdout_visibility: Visibility = Field(
        "hidden", description="when students see what their code printed (Gradescope's stdout_visibility)"
    )
    inert_packages: tuple[Annotated[str, Field(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")], ...] = Field(
        INERT_PACKAGES,
        description="packages (or modules: torch.utils.tensorboard) a submission may import for side work only: "
        "in the worker each imports as an inert offline stand-in whatever is installed (every attribute "
        "callable, nothing sent or written), with a warning naming it and the line; the list replaces the default",
    )

    @model_validator(mode="after")
    def _engine_has_what_it_needs(self) -> "Spec":
        if self.engine == "checks" and not self.checks_dir:
            raise ValueError("engine checks needs checks_dir")
        if self.engine == "written" and not self.key:
            raise ValueError("engine written needs key")
        if self.engine == "written" and (
            sum(f.endswith(".yaml") for f in self.required_files) != 1
            or sum(f.endswith(".py") for f in self.required_files) > 1
        ):
            raise ValueError("engine written reads one answers .yaml file and at most one .py file (its code parts)")
        strays = (set(self.alternatives) | set(self.notebooks)) - set(self.required_files)
        if strays:
            raise ValueError(f"alternatives and notebooks name files not in required_files: {sorted(strays)}")
        return self

    def accepted(self, name: str) -> tuple[str, ...]:
        """The file names that stand for required file `name`, in order of preference."""
        return (name, *self.alternatives.get(name, ()))

    def answers_file(self) -> str:
        """Engine written: the answers file."""
        return next(f for f in self.required_files if f.endswith(".yaml"))

    def code_file(self) -> str | None:
        """Engine written: the .py file whose functions the key's code parts run, if the spec has one."""
        return next((f for f in self.required_files if f.endswith(".py")), None)

    def runs_student_code(self) -> bool:
        """Whether a grade runs submitted code (in the sandboxed worker), which the sandbox level guards."""
        return self.engine == "checks" or self.code_file() is not None

    def modules(self) -> list[str]:
        """What the worker imports when it starts: the required .py files, in order, but notebooks."""
        return [f.removesuffix(".py") for f in self.required_files if f.endswith(".py") and f not in self.notebooks]

    @model_validator(mode="after")
    def _unique_names(self) -> "Spec":
        ids = [i.id for i in self.items]
        names = [c.name for i in self.items for c in i.checks]
        for label, values in (("item id", ids), ("check name", names)):
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"duplicate {label}: {', '.join(dupes)}")
        for item in self.items:
            unknown = set(item.needs) - set(self.required_files)
            if unknown:
                raise ValueError(f"item {item.id} needs files not in required_files: {sorted(unknown)}")
            for check in item.checks:
                wrong = [u for u in check.uses if u not in ids or u == item.id]
                if wrong:
                    raise ValueError(f"check {check.name} uses {', '.join(wrong)}: not another item of this spec")
        return self

    def points(self, bonus: bool = False) -> float:
        return sum(i.points for i in self.items if i.bonus == bonus)

    def check_item(self) -> dict[str, Item]:
        return {c.name: i for i in self.items for c in i.checks}

    def only(self, ids: list[str]) -> "Spec":
        """The spec with just these items (to re-check one item); unknown ids raise SpecError."""
        unknown = [i for i in ids if i not in {item.id for item in self.items}]
        if unknown:
            raise SpecError(f"unknown item {', '.join(unknown)}; the items are {', '.join(i.id for i in self.items)}")
        return self.model_copy(update={"items": [i for i in self.items if i.id in ids]})


class SpecError(Exception):
    """The spec file is missing or invalid; the message names the file and the field."""


def load_spec(path: Path) -> Spec:
    try:
        data = tomllib.loads(path.read_text())
        if data.get("engine") == "written" and isinstance(data.get("key"), str) and "items" not in data:
            data["items"] = _key_items(path.parent / data["key"], data.get("required_files"))
        return Spec.model_validate(data)
    except FileNotFoundError as e:
        raise SpecError(f"{path}: no such spec file") from e
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from e
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(top)'}: {err['msg']}" for err in e.errors())
        raise SpecError(f"{path}: {problems}") from e


def _key_items(path: Path, required_files: Any) -> list[dict[str, Any]]:
    """A written assignment's items are its key's questions: the key is their single source (plain
    data, validated below as the spec's own items table would be)."""
    from graders.written.key import KeyProblem, key_items, load_key

    try:
        key = load_key(path)
    except KeyProblem as e:
        raise SpecError(str(e)) from e
    if key.code_parts() and not any(str(f).endswith(".py") for f in required_files or ()):
        raise SpecError(f"{path}: the key has code parts, so required_files must name the .py file they run")
    return key_items(key)


def assignments() -> list[str]:
    """The assignments there are: the folders under assignment/ with a spec."""
    return sorted(p.parent.name for p in ASSIGNMENTS_DIR.glob("*/spec.toml"))


def spec_path(assignment: str) -> Path:
    """Where `--assignment NAME`'s spec is; an unknown name is a SpecError that lists the known ones."""
    path = ASSIGNMENTS_DIR / assignment / "spec.toml"
    if not path.is_file() or "/" in assignment or assignment.startswith("."):
        raise SpecError(f"unknown assignment {assignment!r}; the assignments are {', '.join(assignments())}")
    return path


def assignment_dir(spec: Spec) -> Path:
    return ASSIGNMENTS_DIR / spec.assignment
