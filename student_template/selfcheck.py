"""`make selfcheck`: the grader's file checks, the public tests and submission.zip, in one report.

1. model_solution.py, train.py and utils.py are present, UTF-8 and valid Python (as the grader's
   intake checks them: a syntax error names the file and line); nothing else runs until they are;
2. the public tests in tests/ (pytest);
3. the three files import offline (the grader has no network);
4. create_submission.sh builds submission.zip, which is read back: exactly the three files.

Exit status 0 when submission.zip is ready, whatever the tests say (this is a report); 1 when it
cannot be built. Standard library only (plus pytest, which runs the tests).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = ("model_solution.py", "train.py", "utils.py")
ZIP = HERE / "submission.zip"
MAX_FILE_BYTES = 2 << 20  # the grader's cap per file
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
TIMEOUT_S = 900


def say(message: str = "") -> None:
    print(message, flush=True)


def check_source(name: str, raw: bytes) -> str | None:
    """What the grader's intake says about one file, or None when it is fine."""
    if len(raw) > MAX_FILE_BYTES:
        return f"{name} is {len(raw)} bytes; at most {MAX_FILE_BYTES} are accepted"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{name} is not valid UTF-8 text (byte {e.start})"
    try:
        ast.parse(text, filename=name)
    except SyntaxError as e:
        return f"{name}, line {e.lineno}: SyntaxError: {e.msg}"
    except ValueError as e:  # e.g. a NUL byte
        return f"{name} cannot be parsed: {e}"
    return None


def check_files() -> list[str]:
    problems = []
    for name in FILES:
        path = HERE / name
        if not path.is_file():
            problems.append(f"{name} is missing")
            continue
        problem = check_source(name, path.read_bytes())
        if problem:
            problems.append(problem)
    return problems


def offline_env() -> dict[str, str]:
    return {**os.environ, **OFFLINE, "PYTHONDONTWRITEBYTECODE": "1"}


def start_import_check() -> subprocess.Popen:
    """Import the three files the way the grader does, in a fresh offline Python (runs alongside the tests)."""
    return subprocess.Popen([sys.executable, "-c", "import utils, model_solution, train"], cwd=HERE,
                            env=offline_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def import_problem(proc: subprocess.Popen) -> str | None:
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"importing them took over {TIMEOUT_S} s"
    if proc.returncode != 0:
        return "\n".join(output.strip().splitlines()[-12:])
    return None


def count_tests() -> int:
    """The public tests, counted from the source, so a file that fails to import still counts."""
    total = 0
    for path in sorted((HERE / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        total += sum(isinstance(n, ast.FunctionDef) and n.name.startswith("test_") for n in tree.body)
    return total


def run_tests() -> tuple[int, int, str | None]:
    """(passed, total, why pytest could not run or None); pytest's own report goes to the terminal."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        try:
            run = subprocess.run([sys.executable, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
                                  f"--junitxml={report}", "tests"], cwd=HERE, env=offline_env(), timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return 0, count_tests(), f"the public tests took over {TIMEOUT_S} s"
        passed = ran = 0
        if report.exists():
            for case in ET.parse(report).getroot().iter("testcase"):
                ran += 1
                passed += not any(child.tag in ("failure", "error", "skipped") for child in case)
    problem = None if run.returncode in (0, 1) else \
        f"pytest stopped with exit status {run.returncode} (see its errors above: often a file that does not import)"
    return passed, max(ran, count_tests()), problem


def build_zip() -> str | None:
    env = {**os.environ, "PYTHON": sys.executable}
    run = subprocess.run(["sh", str(HERE / "create_submission.sh")], cwd=HERE, env=env,
                         capture_output=True, text=True)
    if run.returncode != 0:
        return (run.stderr or run.stdout).strip() or f"create_submission.sh failed (exit {run.returncode})"
    return None


def check_zip() -> str | None:
    """Read submission.zip back: exactly the three files, at its root, the same bytes as here."""
    try:
        with zipfile.ZipFile(ZIP) as archive:
            names = sorted(archive.namelist())
            if names != sorted(FILES):
                return f"submission.zip holds {', '.join(names) or 'nothing'}; expected exactly {', '.join(FILES)}"
            for name in FILES:
                raw = archive.read(name)
                problem = check_source(name, raw)
                if problem:
                    return f"in submission.zip: {problem}"
                if raw != (HERE / name).read_bytes():
                    return f"{name} in submission.zip differs from {name} here"
    except (OSError, zipfile.BadZipFile) as e:
        return f"submission.zip cannot be read ({e})"
    return None


def summary_to_ci(lines: list[str]) -> None:
    """On GitHub Actions, the summary also goes to the run's page."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write("\n".join(["## selfcheck", "", *lines, ""]))


def main() -> int:
    say("== 1/4 files: present, UTF-8, valid Python")
    problems = check_files()
    for problem in problems:
        say(f"   problem: {problem}")
    if problems:
        if ZIP.exists():
            ZIP.unlink()  # never leave a zip behind that does not match these files
        lines = [f"public tests not run; submission.zip was NOT built: {'; '.join(problems)}"]
        say("   the imports, the public tests and submission.zip need these fixed first")
        say()
        say(lines[0])
        summary_to_ci(lines)
        return 1
    say("   ok: " + ", ".join(FILES))

    importing = start_import_check()
    say("== 2/4 public tests (pytest tests/)")
    passed, total, test_problem = run_tests()
    if test_problem:
        say(f"   problem: {test_problem}")

    say("== 3/4 imports, offline (as the grader runs them)")
    imports = import_problem(importing)
    say("   ok: utils, model_solution and train import" if imports is None else
        "   problem: importing them fails (the grader would give 0 for everything that needs them):\n"
        + "\n".join("   | " + line for line in imports.splitlines()))

    say("== 4/4 submission.zip")
    zip_problem = build_zip() or check_zip()
    if zip_problem and ZIP.exists():
        ZIP.unlink()
    say(f"   problem: {zip_problem}" if zip_problem else "   ok: exactly " + ", ".join(FILES))

    tests = f"{passed}/{total} public tests pass"
    if zip_problem:
        lines = [f"{tests}; submission.zip was NOT built: {zip_problem}"]
    else:
        lines = [f"{tests}; submission.zip is ready ({len(FILES)} files)"]
        if imports:
            lines.append("Warning: your files do not import (see 3/4 above); the grader would give 0.")
        elif passed == total and not test_problem:
            lines.append("All public tests pass. The grader checks much more (see README.md): test your edge cases too.")
    say()
    for line in lines:
        say(line)
    summary_to_ci(lines)
    return 1 if zip_problem else 0


if __name__ == "__main__":
    sys.exit(main())
