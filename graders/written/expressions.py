"""Student expression strings to sympy without ever evaluating them, and when two are the same.

`sympify` and `parse_expr` run `eval` on their input, so student text never reaches them: the text
is read by our own parser (mathlex, mathparse: the plain syntax, a LaTeX subset, Unicode math,
implicit multiplication), and the sympy object is built here node by node. Every bound below
exists so that a hostile string of 500 characters cannot make the trusted process hang or run out
of memory: sympy computes numbers and powers exactly, so "(9**9)**(9**9)" would otherwise be an
integer of 3 billion digits.

Error messages are student-facing predicates ("uses the name 'dk', which ..."): the caller puts the
answer in front of them.
"""

import random
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import mpmath
import sympy as sp

from graders.written import mathparse as mp
from graders.written.mathparse import ReadError

MAX_LENGTH = 500
MAX_LITERAL = 10**15
MAX_EXPONENT = 64
# |log2| of any number built while parsing (about 3000 digits): past it, an operation would be a
# bigint computation out of proportion with any answer, however it was reached.
MAX_BITS = 10_000
MAX_SCIENTIFIC = 300  # 1e-300 is still a number; 1e-5000 would be 16,600 bits before any bound saw it

# A root of a larger number costs sympy a factorisation when it is multiplied: 5 s measured for
# (987654321098767^64+1)^(1/3) * (987654321098767^64+3)^(-1/5); 12 roots of 64-bit numbers, 0.07 s.
MAX_ROOT_BITS = 64


class ExpressionError(ValueError):
    """The text is not an expression we accept; the message says why, for the student."""


def symbol(name: str) -> sp.Symbol:
    # Every name in these questions is a dimension or a count: positive, so sqrt(d_k**2) is d_k,
    # and the numeric probes below draw positive values.
    return sp.Symbol(name, positive=True)


def _names(allowed: Iterable[str]) -> str:
    return ", ".join(sorted(allowed))


def _short(number: sp.Expr) -> str:
    text = str(number)
    return text if len(text) <= 20 else f"a {len(text.lstrip('-'))}-digit number"


def _bits(expr: sp.Expr) -> int:
    return max((max(abs(r.p).bit_length(), r.q.bit_length()) for r in expr.atoms(sp.Rational)), default=0)


def _bounded(expr: sp.Expr) -> sp.Expr:
    if _bits(expr) > MAX_BITS:
        raise ExpressionError("makes a number too large to work with")
    for power in expr.atoms(sp.Pow):  # sympy merges (x**64)**64 into x**4096
        if power.exp.is_Number and abs(power.exp) > MAX_EXPONENT:
            raise ExpressionError(f"has an exponent beyond the ±{MAX_EXPONENT} accepted ({_short(power.exp)})")
        if not power.exp.is_Integer and power.base.is_Rational and _bits(power.base) > MAX_ROOT_BITS:
            raise ExpressionError(f"takes a root of a number beyond 2^{MAX_ROOT_BITS}")
    return expr


def _exp(argument: sp.Expr) -> sp.Expr:
    # sympy turns exp(c*log(3)) into 3**c and computes it: exp(10^12*log(3)) never returns.
    if argument.has(sp.log):
        raise ExpressionError("takes exp of an expression with log in it, which is not accepted")
    return sp.exp(argument)


def _power(base: sp.Expr, exponent: sp.Expr) -> sp.Expr:
    if base is sp.E:
        return _exp(exponent)
    if exponent.has(sp.log):
        raise ExpressionError("has log in an exponent, which is not accepted")
    if exponent.is_Number:
        if abs(exponent) > MAX_EXPONENT:
            raise ExpressionError(f"has an exponent beyond the ±{MAX_EXPONENT} accepted ({_short(exponent)})")
        # Checked before sympy works out the exact power or root: after would be too late.
        if abs(float(exponent)) * _bits(base) > MAX_BITS:
            raise ExpressionError("makes a number too large to work with")
        if not exponent.is_Integer and _bits(base) > MAX_ROOT_BITS:
            raise ExpressionError(f"takes a root of a number beyond 2^{MAX_ROOT_BITS}")
    return base**exponent


FUNCTIONS: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "sqrt": lambda x: _power(x, sp.Rational(1, 2)),
    "exp": _exp,
    "log": sp.log,
    "sin": sp.sin,
    "cos": sp.cos,
    "tan": sp.tan,
}
assert set(FUNCTIONS) == set(mp.FUNCTIONS)
CONSTANTS: dict[str, sp.Expr] = {"pi": sp.pi, "E": sp.E}
# No symbol may be one of these: it would be read as the function, the constant or the O of a complexity.
RESERVED = frozenset(FUNCTIONS) | frozenset(CONSTANTS) | frozenset(mp.BOUNDS) | {"ln"}
_ARITHMETIC = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
}


def _number(text: str) -> sp.Expr:
    """A literal exactly as written: 0.5 is 1/2, so 0.5*2*d_k is exactly d_k."""
    mantissa, _, scale = text.partition("e")
    if scale and int(scale) > MAX_SCIENTIFIC:
        raise ExpressionError(f"contains the number {text} beyond 10^15 (write it as a power, e.g. 2^60)")
    if scale and int(scale) < -MAX_SCIENTIFIC:
        raise ExpressionError(f"contains the number {text}, too small to work with (10^-{MAX_SCIENTIFIC} at least)")
    value = sp.Rational(mantissa) * sp.Integer(10) ** int(scale or 0)
    if abs(value) > MAX_LITERAL:
        shown = f"the number {float(value):.6g}" if len(mantissa) < 300 else f"a {len(mantissa)}-digit number"
        raise ExpressionError(f"contains {shown} beyond 10^15 (write it as a power, e.g. 2^60)")
    return value


def _build(node: mp.Node, names: dict[str, sp.Symbol]) -> sp.Expr:
    """The sympy expression of a tree, every step bounded. The parser bounds the tree's depth."""
    if isinstance(node, mp.Num):
        return _number(node.text)
    if isinstance(node, mp.Sym):
        return names[node.name]
    if isinstance(node, mp.Const):
        return CONSTANTS[node.name]
    if isinstance(node, mp.Neg):
        return _bounded(-_build(node.operand, names))
    if isinstance(node, mp.Chain):
        value = _build(node.operands[0], names)
        for op, operand in zip(node.ops[1:], node.operands[1:], strict=True):
            value = _bounded(_ARITHMETIC[op](value, _build(operand, names)))
        return value
    if isinstance(node, mp.Pow):
        return _bounded(_power(_build(node.base, names), _build(node.exponent, names)))
    if isinstance(node, mp.Call):
        value = _bounded(FUNCTIONS[node.function](_build(node.argument, names)))
        return value if node.log_base is None else _bounded(value / sp.log(_build(node.log_base, names)))
    if isinstance(node, mp.Root):
        index = _build(node.index, names)
        if index == 0:
            raise ExpressionError("takes a 0th root")
        return _bounded(_power(_build(node.argument, names), 1 / index))
    return _build(node.inner, names)  # a Bound: its caller knows it is a complexity


@dataclass(frozen=True)
class Reading:
    """How the grader reads an answer: the sympy expression, the same as text in the grader's plain
    syntax ("n**2*d", shown to the student), the aliases it used (dk for d_k) and O or Theta when it
    was written as a complexity."""

    expr: sp.Expr
    shown: str
    aliases: tuple[tuple[str, str], ...] = ()
    bound: str | None = None


def read_expression(text: str, symbols: Sequence[str] = (), aliases: bool = False) -> Reading:
    """How `text` reads with only the names in `symbols` (positive reals), pi and E, + - * / ^,
    the functions in FUNCTIONS and O(...) around it; with `aliases`, other spellings of the names
    too (dk for d_k, hn for h*n: a student's answer, not a key's). Raises ExpressionError."""
    if not isinstance(text, str):
        raise ExpressionError("is not text")
    text = text.strip()
    if not text:
        raise ExpressionError("is empty")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"is longer than {MAX_LENGTH} characters")
    try:
        parsed = mp.parse(text, symbols, aliases)
    except ReadError as e:
        raise ExpressionError(str(e)) from None
    expr = _build(parsed.tree, {name: symbol(name) for name in symbols})
    if expr.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
        raise ExpressionError("is not finite (a division by zero?)")
    bound = parsed.tree.kind if isinstance(parsed.tree, mp.Bound) else None
    return Reading(expr, mp.render(parsed.tree), parsed.aliases, bound)


def parse_expression(text: str, symbols: Sequence[str] = ()) -> sp.Expr:
    """The sympy expression `text` denotes, the names exactly as in `symbols` (a key's expression,
    a claim's value): no alias and no O(...). Raises ExpressionError."""
    reading = read_expression(text, symbols)
    if reading.bound is not None:
        raise ExpressionError(f"is written as a complexity, {reading.bound}(...): give the expression alone")
    return reading.expr


# -- numbers ----------------------------------------------------------------------------------
_MP = mpmath.MPContext()
_MP.dps = 60  # digits: far past the 1e-9 compared, so rounding never decides an answer
_MAX_MAGNITUDE = 20_000  # bits of any intermediate value in a numeric evaluation


class _Unevaluable(Exception):
    """No finite value at this point (a pole, a log of 0, or a magnitude beyond the cap)."""


def _finite(value):
    if not _MP.isfinite(value) or _MP.mag(value) > _MAX_MAGNITUDE:
        raise _Unevaluable
    return value


def _mp_pow(base, exponent):
    if base == 0:
        if _MP.re(exponent) > 0:
            return _MP.mpf(0)
        raise _Unevaluable
    if abs(exponent) * abs(_MP.log(abs(base), 2)) > _MAX_MAGNITUDE:
        raise _Unevaluable
    return _MP.power(base, exponent)


def _mp_exp(x):
    if _MP.re(x) > _MAX_MAGNITUDE * 0.69:  # ln 2: e**x would pass the magnitude cap
        raise _Unevaluable
    return _MP.exp(x)


def _mp_log(x):
    if x == 0:
        raise _Unevaluable
    return _MP.log(x)


_CALLS = {sp.exp: _mp_exp, sp.log: _mp_log, sp.sin: _MP.sin, sp.cos: _MP.cos, sp.tan: _MP.tan}


def _value(expr: sp.Expr, point: dict[sp.Symbol, object]):
    """`expr` at `point`, by our own walk (never lambdify, which evals generated code), with
    every intermediate value checked: a tower like exp(exp(exp(d_k))) stops, it does not hang."""
    if expr.is_Symbol:
        if expr not in point:
            raise _Unevaluable
        return point[expr]
    if expr.is_Rational:
        return _MP.mpf(expr.p) / expr.q
    if expr is sp.pi:
        return +_MP.pi
    if expr is sp.E:
        return +_MP.e
    if expr is sp.I:
        return _MP.mpc(0, 1)
    args = [_value(a, point) for a in expr.args]
    if expr.is_Add:
        return _finite(_MP.fsum(args))
    if expr.is_Mul:
        return _finite(_MP.fprod(args))
    if expr.is_Pow:
        return _finite(_mp_pow(*args))
    call = _CALLS.get(type(expr))
    if call is None or len(args) != 1:
        raise _Unevaluable  # nothing we build produces another kind of node
    return _finite(call(args[0]))


def number_value(expr: sp.Expr) -> float:
    """The real number a constant expression denotes (±inf past a float's range)."""
    if expr.free_symbols:
        raise ExpressionError(f"uses names ({_names(str(s) for s in expr.free_symbols)}): give a number")
    try:
        value = _value(expr, {})
    except _Unevaluable:
        raise ExpressionError("has no finite value") from None
    if abs(_MP.im(value)) > 1e-30 * max(1, abs(value)):
        raise ExpressionError("is not a real number")
    return float(_MP.re(value))


# -- equivalence ------------------------------------------------------------------------------
PROBES = 8
MIN_PROBES = 4  # points where the key's expression has a value: fewer, and nothing is decided
REL_TOL = 1e-9
SIMPLIFY_BUDGET_S = 1.0

_T = TypeVar("_T")


class _OutOfTime(BaseException):  # a BaseException: sympy's own `except Exception` must not swallow it
    pass


def _within(seconds: float, work: Callable[[], _T]) -> _T | None:
    """work() if it finishes within `seconds`, else None. simplify() is pure Python with no bound
    of its own (13 s measured for (d_k+h+1)**64 - (d_k+h+2)**64), so a timer interrupts it. Only
    the main thread gets signals, and a timer already set belongs to someone else: then None."""
    if threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0]:
        return None
    armed = True

    def interrupt(signum, frame):
        if armed:
            raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, interrupt)
    # It repeats: should sympy catch one with a bare `except:`, the next one ends it.
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        result = work()
        armed = False
        return result
    except _OutOfTime:
        return None
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def probe_points(symbols: Sequence[sp.Symbol]) -> list[dict[sp.Symbol, object]]:
    """PROBES deterministic points, one value per symbol (by name), each a fraction k/997 in
    (1, 9): positive (the names are sizes), never an integer (sin(pi*d_k) vanishes on integers,
    so an integer probe would pass d_k + sin(pi*d_k) for d_k), all values in a point different
    (d_k/h would equal 1 wherever d_k = h), and the same for the key and every student."""
    rng = random.Random(20240607)
    ordered = sorted(symbols, key=str)
    points = []
    for _ in range(PROBES):
        numerators: list[int] = []
        while len(numerators) < len(ordered):
            k = rng.randint(998, 8972)
            if k % 997 and k not in numerators:
                numerators.append(k)
        points.append({s: _MP.mpf(k) / 997 for s, k in zip(ordered, numerators, strict=True)})
    return points


def _close(a, b) -> bool:
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b)) + _MP.mpf(10) ** -40


def _probe_values(expected: sp.Expr, given: sp.Expr):
    """(expected's value, given's) at each probe point where `expected` has a value; given's is
    None where it has none."""
    for point in probe_points(sorted(expected.free_symbols | given.free_symbols, key=str)):
        try:
            want = _value(expected, point)
        except _Unevaluable:
            continue
        try:
            yield want, _value(given, point)
        except _Unevaluable:
            yield want, None


def probes_agree(expected: sp.Expr, given: sp.Expr) -> bool:
    """Both have the same value, within REL_TOL, at every probe point where `expected` has one
    (at least MIN_PROBES of them). Two different expressions of these names agreeing at 8 random
    non-integer points to 9 digits does not happen by accident; a difference below 1e-9 relative
    passes, as it would for a number."""
    checked = 0
    for want, got in _probe_values(expected, given):
        if got is None or not _close(want, got):
            return False
        checked += 1
    return checked >= MIN_PROBES


def _ratios_agree(expected: sp.Expr, given: sp.Expr) -> bool:
    """given/expected is the same positive number at every probe point where `expected` has a
    nonzero value (at least MIN_PROBES of them)."""
    first, checked = None, 0
    for want, got in _probe_values(expected, given):
        if want == 0:
            continue
        if got is None:
            return False
        ratio = got / want
        if first is None:
            first = ratio
            if not (_MP.re(first) > 0 and abs(_MP.im(first)) <= REL_TOL * abs(first)):
                return False
        elif not _close(first, ratio):
            return False
        checked += 1
    return checked >= MIN_PROBES


def same_order(expected: sp.Expr, given: sp.Expr) -> bool:
    """A complexity: `given` is `expected` times a positive constant (O(2 n^2 d) is O(n^2 d)),
    proven by sympy within SIMPLIFY_BUDGET_S or else seen at the probes. Lower-order terms are
    not dropped: n^2 d + n is not n^2 d here."""
    ratio = _within(SIMPLIFY_BUDGET_S, lambda: sp.simplify(given / expected))
    if ratio is not None and ratio.is_number and ratio.is_positive:
        return True
    return _ratios_agree(expected, given)


def evaluable(expected: sp.Expr) -> bool:
    """The key's expression has a value at every probe point (checked when a key is loaded)."""
    try:
        for point in probe_points(sorted(expected.free_symbols, key=str)):
            _value(expected, point)
    except _Unevaluable:
        return False
    return True


def same(expected: sp.Expr, given: sp.Expr) -> bool:
    """Equivalent: exactly by sympy when it gets there within SIMPLIFY_BUDGET_S, else by the
    probes. The symbolic step can only pass (it proves difference 0); the probes catch what
    simplify leaves unproven and reject a real difference. Evaluating at 60 digits keeps a
    correct answer in an unusual form from failing on rounding."""
    difference = expected - given
    if difference == 0:
        return True
    if _within(SIMPLIFY_BUDGET_S, lambda: sp.simplify(difference)) == 0:
        return True
    return probes_agree(expected, given)
