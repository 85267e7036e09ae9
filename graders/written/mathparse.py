"""Tokens to a small syntax tree of our own, and the tree back to text: the reading a student is
shown ("2a.cost: n**2*d") is rendered from exactly the tree that is graded.

Implicit multiplication is read where only one reading exists (`2n`, `n^2 d`, `2 sqrt(d_k)`,
`(n+1)(n+2)`); where two do, the answer is refused with both, never guessed: `1/2n` is (1/2)*n
or 1/(2*n), `n^2d` is n**(2*d) or n**2*d, `√2n` is sqrt(2*n) or sqrt(2)*n. A name the part does
not define may be a spelling of one it does (`dk` for d_k: an alias, with a note) or adjacent
names (`hn` for h*n); both at once is refused too.
"""

import keyword
from collections.abc import Sequence
from dataclasses import dataclass

from graders.written.mathlex import LexError, Token, tokens

MAX_DEPTH = 30
MAX_TOKENS = 200
FUNCTIONS = ("sqrt", "exp", "log", "sin", "cos", "tan")
_SYNONYMS = {"ln": "log"}
CONSTANTS = {"pi": "pi", "E": "E", "e": "E"}  # e is Euler's number unless the part names a symbol e
BOUNDS = ("O", "Theta", "Omega")


class ReadError(ValueError):
    """The text cannot be read as one expression; the message says why, for the student."""


# -- the tree ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Num:
    text: str  # the digits as written, separators dropped: "1048576", "0.5", "2e3"


@dataclass(frozen=True)
class Sym:
    name: str


@dataclass(frozen=True)
class Const:
    name: str  # pi or E


@dataclass(frozen=True)
class Neg:
    operand: "Node"


@dataclass(frozen=True)
class Chain:
    """A sum (ops "+" "-") or a product (ops "*" "/"), flat, left to right; ops[0] is "+" or "*"."""

    kind: str  # "sum" or "product"
    ops: tuple[str, ...]
    operands: tuple["Node", ...]


@dataclass(frozen=True)
class Pow:
    base: "Node"
    exponent: "Node"


@dataclass(frozen=True)
class Call:
    function: str  # one of FUNCTIONS
    argument: "Node"
    log_base: "Node | None" = None


@dataclass(frozen=True)
class Root:
    argument: "Node"
    index: "Node"


@dataclass(frozen=True)
class Bound:
    """O(...) or Theta(...) around the whole answer: a complexity."""

    kind: str
    inner: "Node"


Node = Num | Sym | Const | Neg | Chain | Pow | Call | Root | Bound


@dataclass(frozen=True)
class Parsed:
    tree: Node
    aliases: tuple[tuple[str, str], ...]  # (as written, the part's name) for each alias used


# -- names -----------------------------------------------------------------------------------------
def _segmentations(text: str, vocabulary: Sequence[str], limit: int = 2) -> list[tuple[str, ...]]:
    """Ways to write `text` as adjacent names of `vocabulary` (at most `limit` of them: two
    already make it ambiguous). By position, so a run of 200 letters costs 200 small steps."""
    ways: list[list[tuple[str, ...]]] = [[] for _ in range(len(text) + 1)]
    ways[0] = [()]
    for i in range(len(text)):
        for word in vocabulary:
            if ways[i] and text.startswith(word, i):
                ways[i + len(word)] = (ways[i + len(word)] + [w + (word,) for w in ways[i]])[:limit]
    return ways[len(text)]


def _readings(name: str, symbols: Sequence[str]) -> list[tuple[str, ...]]:
    """The part's names `name` may stand for: an alias (same letters, underscores aside: dk, d_k)
    as one name, adjacent names (hn: h, n) as several."""
    bare = name.replace("_", "")
    aliases = [(s,) for s in symbols if s.replace("_", "") == bare]
    splits = [w for w in _segmentations(name, [*symbols, "pi"]) if len(w) > 1]
    return aliases + [w for w in splits if w not in aliases]


def _shown(words: tuple[str, ...]) -> str:
    return "*".join(words)


class _Names:
    """What each name token means for this part: a symbol, a constant, a function, a bound."""

    def __init__(self, symbols: Sequence[str], aliases: bool):
        self.symbols, self.allow_aliases = tuple(symbols), aliases
        self.used: list[tuple[str, str]] = []

    def resolve(self, stream: list[Token]) -> list[Token]:
        out: list[Token] = []
        for i, t in enumerate(stream):
            if t.kind != "name":
                out.append(t)
            else:
                out += self._resolve(t, stream[i + 1])
        return out

    def _resolve(self, t: Token, after: Token) -> list[Token]:
        name = t.text
        if name in self.symbols:
            return [Token("sym", name, t.spaced, t.written)]
        base = name.partition("_")[0]
        if name in FUNCTIONS or name in _SYNONYMS or (base == "log" and "_" in name):
            return [Token("func", _SYNONYMS.get(name, name), t.spaced, t.written)]
        if name in CONSTANTS:
            return [Token("const", CONSTANTS[name], t.spaced, t.written)]
        if name in BOUNDS:
            return [Token("bound", name, t.spaced, t.written)]
        readings = _readings(name, self.symbols) if self.allow_aliases else []
        if len(readings) > 1:
            shown = " or ".join(_shown(r) for r in readings)
            raise ReadError(f"is ambiguous: {t.written} could be {shown}; write the one you mean")
        if readings:
            if len(readings[0]) == 1:
                self.used.append((t.written, readings[0][0]))
            return [Token("sym", s, t.spaced and j == 0, t.written) for j, s in enumerate(readings[0])]
        raise ReadError(self._unknown(t, after))

    def _unknown(self, t: Token, after: Token) -> str:
        name = t.text if len(t.text) <= 30 else t.text[:30] + "…"
        if keyword.iskeyword(name):
            return f"uses the Python keyword {name!r}, which is not part of an answer"
        if after.kind == "open" and after.text == "(" and not after.spaced:
            return f"calls {name}(), which is not one of the functions allowed ({', '.join(sorted(FUNCTIONS))})"
        if not self.symbols:
            return f"uses the name {name!r}, but this answer is a number: it takes no names"
        return (
            f"uses the name {name!r}, which this question does not define; "
            f"the names are {', '.join(sorted(self.symbols))}"
        )


def parse(text: str, symbols: Sequence[str] = (), aliases: bool = True) -> Parsed:
    """The tree of `text`, reading only the names in `symbols` (and, with `aliases`, their other
    spellings and runs of them). Raises ReadError."""
    try:
        stream = tokens(text)
    except LexError as e:
        raise ReadError(str(e)) from None
    if len(stream) > MAX_TOKENS:
        raise ReadError(f"has more than {MAX_TOKENS} parts")
    names = _Names(symbols, aliases)
    stream = names.resolve(stream)
    if len(stream) > MAX_TOKENS:
        raise ReadError(f"has more than {MAX_TOKENS} parts")
    tree = _Parser(stream).answer()
    return Parsed(tree, tuple(dict.fromkeys(names.used)))


# -- the grammar -----------------------------------------------------------------------------------
_FACTOR_STARTS = frozenset({"num", "sym", "const", "func", "open", "frac", "root", "bound"})
_CLOSERS = {"(": ")", "{": "}", "[": "]"}


class _Parser:
    """answer := bound(expr) | expr;  expr := term (+|- term)*;  term := signed (*|/ signed | factor)*;
    signed := (-|+) signed | power;  power := atom (^ exponent)?;  atom := number | name | (expr) |
    \\frac{}{} | function | root. As in Python, -a*b is (-a)*b and -a^2 is -(a^2). Recursion is
    bounded by MAX_DEPTH, so a deep nesting is refused long before Python's own stack is near."""

    def __init__(self, stream: list[Token]):
        self.stream, self.i, self.depth = stream, 0, 0

    def peek(self) -> Token:
        return self.stream[self.i]

    def take(self) -> Token:
        t = self.stream[self.i]
        self.i += 1
        return t

    def is_op(self, *ops: str) -> bool:
        return self.peek().kind == "op" and self.peek().text in ops

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ReadError(f"is nested more than {MAX_DEPTH} levels deep")

    def answer(self) -> Node:
        if self.peek().kind == "bound":
            bound = self.take()
            if self.peek().kind != "open":
                raise ReadError(f"uses {bound.written} without brackets: write {bound.written}(...)")
            tree: Node = Bound(bound.text, self.group())
        else:
            tree = self.expr()
        t = self.peek()
        if t.kind == "close":
            raise ReadError(f"has a {t.written} without an opening bracket before it")
        if t.kind != "end" and isinstance(tree, Bound):
            raise ReadError("has O(...) inside it: O(...) goes around the whole answer, e.g. O(n^2 d)")
        if t.kind != "end":
            raise ReadError(f"has {t.written} where it cannot be read")
        return tree

    def expr(self) -> Node:
        self.deeper()
        ops, operands = ["+"], [self.term()]
        while self.is_op("+", "-"):
            ops.append(self.take().text)
            operands.append(self.term())
        self.depth -= 1
        return operands[0] if len(operands) == 1 else Chain("sum", tuple(ops), tuple(operands))

    def term(self) -> Node:
        ops, operands = ["*"], [self.signed()]
        while True:
            if self.is_op("*", "/"):
                ops.append(self.take().text)
                operands.append(self.signed())
            elif self.peek().kind in _FACTOR_STARTS:
                self._implicit(ops, operands)
            else:
                break
        return operands[0] if len(operands) == 1 else Chain("product", tuple(ops), tuple(operands))

    def _implicit(self, ops: list[str], operands: list[Node]) -> None:
        """A factor written right after another: `2n`, `n^2 d`, `(n+1)(n+2)`; after a division,
        `1/2n`, two readings, so refused."""
        left, t = operands[-1], self.peek()
        if t.kind == "num":
            raise ReadError(_number_after(left, t))
        right = self.power()
        if ops[-1] == "/":
            whole = Chain("product", tuple(ops), tuple(operands))
            joined = Chain("product", ("*", "*"), (left, right))
            other = Chain("product", tuple(ops), (*operands[:-1], joined))
            raise ReadError(
                f"is ambiguous: it could be {render(whole, 3)}*{render(right, 4)} or {render(other)}; write one of them"
            )
        ops.append("*")
        operands.append(right)

    def signed(self) -> Node:
        if not self.is_op("-", "+"):
            return self.power()
        sign = self.take().text
        self.deeper()
        operand = self.signed()
        self.depth -= 1
        return Neg(operand) if sign == "-" else operand

    def power(self) -> Node:
        base = self.atom()
        if not self.is_op("^"):
            return base
        caret = self.take()
        self.deeper()
        bracketed = self.peek().kind == "open"
        exponent = self.signed()
        self.depth -= 1
        after = self.peek()
        if not (caret.explicit or bracketed) and after.kind in _FACTOR_STARTS and not after.spaced:
            right = self._next_factor()
            run_on = Pow(base, Chain("product", ("*", "*"), (exponent, right)))
            apart = Chain("product", ("*", "*"), (Pow(base, exponent), right))
            raise ReadError(
                f"is ambiguous: it could be {render(run_on)} or {render(apart)}; write one of them "
                "(a space before the next factor, or brackets around the exponent)"
            )
        return Pow(base, exponent)

    def _next_factor(self) -> Node:
        """The factor that follows, read only to name it in a message."""
        t = self.peek()
        return Num(t.text) if t.kind == "num" else self.atom()

    def atom(self) -> Node:
        t = self.peek()
        if t.kind in ("num", "sym", "const"):
            self.take()
            return Num(t.text) if t.kind == "num" else Sym(t.text) if t.kind == "sym" else Const(t.text)
        parsers = {"open": self.group, "frac": self.fraction, "func": self.call, "root": self.root}
        if t.kind in parsers:
            return parsers[t.kind]()
        raise ReadError(_misplaced(t, self.stream[self.i - 1] if self.i else None))

    def group(self) -> Node:
        opening = self.take()
        if self.peek().kind == "close":
            raise ReadError(f"has empty brackets {opening.text}{self.peek().text}")
        inner = self.expr()
        closing = self.peek()
        if closing.kind != "close":
            raise ReadError(f"has a {opening.written} without its closing {_CLOSERS[opening.text]}")
        if closing.text != _CLOSERS[opening.text]:
            raise ReadError(f"closes {opening.written} with {closing.written}")
        self.take()
        return inner

    def fraction(self) -> Node:
        frac = self.take()
        parts = []
        for _ in range(2):
            if self.peek().kind != "open":
                raise ReadError(f"uses {frac.written} without its two {{...}}: write {frac.written}{{a}}{{b}}")
            parts.append(self.group())
        return Chain("product", ("*", "/"), tuple(parts))

    def call(self) -> Node:
        t = self.take()
        name, _, base = t.text.partition("_")
        if base and (name != "log" or not (base.isdigit() or base == "e")):
            raise ReadError(f"has {t.written}: only log takes a subscript, a number base (log_2, log_{{10}})")
        log_base: Node | None = (Num(base) if base.isdigit() else Const("E")) if base else None
        return Call(name, self._argument(t, name), log_base)

    def root(self) -> Node:
        t = self.take()
        index: Node = Num("2" if t.text == "latex" else t.text)
        if t.text == "latex" and self.peek().kind == "open" and self.peek().text == "[":
            index = self.group()
        argument = self._argument(t, "sqrt")
        return Call("sqrt", argument) if index == Num("2") else Root(argument, index)

    def _argument(self, t: Token, name: str) -> Node:
        """A function's argument: brackets, or one plain value (\\log n, √d_k) that nothing may run
        on from: `√2n` and `log n d` have two readings each, `log n^2` too. A root's `√n^2` is
        read as sqrt(n**2): for the positive values here, sqrt(n)**2 is the same number."""
        self.deeper()
        if self.peek().kind == "open":
            argument = self.group()
            self.depth -= 1
            return argument
        if self.peek().kind not in _FACTOR_STARTS - {"bound"}:
            raise ReadError(f"uses {t.written} without brackets: write {name}(...)")
        argument = self.atom()
        self.depth -= 1
        fix = f"write brackets around what {t.written} applies to"
        if self.is_op("^") and name == "sqrt":
            self.take()
            return Pow(argument, self.signed())
        if self.is_op("^"):
            self.take()
            exponent = self.signed()
            raise ReadError(
                f"is ambiguous: it could be {name}({render(Pow(argument, exponent))}) or "
                f"{name}({render(argument)})**{render(exponent, 4)}; {fix}"
            )
        if self.peek().kind in _FACTOR_STARTS:
            right = self._next_factor()
            both = Chain("product", ("*", "*"), (argument, right))
            apart = f"{name}({render(argument)})*{render(right, 4)}"
            raise ReadError(f"is ambiguous: it could be {name}({render(both)}) or {apart}; {fix}")
        return argument


def _number_after(left: Node, t: Token) -> str:
    if isinstance(left, Num):
        return (
            f"is ambiguous: {left.text} {t.written} could be {left.text}{t.text} or {left.text}*{t.text}; "
            "write one of them (thousands are written 1,048,576)"
        )
    shown = render(left, 4)
    return f"puts the number {t.written} right after {render(left)}: write {t.written}*{shown}, or * between them"


def _misplaced(t: Token, before: Token | None) -> str:
    """Why `t` cannot stand where a value belongs."""
    if t.kind == "end":
        return "is incomplete: it ends where a value belongs" + (f" (after {before.written})" if before else "")
    if t.kind == "close":
        return f"has a {t.written} where a value belongs"
    if t.kind == "bound":
        return "has O(...) inside it: O(...) goes around the whole answer, e.g. O(n^2 d)"
    return f"has {t.written} where a value belongs"


# -- the tree as text ------------------------------------------------------------------------------
# Precedence: a sum 1, a product 2, a negation 3, a power 4, anything else 5.
def _level(node: Node) -> int:
    if isinstance(node, Chain):
        return 1 if node.kind == "sum" else 2
    if isinstance(node, Neg):
        return 3
    if isinstance(node, Pow):
        return 4
    return 5


def render(node: Node, at_least: int = 0) -> str:
    """The tree in the grader's plain syntax (* and **), bracketed where precedence needs it, and
    around a negation that is not first (2*(-3), a+(-b)), which reads more plainly."""
    text = _render(node)
    return f"({text})" if _level(node) < at_least else text


def _operand(node: Node, at_least: int) -> str:
    return f"({_render(node)})" if isinstance(node, Neg) else render(node, at_least)


def _render(node: Node) -> str:
    if isinstance(node, Num):
        return node.text
    if isinstance(node, (Sym, Const)):
        return node.name
    if isinstance(node, Neg):
        return "-" + _operand(node.operand, 2)
    if isinstance(node, Pow):
        return f"{render(node.base, 5)}**{_operand(node.exponent, 4)}"
    if isinstance(node, Call):
        if node.log_base is not None:
            return f"log({render(node.argument)})/log({render(node.log_base)})"
        return f"{node.function}({render(node.argument)})"
    if isinstance(node, Root):
        return f"{render(node.argument, 5)}**(1/{render(node.index, 4)})"
    if isinstance(node, Bound):
        return f"{node.kind}({render(node.inner)})"
    pieces = [render(node.operands[0], 1 if node.kind == "sum" else 3)]
    for op, operand in zip(node.ops[1:], node.operands[1:], strict=True):
        pieces.append(op + _operand(operand, 2 if node.kind == "sum" else 4 if op == "/" else 3))
    return "".join(pieces)
