"""Math answers as students write them: a corpus of LaTeX, Unicode, implicit-product, alias and
O(...) spellings, each with the reading the grader must give it; the forms with two readings,
refused naming both; hostile input refused with a clear message in bounded time; and the preview
(`grade check-answers`, the templates' `make selfcheck`) as students run it."""

import ast
import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import sympy as sp

from conftest import GRADE, REPO
from graders.written import template
from graders.written.answerfile import read_answers
from graders.written.answers import answer_warnings, grade_answers
from graders.written.expressions import ExpressionError, parse_expression, read_expression
from graders.written.key import key_forms, load_key
from graders.written.reading import read_answer

EXAM = REPO / "assignment" / "transformer_exam"
EXAM_KEY = load_key(EXAM / "key.yaml")
TYPESET = REPO / "tests" / "written" / "exam_answers_typeset.yaml"
NAMES = ["n", "m", "d", "h", "d_k", "d_v", "d_model", "pos", "i"]

# (as written, the names the part defines, the reading the grader must show)
CORPUS = [
    # LaTeX
    (r"\frac{512}{8}", (), "512/8"),
    (r"$\frac{512}{8}$", (), "512/8"),
    (r"\dfrac{d_{model}}{h}", NAMES, "d_model/h"),
    (r"\sqrt{d_k}", NAMES, "sqrt(d_k)"),
    (r"\sqrt[3]{n}", NAMES, "n**(1/3)"),
    (r"2\sqrt{d_k}", NAMES, "2*sqrt(d_k)"),
    (r"n \cdot d", NAMES, "n*d"),
    (r"4 \times 512^2", (), "4*512**2"),
    (r"n^{2} d", NAMES, "n**2*d"),
    (r"d_{k}", NAMES, "d_k"),
    (r"d_{\text{model}}", NAMES, "d_model"),
    (r"\left(n+1\right)^{2}", NAMES, "(n+1)**2"),
    (r"\log n", NAMES, "log(n)"),
    (r"n \log n", NAMES, "n*log(n)"),
    (r"\log_2 n", NAMES, "log(n)/log(2)"),
    (r"\exp(-d)", NAMES, "exp(-d)"),
    (r"\pi d", NAMES, "pi*d"),
    (r"$$n^2 d$$", NAMES, "n**2*d"),
    (r"\(d_k\)", NAMES, "d_k"),
    (r"\sin\left(\frac{pos}{10000^{2i/d}}\right)", NAMES, "sin(pos/10000**(2*i/d))"),
    (r"1{,}048{,}576", (), "1048576"),
    (r"1\,048\,576", (), "1048576"),
    (r"e^{-d}", NAMES, "E**(-d)"),
    (r"\frac{1}{2}n", NAMES, "(1/2)*n"),
    (r"\frac{d_k}{\sqrt{d_k}^2}", NAMES, "d_k/sqrt(d_k)**2"),
    # Unicode
    ("n²d", NAMES, "n**2*d"),
    ("h·n²·(d/h)", NAMES, "h*n**2*(d/h)"),
    ("4 × 512²", (), "4*512**2"),
    ("√d_k", NAMES, "sqrt(d_k)"),
    ("2√d_k", NAMES, "2*sqrt(d_k)"),
    ("n − m", NAMES, "n-m"),
    ("d ÷ h", NAMES, "d/h"),
    ("πd", NAMES, "pi*d"),
    ("n⁻¹", NAMES, "n**(-1)"),
    ("dₖ", NAMES, "d_k"),
    ("∛n", NAMES, "n**(1/3)"),
    ("1\u2009048\u2009576", (), "1048576"),
    ("(d/h)²", NAMES, "(d/h)**2"),
    ("√n^2", NAMES, "sqrt(n**2)"),
    ("½n²", NAMES, "(1/2)*n**2"),
    # implicit multiplication where it has one reading
    ("2n", NAMES, "2*n"),
    ("n^2 d", NAMES, "n**2*d"),
    ("2 sqrt(d_k)", NAMES, "2*sqrt(d_k)"),
    ("(n+1)(n+2)", NAMES, "(n+1)*(n+2)"),
    ("h n^2 (d/h)", NAMES, "h*n**2*(d/h)"),
    ("2(n+1)", NAMES, "2*(n+1)"),
    ("n(n+1)/2", NAMES, "n*(n+1)/2"),
    ("-2n", NAMES, "-2*n"),
    ("3n^2 d", NAMES, "3*n**2*d"),
    ("2n/3", NAMES, "2*n/3"),
    # other spellings of the part's names
    ("dk", NAMES, "d_k"),
    ("dmodel/h", NAMES, "d_model/h"),
    ("nd", ("n", "d"), "n*d"),
    ("hn", ("n", "d", "h"), "h*n"),
    # today's syntax, unchanged
    ("n**2*d", NAMES, "n**2*d"),
    ("1,048,576", (), "1048576"),
    ("2^20", (), "2**20"),
    ("a/-b*c", ("a", "b", "c"), "a/(-b)*c"),
    (".5", (), "0.5"),
    ("010", (), "010"),
]
COMPLEXITIES = [
    ("O(n^2 d)", "O(n**2*d)"),
    (r"\mathcal{O}(n^2 \cdot d)", "O(n**2*d)"),
    (r"\Theta(n^2 d)", "Theta(n**2*d)"),
    ("O(n²d)", "O(n**2*d)"),
    ("Θ(n² d)", "Theta(n**2*d)"),
    (r"$\mathcal O(n^{2}d)$", "O(n**2*d)"),
]


def _bare(reading: str) -> str:
    return re.sub(r"^(O|Theta)\((.*)\)$", r"\2", reading)


@pytest.mark.parametrize("text, names, reading", CORPUS + [(t, NAMES, r) for t, r in COMPLEXITIES])
def test_each_spelling_has_its_reading_and_the_reading_reads_back_the_same(text, names, reading):
    got = read_expression(text, names, aliases=True)
    assert got.shown == reading
    # The reading is itself the grader's plain syntax, and denotes the same expression.
    again = parse_expression(_bare(reading), names)
    assert sp.simplify(again - got.expr) == 0


def test_the_corpus_has_at_least_40_spellings_of_each_form():
    assert len(CORPUS) + len(COMPLEXITIES) >= 40
    assert sum("\\" in t or "$" in t for t, _, _ in CORPUS) >= 20
    assert sum(any(ord(c) > 127 for c in t) for t, _, _ in CORPUS) >= 12


def test_an_alias_is_named_and_an_exact_name_is_not():
    assert read_expression("dk", NAMES, aliases=True).aliases == (("dk", "d_k"),)
    assert read_expression("d_{k}", NAMES, aliases=True).aliases == ()
    with pytest.raises(ExpressionError, match="uses the name 'dk', which this question does not define"):
        read_expression("dk", NAMES)  # a key's expression: its names exactly


# (as written, the names, the two readings the message must name)
AMBIGUOUS = [
    ("1/2n", NAMES, ("(1/2)*n", "1/(2*n)")),
    ("1/2 n", NAMES, ("(1/2)*n", "1/(2*n)")),
    ("d/h n", NAMES, ("(d/h)*n", "d/(h*n)")),
    (r"1/2 \sqrt{d}", NAMES, ("(1/2)*sqrt(d)", "1/(2*sqrt(d))")),
    ("n^2d", NAMES, ("n**(2*d)", "n**2*d")),
    ("e^2d", NAMES, ("E**(2*d)", "E**2*d")),
    ("√2n", NAMES, ("sqrt(2*n)", "sqrt(2)*n")),
    (r"\log n d", NAMES, ("log(n*d)", "log(n)*d")),
    (r"\log n^2", NAMES, ("log(n**2)", "log(n)**2")),
    ("2 512", (), ("2512", "2*512")),
    ("3½", (), ("3+1/2", "3*(1/2)")),
    ("dk", ("d", "k", "d_k"), ("d_k", "d*k")),
]


@pytest.mark.parametrize("text, names, readings", AMBIGUOUS)
def test_a_form_with_two_readings_is_refused_naming_both(text, names, readings):
    with pytest.raises(ExpressionError, match="is ambiguous") as refused:
        read_expression(text, names, aliases=True)
    message = str(refused.value)
    assert f"{readings[0]} or {readings[1]}" in message, message
    first, second = (parse_expression(r, names) for r in readings)
    assert sp.simplify(first - second) != 0  # really two different answers


HOSTILE = [
    ("(" * 40 + "n" + ")" * 40, "is nested more than 30 levels deep"),
    ("(" * 200 + "n" + ")" * 200, "has more than 200 parts"),
    ("{" * 40 + "n" + "}" * 40, "is nested more than 30 levels deep"),
    (r"\left(" * 35 + "n" + r"\right)" * 35, "is nested more than 30 levels deep"),
    (r"\left(" * 60 + "n" + r"\right)" * 60, "is longer than 500 characters"),
    (r"\sqrt{" * 40 + "n" + "}" * 40, "is nested more than 30 levels deep"),
    ("√" * 100 + "n", "is nested more than 30 levels deep"),
    ("2^" * 60 + "2", "is nested more than 30 levels deep"),
    ("-" * 300 + "n", "has more than 200 parts"),
    ("10^10^10", "has an exponent beyond the ±64 accepted (10000000000)"),
    ("9^9^9^9", "has an exponent beyond the ±64 accepted (387420489)"),
    ("2^{2^{2^{2^{2}}}}", "has an exponent beyond the ±64 accepted (65536)"),
    ("10^{10^{10}}", "has an exponent beyond the ±64 accepted"),
    ("(10^15)^(64)^(64)", "has an exponent beyond the ±64 accepted"),
    ("e^{e^{e^{e^{e^{n}}}}}", None),  # accepted as written: it has no value at the probes, never computed
    (r"\frac{1}{0}", "is not finite (a division by zero?)"),
    ("1e999999", "beyond 10^15"),
    ("1e-99999", "too small to work with"),
    ("9" * 400, "a 400-digit number beyond 10^15"),
    ("n" * 10_000, "is longer than 500 characters"),
    ("n" * 499, "has more than 200 parts"),
    ("q" * 499, "uses the name 'qqqqqqqqqqqqqqqqqqqqqqqqqqqqqq…'"),
    ("d\u202ek", "uses the character '\\u202e'"),
    ("６４", "uses the character '６'"),
    ("٦٤", "uses the character '٦'"),
    ("n\x00", "contains the control character '\\x00'"),
    ("\x1b[31mn", "contains the control character '\\x1b'"),
    ("__import__('os').system('touch PWNED')", "contains text in quotes"),
    ("eval(d_k)", "calls eval(), which is not one of the functions allowed"),
    ("getattr(n, m)", "several values separated by commas"),
    ("n.__class__", "uses attribute access (a.b)"),
    (r"\input{/etc/passwd}", "uses \\input, which is not part of the LaTeX accepted"),
    (r"\def\x{1}", "uses \\def, which is not part of the LaTeX accepted"),
    ("$n$ + $m$", "has a $ inside it"),
    ("0x40", "writes a number in hexadecimal, octal or binary"),
    ("1_048_576", "groups digits with _"),
    ("d_k = 64", "has an = in it: give the value alone"),
    ("n!", "uses ! (a factorial?)"),
    ("|n|", "uses | (an absolute value?)"),
    ("∞", "uses infinity"),
    ("O(n) + O(d)", "has O(...) inside it"),
    ("2 O(n)", "has O(...) inside it"),
    ("Ω(n^2 d)", "a lower bound"),
    ("(n", "has a ( without its closing )"),
    ("n)", "has a ) without an opening bracket"),
    (r"\left(n\right]", "closes \\left( with \\right]"),
    ("n +", "is incomplete: it ends where a value belongs (after +)"),
    ("()", "has empty brackets ()"),
    (r"\frac12", "without its two {...}"),
    ("d_", "has a _ with no subscript after it"),
]


@pytest.mark.parametrize("text, message", HOSTILE)
def test_hostile_input_is_refused_with_a_clear_message_in_bounded_time(text, message):
    form = next(f for f in key_forms(EXAM_KEY) if f.label == "2a.cost")  # a complexity part: n, d, h
    answer = read_answers(f"2a:\n  cost: {json.dumps(text)}\n".encode()).entries["2a"]["cost"]
    started = time.process_time()  # CPU time: a busy machine does not make it fail
    if message is None:
        read_answer(form, answer)
        result = grade_answers(EXAM_KEY, read_answers(f"2a:\n  cost: {json.dumps(text)}\n".encode()))
        assert result["q2a_cost"].status == "failed" and "is not the key's complexity" in result["q2a_cost"].message
    else:
        with pytest.raises(ExpressionError) as refused:
            read_answer(form, answer)
        assert message in str(refused.value), str(refused.value)
        assert len(str(refused.value)) < 300
    assert time.process_time() - started < 1
    assert not (Path.cwd() / "PWNED").exists()


# (the YAML as written, what the grader reads or why it refuses it)
YAML_TRICKS = [
    ("2a:\n  d_k: 010\n", "010 = 10"),  # YAML 1.1 reads 8 (octal): the text as written is read
    ("2a:\n  d_k: 0x40\n", "hexadecimal"),  # YAML reads 64
    ("2a:\n  d_k: 1:04\n", "uses the character ':'"),  # YAML reads 64 (sexagesimal)
    ("2a:\n  d_k: 64_0\n", "groups digits with _"),
    ("2a:\n  d_k: yes\n", "is a yes/no value, not a number"),
    ("2a:\n  d_k: .inf\n", "is not a finite number"),
    ("2a:\n  d_k: \"\\frac{512}{8}\"\n", "is in double quotes, where YAML reads"),
    ("2b:\n  total: \"4 \\times 512^2\"\n", "is in double quotes, where YAML reads"),
    ("2b:\n  total: '4 \\times 512^2'\n", "4*512**2 = 1048576"),
    ("2b:\n  total: \"4 \\\\times 512^2\"\n", "4*512**2 = 1048576"),
    ("2a:\n  d_k: |\n    \\frac{512}\n    {8}\n", "512/8 = 64"),
    ("2a:\n  d_k: 6.4e1\n", "6.4e1 = 64"),
    ("2a:\n  d_k: [64]\n", "a list is not an answer"),
    ("2a:\n  d_k: {a: 1}\n", "a mapping is not an answer"),
    ("2a:\n  d_k: 2001-12-14\n", "is date data, not a number"),
    ("2a:\n  d_k: " + "9" * 200 + "\n", "too long to read"),
]


@pytest.mark.parametrize("text, said", YAML_TRICKS)
def test_yaml_tricks_are_read_as_written_or_refused(text, said):
    started = time.process_time()
    lines, _ = _preview(text)
    assert time.process_time() - started < 1
    assert said in "\n".join(lines), lines


def _preview(text: str) -> tuple[list[str], int]:
    from graders.written.preview import preview

    return preview(key_forms(EXAM_KEY), read_answers(text.encode()), "exam.py")


# -- the issue's table: each of these is right -------------------------------------------------------
@pytest.mark.parametrize("question, part, text", [
    ("2a", "d_k", r"\frac{512}{8}"),
    ("2a", "cost", "n²d"),
    ("2a", "cost", "O(n^2 d)"),
    ("2a", "cost", "h·n²·(d/h)"),
    ("2a", "cost", "O(2 n^2 d)"),  # a complexity: up to a constant
    ("2b", "total", r"4 \times 512^2"),
    ("1b", "variance", "d_{k}"),
    ("1b", "variance", "dk"),
    ("1b", "std", "√d_k"),
    ("2b", "total", "1,048,576"),
    ("2b", "per_projection", "262144"),
    ("5a", "memory", r"\Theta(n^{2})"),
])
def test_the_issues_spellings_get_their_points(question, part, text):
    results = grade_answers(EXAM_KEY, read_answers(f"{question}:\n  {part}: '{text}'\n".encode()))
    result = results[f"q{question}_{part}".lower()]
    assert result.status == "passed", result.message


@pytest.mark.parametrize("text, words", [
    ("O(n d)", "is not the key's complexity"),
    ("O(n^2 d + n)", "is not the key's complexity"),  # lower-order terms are not dropped: a limit, documented
    ("0", "is not the key's complexity"),
    ("Ω(n^2 d)", "a lower bound"),
])
def test_a_wrong_complexity_fails(text, words):
    result = grade_answers(EXAM_KEY, read_answers(f"2a:\n  cost: '{text}'\n".encode()))["q2a_cost"]
    assert result.status == "failed" and words in result.message, result.message


def test_o_notation_on_an_exact_part_is_refused_not_guessed():
    result = grade_answers(EXAM_KEY, read_answers(b"1b:\n  variance: O(d_k)\n"))["q1b_variance"]
    assert result.status == "failed"
    assert "is written as a complexity, O(...), but this part asks for an exact answer" in result.message


# -- the preview -----------------------------------------------------------------------------------
def _check_answers(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GRADE, "check-answers", str(path), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_check_answers_shows_each_reading_of_the_typeset_exam(tmp_path):
    p = _check_answers(TYPESET, "--assignment", "transformer_exam")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    for expected in ["  2a.cost: O(n**2*d)", "  2a.d_k: 512/8 = 64", "  2b.total: 4*512**2 = 1048576",
                     "  1b.variance: d_k (dk read as d_k)", "  5a.scores_time: n**2*d", "  1a.output_cols: d_v",
                     "  3a.pe_even: sin(pos/10000**(2*i/d))", "  5a.softmax_v_time: Theta(n**2*d)",
                     "  1c: answered by attention() in exam.py, which the grader runs (not checked here)",
                     "  3b: free text, graded by hand (277 characters)", "22 of 22 answers read, 0 cannot be read, 0 missing"]:
        assert expected in lines, p.stdout
    labels = [line.split(":")[0].strip() for line in lines[1:-1]]
    forms = key_forms(EXAM_KEY)
    assert set(labels) == {f.label if f.kind != "code" else f.question for f in forms}


def test_the_preview_never_says_whether_an_answer_is_right(tmp_path):
    right, wrong = tmp_path / "right.yaml", tmp_path / "wrong.yaml"
    right.write_text("2a:\n  d_k: 64\n  cost: n^2 d\n")
    wrong.write_text("2a:\n  d_k: 65\n  cost: n^3 d\n")
    said = [_check_answers(p, "--assignment", "transformer_exam") for p in (right, wrong)]
    assert [p.returncode for p in said] == [0, 0]
    assert "2a.d_k: 65" in said[1].stdout and "2a.cost: n**3*d" in said[1].stdout
    strip = [re.sub(r"\d|\*\*", "", p.stdout).replace("right", "wrong") for p in said]
    assert strip[0] == strip[1]  # the same lines, but for the values
    for word in ("correct", "equivalent", "matches", "key", "points", "✓", "✗"):
        assert word not in said[1].stdout.replace("this says nothing of whether an answer is right", "")


def test_the_preview_names_what_it_cannot_read_and_exits_1(tmp_path):
    path = tmp_path / "answers.yaml"
    path.write_text("2a:\n  d_k: 1/2n\n  cost: n^2d\n2b: 5\n9z: 1\n")
    p = _check_answers(path, "--assignment", "transformer_exam")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "2a.d_k: CANNOT BE READ (line 2): 1/2n uses the name 'n', but this answer is a number" in p.stdout
    assert ("2a.cost: CANNOT BE READ (line 3): n^2d is ambiguous: it could be n**(2*d) or n**2*d" in p.stdout)
    assert "2b.total: CANNOT BE READ (line 4): question 2b has parts per_projection, three, output, total" in p.stdout
    assert "warning: answers.yaml line 5: '9z' is not a question of this assignment" in p.stdout
    assert "0 of 22 answers read, 6 cannot be read, 16 missing" in p.stdout


@pytest.mark.parametrize("text, words", [
    ("a: &x 1\nb: *x\n", "YAML anchors (&x) are not accepted"),
    ("1a: [\n", "not valid YAML"),
])
def test_a_file_that_cannot_be_read_exits_2_without_a_traceback(tmp_path, text, words):
    path = tmp_path / "answers.yaml"
    path.write_text(text)
    p = _check_answers(path, "--assignment", "transformer_exam")
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = _check_answers(path, "--assignment", "a3")
    assert p.returncode == 2 and "a3 has no answer key" in p.stderr


# -- the templates' make selfcheck -----------------------------------------------------------------
@pytest.mark.parametrize("assignment", ["written", "transformer_exam"])
def test_the_templates_files_are_generated_from_the_key(assignment):
    folder = REPO / "assignment" / assignment
    spec = tomllib.loads((folder / "spec.toml").read_text())
    key = load_key(folder / "key.yaml")
    code_file = next((f for f in spec["required_files"] if f.endswith(".py")), None)
    for name, text in template.template_files(key, code_file).items():
        assert (folder / "template" / name).read_text() == text, f"regenerate: python -m graders.written.template {assignment}"
    parts = json.loads((folder / "template" / "parts.json").read_text())["parts"]
    fields = {"question", "part", "label", "kind", "symbols", "complexity", "siblings", "function"}
    assert all(set(p) == fields for p in parts)  # what a part asks for, never its answer
    numbers = [str(p.number) for q in key.questions for p in q.parts if p.number is not None and p.number > 9]
    assert numbers and not any(n in json.dumps(parts) for n in numbers)


def test_the_templates_pins_are_the_graders():
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert set(template.REQUIREMENTS.split()) <= set(pins)


def test_what_make_selfcheck_runs_needs_nothing_of_the_grader_but_itself():
    """Its modules import each other, the standard library, sympy, mpmath and PyYAML only."""
    allowed = {"sympy", "mpmath", "yaml"} | set(sys.stdlib_module_names)
    shipped = {f"graders.written.{name.removesuffix('.py')}" for name in template.SHIPPED}
    for name in template.SHIPPED:
        tree = ast.parse((REPO / "graders" / "written" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [f"{node.module}.{a.name}" if node.module == "graders.written" else node.module or ""
                           for a in node.names]
            else:
                continue
            for module in modules:
                assert module in shipped or module.split(".")[0] in allowed, f"{name} imports {module}"
        assert not re.search(r"\b(sympify|parse_expr|lambdify|eval|exec)\s*\(", (REPO / "graders" / "written" / name)
                             .read_text()), name


def test_make_selfcheck_in_the_exported_template_reads_as_the_grader_does(tmp_path):
    out = tmp_path / "exam"
    subprocess.run([sys.executable, "-m", "graders.written.template", "transformer_exam", "--export", str(out)],
                   cwd=REPO, check=True, capture_output=True, timeout=120)
    (out / "answers.yaml").write_text(TYPESET.read_text())
    where = subprocess.run([sys.executable, "-c", "import graders.written.preview as p; print(p.__file__)"],
                           cwd=out, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(out)  # the shipped copy, not the grader's
    made = subprocess.run(["make", "-s", "selfcheck", f"PYTHON={sys.executable}"], cwd=out, capture_output=True,
                          text=True, timeout=120)
    graded = _check_answers(out / "answers.yaml", "--assignment", "transformer_exam")
    assert made.returncode == graded.returncode == 0, made.stdout + made.stderr
    assert made.stdout == graded.stdout
    (out / "answers.yaml").write_text("2a:\n  cost: 1/2n\n")
    made = subprocess.run(["make", "-s", "selfcheck", f"PYTHON={sys.executable}"], cwd=out, capture_output=True,
                          text=True, timeout=120)
    assert made.returncode != 0 and "is ambiguous: it could be (1/2)*n or 1/(2*n)" in made.stdout


def test_the_written_templates_selfcheck_runs_in_place():
    folder = REPO / "assignment" / "written" / "template"
    made = subprocess.run(["make", "-s", "selfcheck", f"PYTHON={sys.executable}"], cwd=folder, capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "0 of 6 answers read, 0 cannot be read, 6 missing" in made.stdout


def test_alias_warnings_go_with_the_grade():
    answers = read_answers(TYPESET.read_bytes(), "answers.yaml")
    assert answer_warnings(EXAM_KEY, answers) == [
        "1b.variance (answers.yaml line 13): 'dk' was read as d_k, the name this part uses; write d_k"]
