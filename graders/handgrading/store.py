"""The marks of a class, in one SQLite file in the batch's OUT (WAL mode: readers never wait for a
writer, and several TAs' browsers, or a sheet import beside the web app, write through transactions).

Every mark carries a version: an edit names the version it was made against, and one made
against an older version is refused (Stale) instead of overwriting what another TA saved since.
Every change, of a mark or of a rubric item, appends a row to `history` (who, when, the value
before and after); triggers refuse any update or delete of that table. A mark keeps the ids of
the rubric items applied, never their points: points are read when a total is computed, so
editing an item's points changes every answer it was applied to."""

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graders.handgrading.marks import AppliedItem, Mark, Marks, rubric_total
from graders.handgrading.questions import HandQuestion

STORE_FILE = "marks.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS questions(
    id TEXT PRIMARY KEY, position INTEGER NOT NULL, title TEXT NOT NULL, max REAL NOT NULL, bonus INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rubric(
    id INTEGER PRIMARY KEY, question TEXT NOT NULL REFERENCES questions(id), position INTEGER NOT NULL,
    text TEXT NOT NULL, points REAL NOT NULL, version INTEGER NOT NULL DEFAULT 1, deleted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS marks(
    student TEXT NOT NULL, question TEXT NOT NULL REFERENCES questions(id), graded INTEGER NOT NULL,
    points REAL, comment TEXT NOT NULL, version INTEGER NOT NULL, grader TEXT NOT NULL, at TEXT NOT NULL,
    PRIMARY KEY(student, question));
CREATE TABLE IF NOT EXISTS applied(
    student TEXT NOT NULL, question TEXT NOT NULL, rubric INTEGER NOT NULL REFERENCES rubric(id),
    PRIMARY KEY(student, question, rubric));
CREATE TABLE IF NOT EXISTS history(
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, grader TEXT NOT NULL, kind TEXT NOT NULL,
    student TEXT, question TEXT, rubric INTEGER, before TEXT, after TEXT);
CREATE TRIGGER IF NOT EXISTS history_no_update BEFORE UPDATE ON history
    BEGIN SELECT RAISE(ABORT, 'the history is append-only'); END;
CREATE TRIGGER IF NOT EXISTS history_no_delete BEFORE DELETE ON history
    BEGIN SELECT RAISE(ABORT, 'the history is append-only'); END;
"""


class Stale(Exception):
    """An edit made against an older version of a mark or rubric item: nothing was written."""

    def __init__(self, changed: list[str]):
        super().__init__("; ".join(changed))
        self.changed = changed


@dataclass(frozen=True)
class RubricItem:
    id: int
    question: str
    position: int
    text: str
    points: float
    version: int


@dataclass(frozen=True)
class MarkEdit:
    """What a TA saves for one answer: the rubric items applied, or points typed in (which then
    stand instead of the items), and a comment."""

    items: frozenset[int] = frozenset()
    points: float | None = None
    comment: str = ""
    graded: bool = True  # False: a comment alone, or the mark cleared (not graded again)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Store:
    """One OUT's marks. Connections are per thread (the web server answers on several)."""

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        self._create()

    @classmethod
    def open_existing(cls, out: Path) -> "Store | None":
        """The store of OUT, if `grade hand` has made one (the gradebook reads it; never creates it)."""
        return cls(out / STORE_FILE) if (out / STORE_FILE).is_file() else None

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA busy_timeout=30000")
            self._local.db = db
        return db

    def _create(self) -> None:
        db = self._db()
        db.executescript(_SCHEMA)
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: BEGIN IMMEDIATE takes the write lock at once, so what it reads
        (a version) cannot change before it commits; any exception rolls it all back."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- questions and their rubric items ------------------------------------------------------

    def sync_questions(self, questions: Sequence[HandQuestion], grader: str) -> None:
        """The assignment's by-hand questions: a new one is added with its rubric lines as items;
        one already there keeps its items (staff may have edited them) and takes the spec's
        title and maximum."""
        with self._write() as db:
            for position, q in enumerate(questions):
                known = db.execute("SELECT 1 FROM questions WHERE id = ?", (q.id,)).fetchone()
                db.execute(
                    "INSERT INTO questions VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                    "position = excluded.position, title = excluded.title, max = excluded.max, bonus = excluded.bonus",
                    (q.id, position, q.title, q.max, int(q.bonus)),
                )
                if not known:
                    for i, (text, points) in enumerate(q.rubric):
                        self._insert_item(db, q.id, i, text, points, grader)

    def _insert_item(
        self, db: sqlite3.Connection, question: str, position: int, text: str, points: float, grader: str
    ) -> int:
        cur = db.execute(
            "INSERT INTO rubric(question, position, text, points) VALUES (?, ?, ?, ?)",
            (question, position, text, points),
        )
        rid = int(cur.lastrowid or 0)
        self._log(db, grader, "rubric added", None, question, rid, None, {"text": text, "points": points})
        return rid

    def maxima(self) -> dict[str, float]:
        return {q: m for q, m in self._db().execute("SELECT id, max FROM questions")}

    def rubric(self, question: str) -> list[RubricItem]:
        rows = self._db().execute(
            "SELECT id, question, position, text, points, version FROM rubric "
            "WHERE question = ? AND deleted = 0 ORDER BY position, id",
            (question,),
        )
        return [RubricItem(*row) for row in rows]

    def add_item(self, question: str, text: str, points: float, grader: str) -> int:
        with self._write() as db:
            (position,) = db.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM rubric WHERE question = ?", (question,)
            ).fetchone()
            return self._insert_item(db, question, position, text, points, grader)

    def edit_item(self, rid: int, version: int, text: str, points: float | None, grader: str) -> int:
        """A rubric item's new text and points (None: deleted); Stale if someone edited it since
        `version`. The number of answers it is applied to, whose totals follow."""
        with self._write() as db:
            row = db.execute(
                "SELECT question, text, points, version, deleted FROM rubric WHERE id = ?", (rid,)
            ).fetchone()
            if row is None or row[4]:
                raise Stale([f"rubric item {rid} was deleted"])
            question, old_text, old_points, current, _ = row
            if current != version:
                raise Stale(
                    [f"rubric item '{old_text}' was edited by someone else meanwhile (now {old_points:g} points)"]
                )
            if points is None:
                db.execute("UPDATE rubric SET deleted = 1, version = version + 1 WHERE id = ?", (rid,))
            else:
                db.execute(
                    "UPDATE rubric SET text = ?, points = ?, version = version + 1 WHERE id = ?", (text, points, rid)
                )
            after = None if points is None else {"text": text, "points": points}
            self._log(db, grader, "rubric edited", None, question, rid, {"text": old_text, "points": old_points}, after)
            (used,) = db.execute(
                "SELECT COUNT(*) FROM applied JOIN marks USING (student, question) WHERE rubric = ? AND graded = 1",
                (rid,),
            ).fetchone()
            return int(used)

    # -- marks --------------------------------------------------------------------------------

    def save(self, question: str, versions: Sequence[tuple[str, int]], edit: MarkEdit | None, grader: str) -> None:
        """The same edit to every (student, version) of `versions` (one answer, or a group), in one
        transaction: all saved, or, if any of them changed since its version, none (Stale).
        `edit` None clears the marks (not graded again, no comment)."""
        with self._write() as db:
            stale = [self._stale(db, student, question, version) for student, version in versions]
            if any(stale):
                raise Stale([s for s in stale if s])
            if edit is not None:
                live = {
                    r for (r,) in db.execute("SELECT id FROM rubric WHERE question = ? AND deleted = 0", (question,))
                }
                if not edit.items <= live:
                    raise Stale(["a rubric item applied was deleted meanwhile"])
            for student, _ in versions:
                self._put(db, student, question, edit, grader)

    def _stale(self, db: sqlite3.Connection, student: str, question: str, version: int) -> str | None:
        row = db.execute(
            "SELECT version, grader, at FROM marks WHERE student = ? AND question = ?", (student, question)
        ).fetchone()
        current = row[0] if row else 0
        if current == version:
            return None
        who = f" by {row[1]} at {row[2]}" if row else ""
        return f"{student}'s answer to {question} was changed{who} after you opened it"

    def _state(self, db: sqlite3.Connection, student: str, question: str) -> dict | None:
        row = db.execute(
            "SELECT graded, points, comment FROM marks WHERE student = ? AND question = ?", (student, question)
        ).fetchone()
        if row is None:
            return None
        items = sorted(
            r
            for (r,) in db.execute("SELECT rubric FROM applied WHERE student = ? AND question = ?", (student, question))
        )
        return {"graded": bool(row[0]), "points": row[1], "comment": row[2], "items": items}

    def _put(self, db: sqlite3.Connection, student: str, question: str, edit: MarkEdit | None, grader: str) -> None:
        before = self._state(db, student, question)
        edit = edit or MarkEdit(graded=False)
        after: dict[str, Any] = {
            "graded": edit.graded,
            "points": edit.points,
            "comment": edit.comment,
            "items": sorted(edit.items),
        }
        if before == after:
            return  # nothing changes: no new version, no history row
        db.execute(
            "INSERT INTO marks VALUES (?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT(student, question) DO UPDATE SET "
            "graded = excluded.graded, points = excluded.points, comment = excluded.comment, "
            "version = marks.version + 1, grader = excluded.grader, at = excluded.at",
            (student, question, int(after["graded"]), after["points"], after["comment"], grader, now()),
        )
        db.execute("DELETE FROM applied WHERE student = ? AND question = ?", (student, question))
        db.executemany("INSERT INTO applied VALUES (?, ?, ?)", [(student, question, r) for r in after["items"]])
        self._log(db, grader, "mark", student, question, None, before, after)

    def import_rows(
        self, rows: Sequence[tuple[str, str, str, float | None, str | None, int | None]], grader: str
    ) -> int:
        """A sheet's rows (where, student, question, points or None, comment or None, the version it
        was exported at or None), in one transaction: all or nothing (Stale names, by `where`, every
        row whose mark changed since its export). Points equal to what the rubric items give keep
        the items; other points stand instead of them. An empty points cell changes no points, a
        comment of None no comment. How many marks changed."""
        changed = 0
        with self._write() as db:
            stale = []
            for where, student, question, points, comment, version in rows:
                edit = self._sheet_edit(db, student, question, points, comment)
                if edit is None:
                    continue
                if version is not None and (why := self._stale(db, student, question, version)):
                    stale.append(f"{where}: {why}")
                    continue
                self._put(db, student, question, edit, grader)
                changed += 1
            if stale:
                raise Stale(stale)
        return changed

    def _sheet_edit(
        self, db: sqlite3.Connection, student: str, question: str, points: float | None, comment: str | None
    ) -> MarkEdit | None:
        """The edit a sheet's row makes, or None where it changes nothing. The rubric items stay
        applied (points that differ from theirs then stand instead of them, as the app shows)."""
        state = self._state(db, student, question) or {"graded": False, "points": None, "comment": "", "items": []}
        items = frozenset(state["items"])
        comment = state["comment"] if comment is None else comment
        if points is None:  # an empty cell never erases a mark: only the comment can change
            edit = MarkEdit(items, state["points"], comment, graded=state["graded"])
        elif state["points"] is None and round(points, 4) == round(self._items_total(db, question, items), 4):
            edit = MarkEdit(items, None, comment)
        else:
            edit = MarkEdit(items, points, comment)
        same = (edit.graded, edit.points, edit.comment) == (state["graded"], state["points"], state["comment"])
        return None if same else edit

    def _items_total(self, db: sqlite3.Connection, question: str, items: frozenset[int]) -> float:
        (maximum,) = db.execute("SELECT max FROM questions WHERE id = ?", (question,)).fetchone()
        points = [
            p
            for r, p in db.execute("SELECT id, points FROM rubric WHERE question = ? AND deleted = 0", (question,))
            if r in items
        ]
        return rubric_total(points, maximum)

    # -- reading ------------------------------------------------------------------------------

    def marks(self, question: str | None = None) -> Marks:
        """Every stored mark (of one question, or all), with its points as the rubric says now."""
        db = self._db()
        where, args = ("WHERE m.question = ?", (question,)) if question else ("", ())
        items: dict[tuple[str, str], list[AppliedItem]] = {}
        for student, q, text, points in db.execute(
            "SELECT a.student, a.question, r.text, r.points FROM applied a JOIN rubric r ON r.id = a.rubric "
            f"WHERE r.deleted = 0 {'AND a.question = ?' if question else ''} ORDER BY r.position, r.id",
            args,
        ):
            items.setdefault((student, q), []).append(AppliedItem(text, points))
        out: Marks = {}
        for student, q, graded, points, comment, version, grader, at, maximum in db.execute(
            "SELECT m.student, m.question, m.graded, m.points, m.comment, m.version, m.grader, m.at, q.max "
            f"FROM marks m JOIN questions q ON q.id = m.question {where}",
            args,
        ):
            applied = tuple(items.get((student, q), ()))
            total = (
                None
                if not graded
                else points
                if points is not None
                else rubric_total([a.points for a in applied], maximum)
            )
            out.setdefault(student, {})[q] = Mark(
                q, maximum, total, applied, comment, points is not None, grader, at, version
            )
        return out

    def applied_ids(self, question: str) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {}
        for student, rid in self._db().execute("SELECT student, rubric FROM applied WHERE question = ?", (question,)):
            found.setdefault(student, set()).add(rid)
        return found

    def history(self, limit: int = 200) -> list[dict]:
        rows = self._db().execute(
            "SELECT at, grader, kind, student, question, rubric, before, after FROM history ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        keys = ("at", "grader", "kind", "student", "question", "rubric", "before", "after")
        return [
            {
                k: (json.loads(v) if k in ("before", "after") and v is not None else v)
                for k, v in zip(keys, row, strict=True)
            }
            for row in rows
        ]

    @staticmethod
    def _log(
        db: sqlite3.Connection,
        grader: str,
        kind: str,
        student: str | None,
        question: str | None,
        rubric: int | None,
        before: dict | None,
        after: dict | None,
    ) -> None:
        db.execute(
            "INSERT INTO history(at, grader, kind, student, question, rubric, before, after) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (now(), grader, kind, student, question, rubric, _json(before), _json(after)),
        )


def _json(value: dict | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def load_marks(out: Path) -> Marks:
    """The marks stored in OUT (none where `grade hand` was never run there)."""
    store = Store.open_existing(out)
    if store is None:
        return {}
    try:
        return store.marks()
    finally:
        store.close()
