"""Grading one question by hand for a class: how long it takes a TA in `grade hand`'s app.

Makes a class of COUNT exam submissions (the exam's staff answers with a class's variants:
tests/hand_corpus.py), grades it with the real `grade batch` (answers only: no exam.py, so no
worker), serves it with the real `grade hand`, and drives the system's Chromium through Playwright
as a TA with the keyboard would: for each answer of one question, one or two rubric keys and
Ctrl+Enter (save, and open the next answer not graded). Then the same question again by groups
(one save per group). Prints the wall time of each pass, per answer, and the check that
grades.csv's totals are the automatic points plus the marks.

    .venv/bin/python bench/hand_grading.py [--count 100] [--out DIR] [--screenshots docs/images]
    .venv/bin/python bench/hand_grading.py --shot OUT PATH NAME   # one screenshot of another batch

The browser's own time is in the numbers (a TA's would be too); the TA's reading time is not.
"""

import argparse
import csv
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
GRADE = [sys.executable, "-m", "graders.cli"]
TOKEN = "bench"
QUESTION = "5b"


def make_class(folder: Path, count: int) -> Path:
    from hand_corpus import exam_class

    out = folder / "out"
    if (out / "grades.csv").exists():
        print(f"class of {count}: already graded in {out}")
        return out
    exam_class(folder / "in", count)
    started = time.monotonic()
    subprocess.run([*GRADE, "batch", str(folder / "in"), "--out", str(out), "--jobs", "2", "--assignment",
                    "transformer_exam"], cwd=REPO, check=True, capture_output=True)
    print(f"class of {count}: grade batch took {time.monotonic() - started:.1f} s")
    return out


def serve(out: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*GRADE, "hand", str(out), "--port", "0", "--token", TOKEN], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    found = re.search(r"(http://127\.0\.0\.1:\d+)/login", proc.stdout.readline())
    assert found, "grade hand did not start"
    return proc, found[1]


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)


def one_by_one(page, base: str, count: int) -> list[float]:
    """Every answer of QUESTION with the keyboard; the seconds from one answer shown to the next."""
    page.goto(f"{base}/q/{QUESTION}")
    times = []
    for n in range(count):
        started = time.perf_counter()
        for key in (["1"] if n % 3 else ["1", "4"]):
            page.keyboard.press(key)
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
        times.append(time.perf_counter() - started)
    return times


def by_groups(page, base: str) -> tuple[int, float]:
    """QUESTION again, one save per group (the second item added to every answer)."""
    page.goto(f"{base}/q/{QUESTION}/groups")
    links = page.locator("#groups tbody tr td:first-child a").evaluate_all("els => els.map(e => e.href)")
    started = time.perf_counter()
    for href in links:
        page.goto(href)
        page.keyboard.press("2")
        with page.expect_navigation():
            page.click("#save")
    return len(links), time.perf_counter() - started


def check_totals(out: Path) -> int:
    """grades.csv's total = automatic + by_hand for every row; the rows checked."""
    with open(out / "grades.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        assert abs(float(row["total"]) - float(row["automatic"]) - float(row["by_hand"] or 0)) < 1e-9, row
    return len(rows)


SCREENS = [("hand-index", "/"), ("hand-answer", f"/q/3b?student=s001"), ("hand-groups", f"/q/{QUESTION}/groups"),
           ("hand-gradebook", "/grades"), ("hand-history", "/history")]


def screenshots(browser, base: str, folder: Path, screens: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    page.goto(f"{base}/login?token={TOKEN}&grader=alice")
    for name, path in screens:
        page.goto(base + path)
        if name == "hand-groups":
            page.locator("#groups tbody tr td:first-child a").first.click()
            name = "hand-group"
        page.screenshot(path=str(folder / f"{name}.png"))
        print(f"screenshot: {folder / name}.png")


def launch(p):
    return p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])


def bench(args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    out = make_class(args.out, args.count)
    (out / "marks.sqlite").unlink(missing_ok=True)  # every run grades the question from nothing
    for extra in ("-wal", "-shm"):
        (out / f"marks.sqlite{extra}").unlink(missing_ok=True)
    proc, base = serve(out)
    try:
        with sync_playwright() as p:
            browser = launch(p)
            page = browser.new_context().new_page()
            page.goto(f"{base}/login?token={TOKEN}&grader=bench")
            times = one_by_one(page, base, args.count)
            print(f"one by one: {args.count} answers of {QUESTION} in {sum(times):.1f} s; per answer median "
                  f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")
            groups, took = by_groups(page, base)
            print(f"by groups: {groups} groups of {args.count} answers in {took:.1f} s ({groups} saves)")
            if args.screenshots:
                screenshots(browser, base, args.screenshots, SCREENS)
            browser.close()
    finally:
        stop(proc)
    print(f"grades.csv: total = automatic + by_hand on all {check_totals(out)} rows")


def one_shot(out: Path, path: str, name: str, folder: Path) -> None:
    from playwright.sync_api import sync_playwright

    proc, base = serve(out)
    try:
        with sync_playwright() as p:
            browser = launch(p)
            screenshots(browser, base, folder, [(name, path)])
            browser.close()
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("/tmp/hand-bench"))
    parser.add_argument("--screenshots", type=Path)
    parser.add_argument("--shot", nargs=3, metavar=("OUT", "PATH", "NAME"))
    args = parser.parse_args()
    if args.shot:
        one_shot(Path(args.shot[0]), args.shot[1], args.shot[2], args.screenshots or REPO / "docs" / "images")
    else:
        bench(args)


if __name__ == "__main__":
    main()
