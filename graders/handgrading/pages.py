"""The app's pages: the by-hand parts and their progress, one answer at a time, the groups of a
part, one group, the gradebook, the history, and each student's report.html."""

from typing import Any

from flask import Flask, abort, render_template, request, send_file

from graders.deploy.gradebook import COLUMNS, gradebook_row
from graders.handgrading.context import hand
from graders.handgrading.grouping import Group, normalised, word_diff
from graders.handgrading.marks import Mark
from graders.handgrading.progress import hand_progress
from graders.handgrading.questions import HandQuestion


def register(app: Flask) -> None:
    app.add_url_rule("/", "index", index)
    app.add_url_rule("/q/<qid>", "answer", answer)
    app.add_url_rule("/q/<qid>/groups", "groups", groups)
    app.add_url_rule("/q/<qid>/groups/<gid>", "group", group)
    app.add_url_rule("/grades", "grades", grades)
    app.add_url_rule("/history", "history", history)
    app.add_url_rule("/report/<student>", "report", report)


def _question(qid: str) -> HandQuestion:
    q = hand().room.question(qid)
    if q is None:
        abort(404, f"no by-hand part {qid}")
    return q


def _common(**extra: Any) -> dict[str, Any]:
    return extra


def index() -> str:
    room = hand().room
    progress = hand_progress(room.questions, room.students, hand().store.marks())
    return render_template("index.html.j2", **_common(progress=progress, students=len(room.students)))


def _marks_of(qid: str) -> dict[str, Mark]:
    return {s: m[qid] for s, m in hand().store.marks(qid).items() if qid in m}


def _neighbours(students: list[str], current: str, marks: dict[str, Mark]) -> dict[str, str | None]:
    """The previous and next answers, and the next one not graded yet (after this one, round)."""
    i = students.index(current)
    after = students[i + 1 :] + students[:i]
    return {
        "prev": students[i - 1] if i > 0 else None,
        "next": students[i + 1] if i + 1 < len(students) else None,
        "ungraded": next((s for s in after if not (s in marks and marks[s].graded)), None),
    }


def answer(qid: str) -> str:
    q, room = _question(qid), hand().room
    marks = _marks_of(qid)
    student = request.args.get("student") or next(
        (s for s in room.students if not (s in marks and marks[s].graded)), room.students[0]
    )
    if student not in room.students:
        abort(404, f"no student {student}")
    page = _common(
        q=q,
        student=student,
        answer=room.answers[qid][student],
        mark=marks.get(student),
        marks=marks,
        students=room.students,
        rubric=hand().store.rubric(qid),
        applied=hand().store.applied_ids(qid).get(student, set()),
        nav=_neighbours(room.students, student, marks),
        group=next(g for g in room.groups[qid] if student in g.members),
        graded=sum(1 for m in marks.values() if m.graded),
    )
    return render_template("answer.html.j2", **page)


def groups(qid: str) -> str:
    q, room = _question(qid), hand().room
    marks = _marks_of(qid)
    rows = [(g, sum(1 for s in g.members if s in marks and marks[s].graded)) for g in room.groups[qid]]
    return render_template("groups.html.j2", **_common(q=q, rows=rows, answers=room.answers[qid]))


def _group(qid: str, gid: str) -> Group:
    found = next((g for g in hand().room.groups[qid] if g.id == gid), None)
    if found is None:
        abort(404, "no such group (the answers were read again since: go back to the groups)")
    return found


def group(qid: str, gid: str) -> str:
    q, g, room = _question(qid), _group(qid, gid), hand().room
    marks = _marks_of(qid)
    first = g.members[0]
    texts = {s: normalised(room.answers[qid][s].compared_text()) for s in g.members}
    position = [x.id for x in room.groups[qid]].index(gid)
    following = room.groups[qid][position + 1] if position + 1 < len(room.groups[qid]) else None
    page = _common(
        q=q,
        g=g,
        answer=room.answers[qid][first],
        answers=room.answers[qid],
        differs={s for s in g.members if texts[s] != texts[first]},
        variants=_variants(room.answers[qid], g, texts),
        marks=marks,
        mark=marks.get(first),
        rubric=hand().store.rubric(qid),
        applied=hand().store.applied_ids(qid).get(first, set()),
        following=following,
    )
    return render_template("group.html.j2", **page)


def _variants(answers: dict, g: Group, texts: dict[str, str]) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """The group's other wordings: the members who wrote each, and its word diff against the first's."""
    first = g.members[0]
    by_text: dict[str, list[str]] = {}
    for s in g.members:
        if texts[s] != texts[first]:
            by_text.setdefault(texts[s], []).append(s)
    return [
        (members, word_diff(answers[first].compared_text(), answers[members[0]].compared_text()))
        for members in sorted(by_text.values(), key=lambda m: (-len(m), m[0]))
    ]


def grades() -> str:
    room = hand().room
    marks = hand().store.marks()
    rows = [(s, gradebook_row(room.spec, room.results.get(s), marks.get(s, {}))) for s in room.students]
    return render_template(
        "grades.html.j2", **_common(columns=COLUMNS[1:], items=[i for i in room.spec.items], rows=rows)
    )


def history() -> str:
    return render_template("history.html.j2", **_common(events=hand().store.history(500)))


def report(student: str) -> Any:
    """The student's report.html, as OUT holds it (rewritten with their marks as they change)."""
    room = hand().room
    if student not in room.students or not (room.out / student / "report.html").is_file():
        abort(404, f"no report for {student}")
    response = send_file(room.out / student / "report.html", mimetype="text/html")
    response.headers["Content-Security-Policy"] = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    return response
