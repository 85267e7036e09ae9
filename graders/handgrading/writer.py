"""Keeps OUT's views in step with the marks while the app runs: after a change, a background
thread rewrites grades.csv and the report.html of each student whose marks changed (within about
a second), and summary.html at most every SUMMARY_EVERY_S seconds; flush() writes everything at
once (when the app stops). The requests never wait for it."""

import sys
import threading
import time
import traceback
from collections.abc import Iterable

from graders.deploy.gradebook import write_gradebook
from graders.handgrading.classroom import Classroom
from graders.handgrading.outputs import write_marked_reports, write_views
from graders.handgrading.store import load_marks

DEBOUNCE_S = 0.3
SUMMARY_EVERY_S = 30.0


class ViewWriter:
    def __init__(self, room: Classroom, background: bool = True):
        self.room = room
        self._dirty: set[str] = set()
        self._full = False
        self._lock = threading.Condition()
        self._last_summary = 0.0
        self._idle = threading.Event()
        self._idle.set()
        if background:
            threading.Thread(target=self._run, name="grade-hand-views", daemon=True).start()

    def changed(self, students: Iterable[str]) -> None:
        with self._lock:
            self._dirty.update(students)
            self._idle.clear()
            self._lock.notify()

    def refresh(self) -> None:
        """Every view, soon (at start-up: the summary's plots take seconds, the pages need not wait)."""
        with self._lock:
            self._full = True
            self._idle.clear()
            self._lock.notify()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Whether every change so far is written (for tests and the bench)."""
        return self._idle.wait(timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._dirty and not self._full:
                    self._idle.set()
                    self._lock.wait()
            time.sleep(DEBOUNCE_S)  # a burst of saves (a group, an edited item): one write
            with self._lock:
                students, self._dirty, full, self._full = self._dirty, set(), self._full, False
            try:
                self._write(students, full)
            except Exception:  # a view that cannot be written must not stop the marks being saved
                traceback.print_exc(file=sys.stderr)

    def _write(self, students: set[str], full: bool) -> None:
        room = self.room
        for s in students:
            room.reload_results(s)
        if full or time.monotonic() - self._last_summary >= SUMMARY_EVERY_S:
            self.flush(None if full else students)
            return
        marks = load_marks(room.out)
        write_gradebook(room.out / "grades.csv", room.spec, room.students, room.results, marks)
        write_marked_reports(room.out, room.results, marks, students)

    def flush(self, students: Iterable[str] | None = None) -> None:
        """grades.csv, summary.html and the report.html of `students` (None: every marked one), now."""
        write_views(self.room.out, self.room.spec, self.room.students, self.room.results, students)
        self._last_summary = time.monotonic()
