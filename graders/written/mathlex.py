"""An answer's text as tokens: plain syntax (2*d_k, n^2), the LaTeX subset students typeset their
homework in (\\frac{}{}, \\sqrt[n]{}, \\cdot, ^{}, _{}, \\left( \\right), $...$) and Unicode math
(n²d, 4 × 512², √d_k, −, π) all come out as the same few kinds of token.

Nothing here knows the part's names: `dk` is one name token, which mathparse resolves. Every
message is a student-facing predicate ("uses \\foo, which ..."): the caller puts the answer first.
"""

import re
from dataclasses import dataclass


class LexError(ValueError):
    """The text has something no answer can contain; the message says what, for the student."""


@dataclass(frozen=True)
class Token:
    kind: str  # num, name, op (+ - * / ^), open, close, frac, root, end
    text: str  # canonical: "1048576", "d_k", "*", "(", or a root's index ("2", "3", "latex")
    spaced: bool = False  # whitespace before it: `n^2 d` is a product, `n^2d` is ambiguous
    written: str = ""  # as the student wrote it, for the messages ("d_{k}", "\\times")
    explicit: bool = False  # an exponent that cannot run on: a superscript (n²)


SPACE = frozenset(" \t\r\n\u00a0\u2002\u2003\u2007\u2008\u2009\u200a\u202f\u205f\u3000\u200b\ufeff")
# Between groups of three digits these are thousands separators (1,048,576; 1{,}048{,}576 and
# 1\,048\,576 in LaTeX; the SI's thin spaces); a plain or no-break space is not: `2 512` is
# refused as 2512-or-2*512.
_THOUSANDS = (",", "{,}", "\\,", "\u2009", "\u202f")
_OPERATORS = {
    "+": "+", "-": "-", "−": "-", "–": "-", "*": "*", "×": "*", "·": "*", "⋅": "*", "∙": "*", "∗": "*",
    "/": "/", "÷": "/", "∕": "/", "^": "^",
}  # fmt: skip
_BRACKETS = {"(": ("open", "("), ")": ("close", ")"), "{": ("open", "{"), "}": ("close", "}")}
_ROOTS = {"√": "2", "∛": "3", "∜": "4"}
_VULGAR = {"½": "1/2", "⅓": "1/3", "⅔": "2/3", "¼": "1/4", "¾": "3/4", "⅛": "1/8"}
_SUPERSCRIPT = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789", strict=True)) | {"⁻": "-", "⁺": "+", "ⁿ": "n", "ⁱ": "i"}
_SUBSCRIPT = dict(zip("₀₁₂₃₄₅₆₇₈₉", "0123456789", strict=True)) | dict(
    zip("ₐₑₒₓₕₖₗₘₙₚₛₜᵢⱼᵣᵤᵥ", "aeoxhklmnpstijruv", strict=True)
)
GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "zeta": "ζ", "eta": "η",
    "theta": "θ", "iota": "ι", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π",
    "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}  # fmt: skip
_GREEK_LETTERS = {letter: name for name, letter in GREEK.items()}
# LaTeX commands and what they are: a token, or nothing (spacing, sizes, \displaystyle).
_COMMANDS = {
    "cdot": ("op", "*"), "times": ("op", "*"), "ast": ("op", "*"), "div": ("op", "/"),
    "frac": ("frac", "frac"), "dfrac": ("frac", "frac"), "tfrac": ("frac", "frac"), "sqrt": ("root", "latex"),
    "{": ("open", "{"), "}": ("close", "}"),
}  # fmt: skip
_FUNCTION_COMMANDS = frozenset({"log", "ln", "exp", "sin", "cos", "tan"})
_IGNORED = frozenset({",", ";", ":", "!", " ", "quad", "qquad", "enspace", "thinspace", "displaystyle", "limits"})
_SIZES = frozenset({"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr"})
# \text{model}, \mathrm{O}, \operatorname{O}: their content is plain text (a name); a letter alone
# may follow without braces (\mathcal O).
_WRAPPERS = re.compile(
    r"\\(?:textrm|textit|text|mathrm|mathit|mathcal|mathbf|mathsf|operatorname)(?![A-Za-z])\s*(?:\{([^{}\\]*)\}|([A-Za-z]))"
)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_SUBSCRIPT_PLAIN = re.compile(r"[A-Za-z0-9]+")
_DIGITS = re.compile(r"[0-9]+")
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
_LATEX_LIST = "\\frac, \\sqrt, \\cdot, \\times, \\left( \\right), \\log, \\exp, \\pi"


def _unwrapped(text: str) -> str:
    """`$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` around the whole answer, taken off."""
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if text.startswith(left) and text.endswith(right) and len(text) >= len(left) + len(right):
            text = text[len(left) : len(text) - len(right)].strip()
            break
    if "$" in text:
        raise LexError("has a $ inside it: put $...$ around the whole answer, or leave the $ out")
    return _WRAPPERS.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)


def tokens(text: str) -> list[Token]:
    """The tokens of `text`, ending with an `end` token. Raises LexError."""
    return _Lexer(_unwrapped(text)).run()


class _Lexer:
    def __init__(self, text: str):
        self.text, self.i, self.spaced = text, 0, False
        self.out: list[Token] = []
        self.squares = 0  # [ ] open after \sqrt or \left: the only square brackets accepted

    def run(self) -> list[Token]:
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in SPACE:
                self.i, self.spaced = self.i + 1, True
            elif c == "\\":
                self._command()
            elif _digit(c) or (c == "." and _digit(self._at(1))):
                self._number()
            elif c.isascii() and (c.isalpha() or c == "_"):
                self._name()
            else:
                self._symbol(c)
        self.emit("end", "")
        return self.out

    def _at(self, offset: int) -> str:
        j = self.i + offset
        return self.text[j] if 0 <= j < len(self.text) else ""

    def emit(self, kind: str, text: str, written: str = "", explicit: bool = False) -> None:
        self.out.append(Token(kind, text, self.spaced, written or text, explicit))
        self.spaced = False

    def _symbol(self, c: str) -> None:
        self.i += 1
        if c == "*" and self._at(0) == "*":  # ** is ^
            self.i += 1
            self.emit("op", "^", "**")
        elif c in _OPERATORS:
            self.emit("op", _OPERATORS[c], c)
        elif c in _BRACKETS:
            self.emit(*_BRACKETS[c])
        elif c in ("[", "]") and (self.out and self.out[-1].kind == "root" or c == "]" and self.squares):
            self.squares += 1 if c == "[" else -1
            self.emit("open" if c == "[" else "close", c)
        elif c in _ROOTS:
            self.emit("root", _ROOTS[c], c)
        elif c in _VULGAR:  # ½ is (1/2): a group, so ½n is (1/2)*n with one reading
            top, bottom = _VULGAR[c].split("/")
            if self.out and self.out[-1].kind == "num":
                n = self.out[-1].written
                raise LexError(
                    f"is ambiguous: {n}{c} could be {n}+{top}/{bottom} or {n}*({top}/{bottom}); write one of them"
                )
            self.emit("open", "(", c)
            self.out += [Token("num", top), Token("op", "/"), Token("num", bottom), Token("close", ")")]
        elif c in _SUPERSCRIPT:
            self.i -= 1
            self._superscript()
        elif c in _GREEK_LETTERS:
            self.emit("name", _GREEK_LETTERS[c], c)
            self._subscript_after_name()
        else:
            raise LexError(_refusal(c, self.out[-1] if self.out else None))

    def _superscript(self) -> None:
        """n²³ is n^(23), n⁻¹ is n^(-1): a group of its own, which nothing can run on from."""
        start = self.i
        while self.i < len(self.text) and self.text[self.i] in _SUPERSCRIPT:
            self.i += 1
        run = "".join(_SUPERSCRIPT[c] for c in self.text[start : self.i])
        self.emit("op", "^", self.text[start : self.i], explicit=True)
        self.emit("open", "(")
        for piece in re.findall(r"\d+|[a-z]|[-+]", run):
            self.emit("num" if piece.isdigit() else "name" if piece.isalpha() else "op", piece)
        self.emit("close", ")")

    def _command(self) -> None:
        m = re.match(r"\\([A-Za-z]+|.)", self.text[self.i :], re.DOTALL)
        if m is None:  # a backslash at the very end
            raise LexError("ends with a backslash \\")
        name, self.i = m.group(1), self.i + m.end()
        if name in _IGNORED:
            self.spaced = True
        elif name in _SIZES:
            self._sized_bracket(name)
        elif name in _COMMANDS:
            self.emit(*_COMMANDS[name], written="\\" + name)
        elif name in _FUNCTION_COMMANDS or name in GREEK:
            self.emit("name", name, "\\" + name)
            self._subscript_after_name()
        elif name == "infty":
            raise LexError("uses infinity, which is not a finite answer")
        else:
            raise LexError(f"uses \\{name}, which is not part of the LaTeX accepted ({_LATEX_LIST})")

    def _sized_bracket(self, size: str) -> None:
        while self._at(0) in SPACE and self._at(0):
            self.i += 1
        c = self._at(0)
        if c == "\\" and self._at(1) in "{}":
            c, self.i = self._at(1), self.i + 1
        if c not in "()[]{}" or not c:
            raise LexError(f"uses \\{size} without a bracket after it (\\{size}( or \\{size}[)")
        self.i += 1
        if c in "[]":
            self.squares += 1 if c == "[" else -1
        self.emit("open" if c in "([{" else "close", c, "\\" + size + c)

    def _number(self) -> None:
        start = self.i
        if self.text[self.i] == "0" and self._at(1) in "xXoObB" and self._at(2).isalnum():
            raise LexError("writes a number in hexadecimal, octal or binary: write it in decimal")
        whole = self._digit_groups() if self.text[self.i] != "." else "0"
        if self._at(0) == "." and not self._at(1).isalpha() and self._at(1) != ".":
            self.i += 1
            m = _DIGITS.match(self.text, self.i)
            whole += "." + (m.group() if m else "")
            self.i = m.end() if m else self.i
        m = _EXPONENT.match(self.text, self.i)
        if m is not None and not self._at(m.end() - self.i).isalpha():
            whole, self.i = whole + m.group().lower(), m.end()
        if self._at(0) == "_" and _digit(self._at(1)):
            raise LexError("groups digits with _: write 1000 or 1,000")
        self.emit("num", whole.rstrip(".") or "0", self.text[start : self.i])

    def _digit_groups(self) -> str:
        """Digits, with thousands separators only between groups of exactly three (1,048,576):
        `1,5` stays two values (refused) rather than silently becoming 15."""
        m = _DIGITS.match(self.text, self.i)
        assert m is not None  # called on a digit, or on "." before one
        digits, self.i = m.group(), m.end()
        if len(digits) > 3:
            return digits
        for sep in _THOUSANDS:
            groups = re.match(rf"(?:{re.escape(sep)}[0-9]{{3}}(?![0-9]))+", self.text[self.i :])
            if groups is not None:
                self.i += groups.end()
                return digits + re.sub(r"[^0-9]", "", groups.group())
        return digits

    def _name(self) -> None:
        start = self.i
        if self.text[self.i] == "_":  # __import__: no name of ours starts with _
            m = re.match(r"_+[A-Za-z0-9_]*", self.text[self.i :])
            assert m is not None
            self.i += m.end()
            self.emit("name", m.group(), m.group())
            return
        m = _NAME.match(self.text, self.i)
        assert m is not None
        self.i = m.end()
        subscript = self._subscripts()
        base = m.group()
        self.emit("name", base + (f"_{subscript}" if subscript else ""), self.text[start : self.i])

    def _subscript_after_name(self) -> None:
        """θ_i, \\log_2: a subscript on a token already emitted (a Greek letter, a function)."""
        subscript = self._subscripts()
        if subscript:
            last = self.out.pop()
            self.out.append(Token("name", f"{last.text}_{subscript}", last.spaced, last.written + "_" + subscript))

    def _subscripts(self) -> str:
        """d_k, d_{k}, d_{model}, dₖ, d_model_size: the subscript's text, "" if none."""
        pieces = []
        while True:
            if self._at(0) in _SUBSCRIPT and self._at(0):
                start = self.i
                while self._at(0) in _SUBSCRIPT and self._at(0):
                    self.i += 1
                pieces.append("".join(_SUBSCRIPT[c] for c in self.text[start : self.i]))
            elif self._at(0) == "_":
                pieces.append(self._subscript())
            else:
                return "_".join(pieces)

    def _subscript(self) -> str:
        self.i += 1
        if self._at(0) == "{":
            end = self.text.find("}", self.i)
            content = self.text[self.i + 1 : end].replace(" ", "") if end >= 0 else ""
            if end < 0 or not re.fullmatch(r"[A-Za-z0-9_]+", content):
                raise LexError("has a subscript _{...} that is not letters and digits (write d_{k} or d_k)")
            self.i = end + 1
            return content
        m = _SUBSCRIPT_PLAIN.match(self.text, self.i)
        if m is None:
            raise LexError("has a _ with no subscript after it (write d_k or d_{k})")
        self.i = m.end()
        return m.group()


def _digit(c: str) -> bool:
    return c != "" and c in "0123456789"  # not str.isdigit: "²".isdigit() is true


def _refusal(c: str, before: Token | None) -> str:
    """Why the character `c` cannot be in an answer."""
    if c in "'\"`‘’“”":
        return "contains text in quotes, which is not a number"
    if c == ",":
        return "uses several values separated by commas (thousands are written 1,048,576, in groups of three)"
    if c == ".":
        if before is not None and before.kind in ("name", "close"):
            return "uses attribute access (a.b), which is not allowed in an answer"
        return "has a . that is not part of a number"
    if c in "[]":
        return "uses square brackets [ ], which are not accepted: group with round ones ( )"
    if c == "=":
        return "has an = in it: give the value alone (64, not d_k = 64)"
    if c in "<>≤≥≠":
        return "uses a comparison, which is not an answer"
    if c == "|":
        return "uses | (an absolute value?), which is not accepted"
    if c == "!":
        return "uses ! (a factorial?), which is not accepted"
    if c == "%":
        return "uses %, which is not one of the operators + - * / ^"
    if c == "∞":
        return "uses infinity, which is not a finite answer"
    if ord(c) < 32 or 0x7F <= ord(c) < 0xA0:
        return f"contains the control character {c!r}"
    return f"uses the character {c!r}, which is not part of an answer"
