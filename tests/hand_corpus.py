"""Classes for grading by hand, made from the project's own corpora: the exam's staff answers (each
free-text answer as given, copied with other spacing and case, with one word changed, cut short,
wrong, or blank), the A2S2 reference and template notebooks, and A3's student corpus (with a
train.py changed for the 3(c) bonus). Deterministic: the same class every time."""

from pathlib import Path

import yaml

from conftest import REFERENCE, REPO, write_zip
from corpus.students import HERE as STUDENTS

EXAM = REPO / "assignment" / "transformer_exam"
A2S2 = REPO / "assignment" / "a2s2"
EXAM_MANUAL = ("1b_saturation", "3a_relative", "3b", "4a", "5b", "6a", "6b")
WRONG = "Attention is all you need, so the model just works without it."


def _variant(text: str, kind: int) -> str:
    """Answer variants a class gives: 0 as given, 1 the same with other case and spacing, 2 one
    word changed, 3 the first sentence only, 4 a wrong answer, 5 blank."""
    if kind == 1:
        return "  ".join(text.upper().split()) + "\n"
    if kind == 2:
        words = text.split()
        words[len(words) // 2] = "really"
        return " ".join(words)
    if kind == 3:
        return text.split(". ")[0] + "."
    if kind == 4:
        return WRONG
    if kind == 5:
        return ""
    return text


def exam_answers(student: int) -> str:
    """Student `student`'s answers.yaml: the staff's, with free-text variants by student and question."""
    answers = yaml.safe_load((EXAM / "reference" / "answers.yaml").read_text())
    for q, qid in enumerate(EXAM_MANUAL):
        answers[qid] = _variant(answers[qid], (student * 5 + q * 3) % 6)
    return yaml.safe_dump(answers, sort_keys=False, allow_unicode=True, width=100)


def exam_class(folder: Path, count: int, with_code: int = 0) -> list[Path]:
    """`count` exam zips in `folder`; the first `with_code` also hand in the staff's exam.py."""
    folder.mkdir(parents=True, exist_ok=True)
    code = (EXAM / "reference" / "exam.py").read_text()
    return [
        write_zip(folder / f"s{i:03d}.zip", {"answers.yaml": exam_answers(i), **({"exam.py": code} if i < with_code else {})})
        for i in range(count)
    ]


def a2s2_class(folder: Path) -> list[Path]:
    """The reference notebook, the reference with step 6 left as the template has it, and a copy
    of the reference's (one near-identical group and one blank)."""
    folder.mkdir(parents=True, exist_ok=True)
    reference = (A2S2 / "reference" / "A2S2.py").read_text()
    template = (A2S2 / "template" / "A2S2.py").read_text()
    marker = "# ## Step 6"
    unanswered = reference.split(marker)[0] + marker + template.split(marker)[1]
    copied = reference.replace("buy little", "buy very little")
    return [
        write_zip(folder / "ada.zip", {"A2S2.py": reference}),
        write_zip(folder / "bo.zip", {"A2S2.py": unanswered}),
        write_zip(folder / "cy.zip", {"A2S2.py": copied}),
    ]


BONUS_CHANGE = ("optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)",
                "optimizer = torch.optim.AdamW(model.parameters(), lr=3 * learning_rate)  # 3(c): a higher lr")


def a3_class(folder: Path, names: tuple[str, ...] = ("leo_tabs", "pia_einsum")) -> list[Path]:
    """The reference (with the starter's train.py), students of the corpus, and the reference with a
    3(c) change in train.py."""
    folder.mkdir(parents=True, exist_ok=True)
    # train.py as students get it (the starter's, given complete; the reference differs in its docstring)
    ref = {n: (REFERENCE / n).read_text() for n in ("model_solution.py", "utils.py")}
    ref["train.py"] = (REPO / "student_template" / "train.py").read_text()
    zips = [write_zip(folder / "reference.zip", ref)]
    for name in names:
        files = {**ref, **{p.name: p.read_text() for p in (STUDENTS / name).glob("*.py")}}
        zips.append(write_zip(folder / f"{name}.zip", files))
    old, new = BONUS_CHANGE
    assert ref["train.py"].count(old) == 1
    zips.append(write_zip(folder / "bonus_lr.zip", {**ref, "train.py": ref["train.py"].replace(old, new)}))
    return zips
