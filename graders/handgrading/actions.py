"""The app's edits: a mark saved for one answer or a group, and rubric items added, edited or
deleted. Each is one store transaction; a stale one (someone saved since the page was opened)
is refused with a page that says who changed what, and shows what was not saved."""

import math
from typing import Any

from flask import Flask, abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from graders.handgrading.context import grader, hand, safe_next
from graders.handgrading.store import MarkEdit, Stale

MAX_COMMENT = 20_000
MAX_ITEM_TEXT = 1_000


def register(app: Flask) -> None:
    app.add_url_rule("/q/<qid>/save", "save", save, methods=["POST"])
    app.add_url_rule("/q/<qid>/rubric", "add_item", add_item, methods=["POST"])
    app.add_url_rule("/q/<qid>/rubric/<int:rid>", "edit_item", edit_item, methods=["POST"])


class BadForm(Exception):
    pass


def _points(text: str, maximum: float | None, what: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise BadForm(f"{what}: {text!r} is not a number") from None
    if not math.isfinite(value) or (maximum is not None and not 0 <= value <= maximum):
        raise BadForm(f"{what}: {text} must be between 0 and {maximum:g}" if maximum is not None else f"{what}: {text}")
    return value


def _members(qid: str) -> list[tuple[str, int]]:
    """The answers the form saves (one, or a group's ticked members) and the versions it saw."""
    students = set(hand().room.students)
    members = request.form.getlist("member")
    if not members or any(m not in students for m in members):
        raise BadForm("no answer chosen (tick at least one student of the group)")
    try:
        return [(m, int(request.form.get(f"v.{m}", ""))) for m in members]
    except ValueError:
        raise BadForm("the form has no version for an answer: reload the page") from None


def _edit(qid: str, maximum: float) -> MarkEdit | None:
    if request.form.get("action") == "clear":
        return None
    try:
        items = frozenset(int(i) for i in request.form.getlist("item"))
    except ValueError:
        raise BadForm("a rubric item that is not one") from None
    comment = request.form.get("comment", "").replace("\r\n", "\n")[:MAX_COMMENT]
    return MarkEdit(items, _points(request.form.get("points", ""), maximum, "points"), comment.strip())


def _back(qid: str, members: list[tuple[str, int]]) -> str:
    """Where a save goes: the next answer not graded (save and next), or back where it came from."""
    target = request.form.get("next") if request.form.get("action") == "save_next" else request.form.get("back")
    return safe_next(target or url_for("answer", qid=qid, student=members[0][0]))


def save(qid: str) -> Any:
    q = hand().room.question(qid)
    if q is None:
        abort(404)
    try:
        members = _members(qid)
        edit = _edit(qid, q.max)
    except BadForm as e:
        return render_template("problem.html.j2", problem=str(e), back=request.referrer or "/"), 400
    try:
        hand().store.save(qid, members, edit, grader())
    except Stale as e:
        return _conflict(qid, e, edit)
    hand().writer.changed(s for s, _ in members)
    if len(members) > 1:
        flash(f"saved for the {len(members)} answers of the group")
    return redirect(_back(qid, members))


def _conflict(qid: str, e: Stale, edit: MarkEdit | None) -> tuple[str, int]:
    rubric = {r.id: r for r in hand().store.rubric(qid)}
    tried = [] if edit is None else [rubric[i] for i in sorted(edit.items) if i in rubric]
    page = render_template(
        "conflict.html.j2",
        changed=e.changed,
        edit=edit,
        tried=tried,
        back=request.form.get("back") or request.referrer or "/",
    )
    return page, 409


def add_item(qid: str) -> Response | tuple[str, int]:
    q = hand().room.question(qid)
    if q is None:
        abort(404)
    text = " ".join(request.form.get("text", "").split())[:MAX_ITEM_TEXT]
    try:
        points = _points(request.form.get("points", ""), None, "points") or 0.0
        if not text:
            raise BadForm("a rubric item needs a text")
    except BadForm as e:
        return render_template("problem.html.j2", problem=str(e), back=request.referrer or "/"), 400
    hand().store.add_item(qid, text, points, grader())
    return redirect(safe_next(request.form.get("back") or url_for("answer", qid=qid)))


def edit_item(qid: str, rid: int) -> Any:
    """New text and points for an item (or its deletion): every answer it is applied to follows."""
    store = hand().store
    try:
        version = int(request.form.get("version", ""))
        text = " ".join(request.form.get("text", "").split())[:MAX_ITEM_TEXT]
        delete = request.form.get("action") == "delete"
        points = None if delete else _points(request.form.get("points", ""), None, "points") or 0.0
        if not text and not delete:
            raise BadForm("a rubric item needs a text")
    except (BadForm, ValueError) as e:
        return render_template("problem.html.j2", problem=str(e), back=request.referrer or "/"), 400
    affected = store.applied_ids(qid)
    try:
        used = store.edit_item(rid, version, text, points, grader())
    except Stale as e:
        return _conflict(qid, e, None)
    hand().writer.changed(s for s, ids in affected.items() if rid in ids)
    flash(f"rubric item {'deleted' if delete else 'saved'}: the points of the {used} answers it was applied to follow")
    return redirect(safe_next(request.form.get("back") or url_for("answer", qid=qid)))
