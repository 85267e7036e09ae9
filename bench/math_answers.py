"""What reading math answers costs on the trusted side: the test corpus's spellings, its
two-reading and hostile inputs, one at a time (CPU time, median of --runs, sympy's cache cleared
before each), and the whole typeset
exam (tests/written/exam_answers_typeset.yaml) read and graded, as `grade` and the preview do.

    .venv/bin/python bench/math_answers.py [--runs 5]

Targets (issue 42): a hostile input is refused within 1 s of CPU (the tests' bound); a normal
answer reads in milliseconds. Exits 1 if a hostile input is over 1 s.
"""

import argparse
import statistics
import sys
import time

from sympy.core.cache import clear_cache
from benchlib import REPO

sys.path[:0] = [str(REPO / "tests")]
from test_written_reading import AMBIGUOUS, COMPLEXITIES, CORPUS, EXAM_KEY, HOSTILE, NAMES, TYPESET  # noqa: E402

from graders.written.answerfile import read_answers  # noqa: E402
from graders.written.answers import grade_answers  # noqa: E402
from graders.written.expressions import ExpressionError, read_expression  # noqa: E402
from graders.written.preview import preview  # noqa: E402
from graders.written.key import key_forms  # noqa: E402


def cpu(work, runs: int) -> float:
    times = []
    for _ in range(runs):
        clear_cache()  # sympy's cache would make every run after the first a lookup
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return statistics.median(times)


def attempt(text: str, names) -> None:
    try:
        read_expression(text, names, aliases=True)
    except ExpressionError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    groups = {
        "corpus": [(t, n) for t, n, _ in CORPUS] + [(t, NAMES) for t, _ in COMPLEXITIES],
        "two readings": [(t, n) for t, n, _ in AMBIGUOUS],
        "hostile": [(t, ("n", "d", "h")) for t, _ in HOSTILE],
    }
    over = 0
    for name, cases in groups.items():
        costs = sorted((cpu(lambda t=t, n=n: attempt(t, n), runs), t) for t, n in cases)
        worst, text = costs[-1]
        print(f"{name:13} {len(cases):3} inputs: median {statistics.median(c for c, _ in costs) * 1e3:7.2f} ms, "
              f"max {worst * 1e3:7.2f} ms ({text[:40]!r})")
        over += name == "hostile" and worst > 1.0
    data = TYPESET.read_bytes()
    forms = key_forms(EXAM_KEY)
    print(f"typeset exam: preview {cpu(lambda: preview(forms, read_answers(data)), runs) * 1e3:.0f} ms, "
          f"grade of its 22 answers {cpu(lambda: grade_answers(EXAM_KEY, read_answers(data)), runs) * 1e3:.0f} ms")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
