"""Grading by hand (`grade hand OUT`): real batches graded by the real `grade batch` (the exam's
staff answers with a class's variants, the A2S2 reference notebook, A3's student corpus), the real
app served by waitress in its own `grade hand` process, and real headless Chromium driven by
Playwright (the system's /usr/bin/chromium: no browser is downloaded). A TA marks a question for
the class with the keyboard, applies a rubric item to a group and edits its points, two TAs mark
at once, a sheet goes out and comes back, a bad sheet is refused with nothing written, and a
regrade keeps every mark; every time grades.csv's total is the automatic points plus the marks."""

import csv
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from conftest import GRADE, REPO, SET_UP
from hand_corpus import a2s2_class, a3_class, exam_class

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "test-token-37"
EXAM_LIMITS = ["--assignment", "transformer_exam", "--limit", "call_timeout_s=3", "--limit", "import_timeout_s=30"]


def grade_batch(folder: Path, out: Path, *extra: str, timeout: int = 900) -> None:
    p = subprocess.run([*GRADE, "batch", str(folder), "--out", str(out), "--jobs", "2", *extra], cwd=REPO,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]


class Server:
    """`grade hand OUT` in its own process, on a free port; stopped with SIGTERM."""

    def __init__(self, out: Path, *extra: str):
        self.proc = subprocess.Popen([*GRADE, "hand", str(out), "--port", "0", "--token", TOKEN, *extra], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/login\?token=", line)
        assert found, line + self.proc.stderr.read()
        self.base = found[1]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, out + err


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM.exists(), f"no /usr/bin/chromium: {SET_UP}"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def signed_in(browser: Browser, server: Server, name: str) -> Page:
    page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
    messages = []
    page.on("console", lambda m: messages.append(m.text))  # a CSP violation or a script error
    page.on("pageerror", lambda e: messages.append(str(e)))
    page.console_messages = messages  # type: ignore[attr-defined]
    page.goto(f"{server.base}/login?token={TOKEN}&grader={name}")
    assert page.inner_text("#grader") == name
    return page


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", newline="") as fh:
        return {row["student"]: row for row in csv.DictReader(fh)}


def results(out: Path, student: str) -> dict:
    return json.loads((out / student / "results.json").read_text())


def stored(out: Path) -> tuple[list, list]:
    """Every mark and every history row of OUT's store, as rows."""
    db = sqlite3.connect(out / "marks.sqlite")
    try:
        return (db.execute("SELECT * FROM marks ORDER BY student, question").fetchall(),
                db.execute("SELECT * FROM history ORDER BY id").fetchall())
    finally:
        db.close()


def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except (AssertionError, OSError, KeyError, ValueError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


def totals_are_automatic_plus_marks(out: Path, marks: dict[tuple[str, str], float], bonus: set[str] = frozenset()):
    """grades.csv: every row's total = its results.json's automatic points + the marks entered,
    a by-hand part not graded an empty cell, and `ungraded` the number of those."""
    book = gradebook(out)
    for student, row in book.items():
        r = results(out, student)
        manual = [i["id"] for i in r["items"] if i["status"] == "manual"]
        mine = {q: p for (s, q), p in marks.items() if s == student}
        assert float(row["automatic"]) == pytest.approx(r["score"]), student
        assert float(row["total"]) == pytest.approx(r["score"] + sum(mine.values())), (student, row, mine)
        for q in manual:
            assert row[q] == (f"{mine[q]:g}" if q in mine else ""), (student, q)
        assert int(row["ungraded"]) == len([q for q in manual if q not in mine])
        hand = [p for q, p in mine.items() if q not in bonus]
        assert row["by_hand"] == (f"{sum(hand):g}" if hand else "")
    return book


# -- the exam ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def exam(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exam")
    exam_class(folder / "in", 5, with_code=1)
    grade_batch(folder / "in", folder / "out", *EXAM_LIMITS)
    server = Server(folder / "out")
    yield {"in": folder / "in", "out": folder / "out", "server": server, "marks": {}}
    if server.proc.poll() is None:
        server.stop()


def test_a_ta_grades_a_question_for_the_class_with_the_keyboard(exam, browser):
    """3b for every student: rubric items by number keys, a comment, Ctrl+Enter saves and opens the
    next answer not graded; the sidebar, the gradebook page, grades.csv and report.html follow."""
    page, out = signed_in(browser, exam["server"], "alice"), exam["out"]
    page.goto(f"{exam['server'].base}/q/3b")
    students = page.locator("#student-list li").evaluate_all("els => els.map(e => e.dataset.student)")
    assert len(students) == 5
    entered = {}
    for n, student in enumerate(students):
        assert page.inner_text("#student") == student
        keys = ["1", "3"] if n % 2 else ["1", "2", "3", "4"]
        for key in keys:
            page.keyboard.press(key)
        points = {1: 2, 2: 2, 3: 2, 4: 1}
        expected = sum(points[int(k)] for k in keys)
        assert page.inner_text("#preview") == f"{expected:g}"
        page.fill("#comment", f"comment for {student}: <b>kept as text</b>")
        page.keyboard.press("Escape")
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
        entered[(student, "3b")] = expected
    assert page.url.endswith("/"), page.url  # every answer graded: back to the parts
    assert page.inner_text("tr[data-question='3b'] .progress") == "5 / 5"
    page.goto(f"{exam['server'].base}/q/3b?student={students[0]}")
    assert page.inner_text("#progress") == "5 of 5 graded"
    assert page.inner_text(f"#student-list li[data-student='{students[1]}'] .pts") == "4"
    assert not page.console_messages
    exam["marks"].update(entered)
    wait_for(lambda: totals_are_automatic_plus_marks(out, exam["marks"]))
    page.goto(f"{exam['server'].base}/grades")
    row = page.locator(f"tr[data-student='{students[1]}']")
    assert row.locator("td[data-column='3b']").inner_text() == "4"
    report = wait_for(lambda: next((t for t in [(out / students[1] / "report.html").read_text()] if "hand-3b" in t), None))
    assert "comment for" in report and "&lt;b&gt;kept as text&lt;/b&gt;" in report and "+2: R_m = [[cos m theta" in report


def test_a_rubric_item_applied_to_a_group_and_its_points_edited_change_every_total(exam, browser):
    page, out, base = signed_in(browser, exam["server"], "alice"), exam["out"], exam["server"].base
    page.goto(f"{base}/q/5b/groups")
    biggest = page.locator("#groups tbody tr").first
    size = int(biggest.get_attribute("data-size"))
    assert size >= 2
    biggest.locator("a").first.click()
    members = page.locator("#members input[name=member]").evaluate_all("els => els.map(e => e.value)")
    assert len(members) == size
    page.locator("#rubric input[name=item]").nth(0).check()  # +1: never materializes the n x n matrix
    page.locator("#rubric input[name=item]").nth(2).check()  # +2: the online softmax
    save(page)
    assert f"saved for the {size} answers" in page.inner_text("#flash")
    for m in members:
        assert page.inner_text(f"#members label[data-student='{m}'] .pts") == "3"
        exam["marks"][(m, "5b")] = 3
    others = [s for s in gradebook(out) if s not in members]
    page.goto(f"{base}/q/5b?student={others[0]}")
    page.keyboard.press("1")
    save(page)  # one answer outside the group: the first item alone
    exam["marks"][(others[0], "5b")] = 1
    # The first item's points, 1 -> 2 (the grader decides it is worth more): every answer it is
    # applied to, the group and the one outside it, follows; the rest do not move.
    page.click("#rubric-edit summary")
    first = page.locator("form.item-edit").first
    first.locator(".item-points").fill("2")
    with page.expect_navigation():
        first.locator(".item-save").click()
    assert f"the {size + 1} answers it was applied to follow" in page.inner_text("#flash")
    for m in members:
        exam["marks"][(m, "5b")] = 4
    exam["marks"][(others[0], "5b")] = 2
    page.goto(f"{base}/grades")
    for m in [*members, others[0]]:
        assert page.inner_text(f"tr[data-student='{m}'] td[data-column='5b']") == f"{exam['marks'][(m, '5b')]:g}"
    wait_for(lambda: totals_are_automatic_plus_marks(out, exam["marks"]))


def save(page: Page, button: str = "#save") -> None:
    """Click Save and wait for the answer to come back (saved, or refused)."""
    with page.expect_navigation():
        page.click(button)


def test_two_markers_at_once_lose_nothing(exam, browser):
    """Alice and Bob open the same answer; Alice saves first; Bob's save is refused as stale (his
    edit shown, nothing overwritten) until he reopens it. Their saves of other answers all land."""
    server, out = exam["server"], exam["out"]
    alice, bob = signed_in(browser, server, "alice"), signed_in(browser, server, "bob")
    student = sorted(gradebook(out))[0]
    for page in (alice, bob):
        page.goto(f"{server.base}/q/6a?student={student}")
    alice.keyboard.press("1")
    save(alice)
    bob.keyboard.press("3")
    bob.fill("#comment", "bob's comment")
    save(bob)
    assert "alice" in bob.inner_text("#conflict") and "bob's comment" in bob.inner_text("#tried")
    marks, history = stored(out)
    assert [m for m in marks if m[0] == student and m[1] == "6a"][0][6] == "alice"
    with bob.expect_navigation():
        bob.click("#reload")
    assert bob.locator("#rubric input[name=item]").nth(0).is_checked()  # Alice's item, as saved
    bob.keyboard.press("3")
    save(bob)
    exam["marks"][(student, "6a")] = 4  # 1 + 3
    # Both mark the rest of 6a, each their own answers, in turns.
    rest = sorted(gradebook(out))[1:]
    for a, b in zip(rest[0::2], rest[1::2] + [None], strict=False):
        alice.goto(f"{server.base}/q/6a?student={a}")
        if b:
            bob.goto(f"{server.base}/q/6a?student={b}")
        alice.keyboard.press("2")
        if b:
            bob.keyboard.press("1")
            bob.keyboard.press("2")
        save(alice)
        if b:
            save(bob)
        exam["marks"][(a, "6a")] = 1
        if b:
            exam["marks"][(b, "6a")] = 2
    marks, history = stored(out)
    graders = {m[0]: m[6] for m in marks if m[1] == "6a"}
    assert graders == {student: "bob", **{s: "alice" for s in rest[0::2]}, **{s: "bob" for s in rest[1::2]}}
    # The history: Alice's mark, then Bob's over it with hers as the value before.
    mine = [h for h in history if h[4] == student and h[5] == "6a"]
    assert [h[2] for h in mine] == ["alice", "bob"]
    assert json.loads(mine[1][7])["items"] == json.loads(mine[0][8])["items"]
    wait_for(lambda: totals_are_automatic_plus_marks(out, exam["marks"]))


def test_gradescope_keeps_the_by_hand_parts_out_of_the_autograders_score(exam):
    """What run_autograder writes for an exam submission: the automatic points alone, each by-hand
    part a test worth nothing here (Gradescope grades it by question itself), and it says so."""
    import jsonschema

    from graders.reports.gradescope import schema, to_gradescope
    from graders.scoring.results import Results

    r = Results.model_validate_json((exam["out"] / "s000" / "results.json").read_bytes())
    gs = to_gradescope(r)
    jsonschema.validate(gs, schema())
    by_hand = [t for t in gs["tests"] if "graded by hand" in t["tags"]]
    assert sorted(t["tags"][0] for t in by_hand) == sorted(["1b_saturation", "3a_relative", "3b", "4a", "5b", "6a", "6b"])
    assert all(t["score"] == 0 and t["max_score"] == 0 and "not part of the autograder's score" in t["output"]
               for t in by_hand)
    assert gs["score"] == r.score == sum(t["score"] for t in gs["tests"])
    assert gs["output"].startswith(f"Autograded score: {r.score:g}/33.\nThe other 27 of the 60 points are graded by hand")


def test_the_history_is_append_only(exam):
    db = sqlite3.connect(exam["out"] / "marks.sqlite")
    try:
        for sql in ("UPDATE history SET grader = 'mallory'", "DELETE FROM history"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                db.execute(sql)
    finally:
        db.close()


def _hand(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GRADE, "hand", str(out), *args, "--grader", "carol"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_a_sheet_goes_out_and_comes_back(exam, tmp_path):
    out = exam["out"]
    sheet = tmp_path / "sheet.csv"
    assert _hand(out, "--export", str(sheet)).returncode == 0
    with open(sheet, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["student", "question", "max", "points", "comment", "rubric_items", "answer", "version"]
    assert len(rows) == 7 * 5  # one row per by-hand part per student
    unchanged = _hand(out, "--import", str(sheet))
    assert unchanged.returncode == 0 and "0 marks entered" in unchanged.stdout, unchanged.stdout + unchanged.stderr
    changed = 0
    for row in rows:  # every part not graded in the app is graded here: the class is then complete
        if row["question"] in ("4a", "6b", "1b_saturation", "3a_relative"):
            row["points"] = {"4a": "2.5", "6b": "1", "1b_saturation": "1", "3a_relative": "0.5"}[row["question"]]
            row["comment"] = f"=from the sheet {row['student']}"  # a formula-looking comment stays text
        elif row["question"] == "5b" and not row["points"]:
            row["points"] = "2"
        elif row["question"] == "3b" and row["points"] == "4":
            row["points"] = "5.5"  # a mark made in the app, changed in the sheet: stands instead of its items
        else:
            continue
        changed += 1
        exam["marks"][(row["student"], row["question"])] = float(row["points"])
    with open(sheet, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    p = _hand(out, "--import", str(sheet))
    assert changed == 24 and p.returncode == 0 and f"{changed} marks entered" in p.stdout, p.stdout + p.stderr
    totals_are_automatic_plus_marks(out, exam["marks"])
    again = tmp_path / "again.csv"
    assert _hand(out, "--export", str(again)).returncode == 0
    with open(again, newline="") as fh:
        back = {(r["student"], r["question"]): r for r in csv.DictReader(fh)}
    for row in rows:
        assert back[(row["student"], row["question"])]["points"] == row["points"]
    assert back[(rows[0]["student"], "4a")]["comment"] == f"'=from the sheet {rows[0]['student']}"
    report = (out / rows[0]["student"] / "report.html").read_text()
    assert f"=from the sheet {rows[0]['student']}" in report


BAD_ROWS = {
    "unknown student": ({"student": "nobody"}, "column student: unknown student 'nobody'"),
    "unknown question": ({"question": "9z"}, "column question: unknown question '9z'"),
    "over the maximum": ({"points": "99"}, "column points: 99 is outside 0 to"),
    "negative": ({"points": "-1"}, "column points: -1 is outside 0 to"),
    "not a number": ({"points": "2,5"}, "column points: '2,5' is not a number"),
    "another maximum": ({"max": "100"}, "column max: '100' is not question"),
}


@pytest.mark.parametrize("case", [*BAD_ROWS, "duplicate row", "changed since the export"])
def test_a_bad_sheet_is_refused_naming_file_row_and_column_and_nothing_is_written(exam, tmp_path, case):
    out = exam["out"]
    sheet = tmp_path / "sheet.csv"
    assert _hand(out, "--export", str(sheet)).returncode == 0
    with open(sheet, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:  # good rows around the bad one: they must not be written either
        row["points"] = "0"
    if case == "duplicate row":
        rows.insert(5, dict(rows[2]))
        expected = f"{sheet} row 7, column question: {rows[2]['student']} {rows[2]['question']} is given twice (rows 4 and 7)"
    elif case == "changed since the export":
        rows[3]["points"], rows[3]["version"] = "0.5", str(int(rows[3]["version"]) - 1 if int(rows[3]["version"]) else 7)
        expected = f"{sheet} row 5: {rows[3]['student']}'s answer to {rows[3]['question']} was changed"
    else:
        change, message = BAD_ROWS[case]
        rows[3].update(change)
        expected = f"{sheet} row 5, {message}"
    with open(sheet, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    before, book = stored(out), (out / "grades.csv").read_bytes()
    p = _hand(out, "--import", str(sheet))
    assert p.returncode == 2 and expected in p.stderr and "nothing was written" in p.stderr, p.stderr
    assert stored(out) == before and (out / "grades.csv").read_bytes() == book


def test_a_regrade_keeps_every_mark(exam):
    """`grade batch --force` while the app runs: results.json, report.html and grades.csv are
    written again; every mark is still in grades.csv, in the reports and in the app."""
    out = exam["out"]
    before = stored(out)[0]
    stamps = {s: (out / s / "results.json").stat().st_mtime_ns for s in gradebook(out)}
    grade_batch(exam["in"], out, *EXAM_LIMITS, "--force")
    assert all((out / s / "results.json").stat().st_mtime_ns != t for s, t in stamps.items())
    assert stored(out)[0] == before
    book = totals_are_automatic_plus_marks(out, exam["marks"])
    assert all(row["ungraded"] == "0" for row in book.values())  # every by-hand part of the class graded
    marked = next(s for s in book if (s, "3b") in exam["marks"])
    assert 'id="hand-3b"' in (out / marked / "report.html").read_text()
    summary = (out / "summary.html").read_text()
    assert 'id="hand-progress"' in summary and 'data-question="3b" data-graded="5" data-answers="5"' in summary
    exam["server"].stop()  # its last write: the same marks
    totals_are_automatic_plus_marks(out, exam["marks"])


# -- A2S2 and A3 ---------------------------------------------------------------------------------

def _mark_in_browser(page: Page, base: str, qid: str, student: str, keys: list[str], comment: str) -> None:
    page.goto(f"{base}/q/{qid}?student={student}")
    for key in keys:
        page.keyboard.press(key)
    page.fill("#comment", comment)
    save(page)
    assert page.inner_text(f"#student-list li[data-student='{student}'] .pts") != "–"


def _mark_by_sheet(out: Path, tmp: Path, marks: dict[tuple[str, str], float]) -> None:
    sheet = tmp / "sheet.csv"
    assert _hand(out, "--export", str(sheet)).returncode == 0
    with open(sheet, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if (row["student"], row["question"]) in marks:
            row["points"] = f"{marks[(row['student'], row['question'])]:g}"
    with open(sheet, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    p = _hand(out, "--import", str(sheet))
    assert p.returncode == 0, p.stderr


def test_a2s2_step_6_graded_in_the_browser_and_by_sheet(tmp_path, browser):
    a2s2_class(tmp_path / "in")
    grade_batch(tmp_path / "in", tmp_path / "out", "--assignment", "a2s2")
    out, server = tmp_path / "out", Server(tmp_path / "out")
    try:
        page = signed_in(browser, server, "dana")
        page.goto(f"{server.base}/q/6?student=ada")
        cells = page.locator(".answer-section pre").all_inner_texts()
        assert any("for n_heads in (1, 4)" in c for c in cells)  # the experiment cell
        assert any("held-out loss, not the training loss" in c for c in cells)  # the mini-report
        assert "group of 2" in page.inner_text("#in-group")  # cy's copy of ada's step 6
        _mark_in_browser(page, server.base, "6", "ada", ["1", "2", "3", "4"], "a clear report")
        page.goto(f"{server.base}/q/6?student=bo")
        assert "TODO (step 6): your experiment" in page.inner_text("section.main")
        assert not page.console_messages
    finally:
        server.stop()
    _mark_by_sheet(out, tmp_path, {("bo", "6"): 0, ("cy", "6"): 3})
    totals_are_automatic_plus_marks(out, {("ada", "6"): 4, ("bo", "6"): 0, ("cy", "6"): 3})
    assert results(out, "ada")["score"] == 20  # steps 1-5, full marks: the 4 of step 6 come from the marks
    assert gradebook(out)["ada"]["total"] == "24"


def test_a3_bonus_graded_with_the_training_evidence_beside_the_baseline(tmp_path, browser):
    a3_class(tmp_path / "in")
    grade_batch(tmp_path / "in", tmp_path / "out", "--limit", "call_timeout_s=5")
    out, server = tmp_path / "out", Server(tmp_path / "out")
    try:
        page = signed_in(browser, server, "eve")
        page.goto(f"{server.base}/q/3(c)?student=bonus_lr")
        diff = page.inner_text(".answer-section pre.diff")
        assert "+    optimizer = torch.optim.AdamW(model.parameters(), lr=3 * learning_rate)" in diff
        t = results(out, "bonus_lr")["training"]
        evidence = page.inner_text("#evidence")
        assert f"{t['final_loss']:.4f}" in evidence and f"{t['reference_final_loss']:.4f}" in evidence
        assert f"{t['final_loss'] - t['reference_final_loss']:+.4f}" in evidence
        _mark_in_browser(page, server.base, "3(c)", "bonus_lr", ["1"], "one change, lower held-out loss")
        page.goto(f"{server.base}/q/3(c)?student=reference")
        assert "(the same as the starter's)" in page.inner_text(".answer-section pre.diff")
        assert not page.console_messages
    finally:
        server.stop()
    _mark_by_sheet(out, tmp_path, {("reference", "3(c)"): 0, ("leo_tabs", "3(c)"): 0})
    marks = {("bonus_lr", "3(c)"): 3, ("reference", "3(c)"): 0, ("leo_tabs", "3(c)"): 0}
    book = totals_are_automatic_plus_marks(out, marks, bonus={"3(c)"})
    assert book["bonus_lr"]["bonus"] == "3" and book["pia_einsum"]["bonus"] == "" and book["pia_einsum"]["3(c)"] == ""
    assert book["reference"]["total"] == "30" and book["bonus_lr"]["total"] == f"{results(out, 'bonus_lr')['score'] + 3:g}"
    report = (out / "bonus_lr" / "report.html").read_text()
    assert "Bonus: 3 / 9" in report and "one change, lower held-out loss" in report
    # The training run measured again for the class (`--only`): merged into each results.json,
    # every other item as it was, the same evidence (the run is deterministic), every mark kept.
    before = {s: results(out, s) for s in book}
    grade_batch(tmp_path / "in", out, "--limit", "call_timeout_s=5", "--only", "3(b)iii")
    for s, old in before.items():
        new = results(out, s)
        assert new["items"] == old["items"] and new["score"] == old["score"] and new["training"] == old["training"], s
        assert new["warnings"][0] == "items 3(b)iii graded again (grade batch --only); the others are from the earlier grade"
        assert not (out / s / ".regrade").exists()
    assert totals_are_automatic_plus_marks(out, marks, bonus={"3(c)"}) == book
    assert "one change, lower held-out loss" in (out / "bonus_lr" / "report.html").read_text()
    # `grade report` re-renders a batch's report.html with the marks of OUT's store.
    again = tmp_path / "again.html"
    p = subprocess.run([*GRADE, "report", str(out / "bonus_lr" / "results.json"), "--out", str(again)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "one change, lower held-out loss" in again.read_text(), p.stderr
    shutil.rmtree(tmp_path / "in")


# -- the store alone: transactions under threads --------------------------------------------------

def _store(tmp_path: Path):
    from graders.handgrading.questions import HandQuestion
    from graders.handgrading.store import Store
    from graders.spec import HandAnswer

    store = Store(tmp_path / "marks.sqlite")
    store.sync_questions([HandQuestion("q", "a question", 4, False, HandAnswer(source="answers"), "",
                                       (("right idea", 2.0), ("worked out", 2.0), ("a slip", -1.0)))], "setup")
    return store


def test_concurrent_saves_all_land_and_a_race_on_one_answer_has_one_winner(tmp_path):
    """Eight threads, each its own connection, save 25 answers each at once: all 200 are stored
    with one history row each. Then eight threads save the same answer against the same version:
    exactly one is stored, the seven others are refused as stale."""
    from concurrent.futures import ThreadPoolExecutor

    from graders.handgrading.store import MarkEdit, Stale

    store = _store(tmp_path)
    items = {r.text: r.id for r in store.rubric("q")}

    def mark(worker: int) -> None:
        for n in range(25):
            store.save("q", [(f"s{worker}-{n}", 0)], MarkEdit(frozenset({items["right idea"]}), None, f"w{worker}"),
                       f"ta{worker}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(mark, range(8)))
    marks = store.marks("q")
    assert len(marks) == 200 and all(m["q"].points == 2 for m in marks.values())
    assert len([h for h in store.history(1000) if h["kind"] == "mark"]) == 200

    def race(worker: int) -> str:
        try:
            store.save("q", [("contested", 0)], MarkEdit(frozenset(), float(worker % 4), ""), f"ta{worker}")
            return "saved"
        except Stale as e:
            return str(e)

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(race, range(8)))
    assert outcomes.count("saved") == 1, outcomes
    assert all("contested's answer to q was changed by ta" in o for o in outcomes if o != "saved")
    winner = store.marks("q")["contested"]["q"]
    assert winner.version == 1 and winner.grader == f"ta{outcomes.index('saved')}"


def test_a_marks_total_follows_its_items_points_and_is_capped(tmp_path):
    from graders.handgrading.store import MarkEdit

    store = _store(tmp_path)
    items = {r.text: r for r in store.rubric("q")}
    right, worked, slip = items["right idea"], items["worked out"], items["a slip"]
    store.save("q", [("a", 0)], MarkEdit(frozenset({right.id, worked.id}), None, ""), "ta")
    store.save("q", [("b", 0)], MarkEdit(frozenset({right.id, slip.id}), None, ""), "ta")
    store.save("q", [("c", 0)], MarkEdit(frozenset({slip.id}), None, ""), "ta")
    store.save("q", [("d", 0)], MarkEdit(frozenset({right.id}), 3.5, "typed in"), "ta")
    assert {s: m["q"].points for s, m in store.marks().items()} == {"a": 4, "b": 1, "c": 0, "d": 3.5}
    assert store.edit_item(right.id, right.version, right.text, 3.0, "ta") == 3  # applied to a, b, d
    assert {s: m["q"].points for s, m in store.marks().items()} == {"a": 4, "b": 2, "c": 0, "d": 3.5}
    assert store.edit_item(slip.id, slip.version, slip.text, None, "ta") == 2  # deleted: b and c lose it
    assert {s: m["q"].points for s, m in store.marks().items()} == {"a": 4, "b": 3, "c": 0, "d": 3.5}
    store.save("q", [("d", store.marks()["d"]["q"].version)], None, "ta")  # "Not graded"
    assert store.marks()["d"]["q"].points is None and store.marks()["d"]["q"].version == 2
