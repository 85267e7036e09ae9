"""Source text to a normalised token stream: what two copies of one solution still share after
renaming, reformatting (black, ruff), new comments and docstrings, and functions moved around.

Nothing here runs or imports student code: `ast.parse` and `tokenize` read text only.

The AST stream is the parse tree in pre-order, one token per node: the node's kind, with local
names, parameter names and literals abstracted (`Name`, `Num`, `Str`) and what cannot be renamed
without changing behaviour kept (attribute names such as `.softmax` or `.W_q`, keyword
arguments, imported modules). Formatting never reaches the tree; comments never do either, and
bare string statements (docstrings), type annotations and placeholders (`pass`, `...`,
`raise NotImplementedError`: a stub left unfilled) are dropped; a function that is nothing but
placeholders gives no token at all. Every function (a method
too) is a segment of its own, as is the rest of each class and of the module, so k-grams never
span two functions and their order does not matter.

A file that does not parse gets a token stream instead (Python's `tokenize`, same abstraction);
two files are compared in the same kind of stream, so a pair with a broken file uses tokens on
both sides.
"""

import ast
import hashlib
import io
import keyword
import tokenize
from dataclasses import dataclass

import numpy as np

# Fields whose subtrees are left out: annotations (adding type hints changes nothing) and
# the load/store context markers (implied by the node kind).
_SKIP_FIELDS = frozenset({"ctx", "annotation", "returns", "type_comment", "type_params"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TOKEN_LABEL_CACHE: dict[str, int] = {}


@dataclass
class Unit:
    """A piece of source parsed on its own: a module, or one code cell of a notebook, whose
    line 1 is line `offset + 1` of the text shown to staff."""

    text: str
    offset: int = 0


@dataclass
class Stream:
    """Normalised tokens: ids (64-bit label hashes), each token's first and last source line,
    and the start index of each segment (k-grams never cross a segment boundary)."""

    mode: str  # "ast" or "tokens"
    ids: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    starts: list[int]


def label_id(label: str) -> int:
    """A stable 64-bit id per label (Python's hash() is salted per process; reports must not
    change from one run to the next)."""
    found = _TOKEN_LABEL_CACHE.get(label)
    if found is None:
        found = int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "little")
        _TOKEN_LABEL_CACHE[label] = found
    return found


def _label(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return "Name"
    if isinstance(node, ast.Attribute):
        return "." + node.attr
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, (str, bytes)):
            return "Str"
        if isinstance(value, bool) or value is None or value is Ellipsis:
            return repr(value)
        return "Num"
    if isinstance(node, ast.keyword):
        return f"kw:{node.arg or '**'}"
    if isinstance(node, ast.alias):
        return f"import:{node.name}"
    if isinstance(node, ast.ImportFrom):
        return f"from:{node.module or ''}:{node.level}"
    if isinstance(node, ast.AnnAssign):
        return "Assign"  # `x: int = 1` is `x = 1` once the annotation is gone
    return type(node).__name__


def _is_bare_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def placeholder(node: ast.AST) -> bool:
    """A statement that stands for code not yet written: `pass`, `...`, `raise NotImplementedError`
    (a docstring too). Two unfilled stubs are alike by construction: no evidence of anything."""
    if isinstance(node, ast.Pass) or _is_bare_string(node):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return node.value.value is Ellipsis
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _unfilled(node: ast.AST) -> bool:
    """A function whose body is placeholders only: it gives no token at all."""
    return isinstance(node, _DEFS) and all(placeholder(s) for s in node.body)


def _children(node: ast.AST) -> list[ast.AST]:
    out = []
    for name, value in ast.iter_fields(node):
        if name in _SKIP_FIELDS:
            continue
        for child in value if isinstance(value, list) else (value,):
            if isinstance(child, ast.AST) and not placeholder(child) and not _unfilled(child):
                out.append(child)
    return out


class _Builder:
    """Collects tokens segment by segment; iterative so that deeply nested code cannot exhaust
    the interpreter's recursion limit."""

    def __init__(self, offset: int):
        self.offset = offset
        self.labels: list[str] = []
        self.lo: list[int] = []
        self.hi: list[int] = []
        self.starts: list[int] = []
        self.pending: list[ast.AST] = []  # functions and classes met inside a segment: later segments

    def segment(self, roots: list[ast.AST], split_defs: bool) -> None:
        if not roots:
            return
        self.starts.append(len(self.labels))
        stack = [(node, 1, 1) for node in reversed(roots)]
        while stack:
            node, parent_lo, parent_hi = stack.pop()
            lo = getattr(node, "lineno", None) or parent_lo
            hi = lo if isinstance(node, ast.stmt) else (getattr(node, "end_lineno", None) or parent_hi)
            self.labels.append(_label(node))
            self.lo.append(lo + self.offset)
            self.hi.append(hi + self.offset)
            children = _children(node)
            if split_defs and isinstance(node, ast.ClassDef):
                # A class's methods are segments of their own: reordering them changes nothing.
                self.pending.extend(c for c in children if isinstance(c, (*_DEFS, ast.ClassDef)))
                children = [c for c in children if not isinstance(c, (*_DEFS, ast.ClassDef))]
            stack.extend((c, lo, hi) for c in reversed(children))

    def module(self, tree: ast.Module) -> None:
        body = [n for n in tree.body if not placeholder(n) and not _unfilled(n)]
        self.segment([n for n in body if not isinstance(n, (*_DEFS, ast.ClassDef))], split_defs=False)
        self.pending.extend(n for n in body if isinstance(n, (*_DEFS, ast.ClassDef)))
        while self.pending:
            node = self.pending.pop(0)
            self.segment([node], split_defs=isinstance(node, ast.ClassDef))


def _stream(mode: str, labels: list[str], lo: list[int], hi: list[int], starts: list[int]) -> Stream:
    ids = np.fromiter((label_id(t) for t in labels), dtype=np.uint64, count=len(labels))
    return Stream(mode, ids, np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64), starts)


def ast_stream(units: list[Unit]) -> Stream | None:
    """The AST stream of all units, or None when one of them does not parse."""
    labels: list[str] = []
    lo: list[int] = []
    hi: list[int] = []
    starts: list[int] = []
    for unit in units:
        try:
            tree = ast.parse(unit.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        builder = _Builder(unit.offset)
        builder.module(tree)
        starts.extend(len(labels) + s for s in builder.starts)
        labels += builder.labels
        lo += builder.lo
        hi += builder.hi
    return _stream("ast", labels, lo, hi, starts)


def _raw_tokens(text: str) -> list[tokenize.TokenInfo]:
    """As many tokens as tokenize reads before an error (a broken file is still compared)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            out.append(tok)
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return out


_DROPPED = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
# Python 3.12 splits f-strings into parts; they stand for one string literal, as on 3.11.
_FSTRING = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)}
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)


def token_stream(units: list[Unit]) -> Stream:
    """The token-level stream: for files that do not parse (and whatever they are compared with)."""
    labels: list[str] = []
    lo: list[int] = []
    hi: list[int] = []
    starts: list[int] = []
    for unit in units:
        previous, first = "", True
        for tok in _raw_tokens(unit.text):
            if tok.type in _DROPPED or (tok.type in _FSTRING and tok.type != _FSTRING_START):
                continue
            if tok.type == tokenize.NAME and keyword.iskeyword(tok.string):
                label = tok.string
            elif tok.type == tokenize.NAME:
                label = "." + tok.string if previous == "." else "Name"
            elif tok.type == tokenize.NUMBER:
                label = "Num"
            elif tok.type == tokenize.STRING or tok.type in _FSTRING:
                label = "Str"
            else:
                label = tok.string
            previous = tok.string
            if label == ".":
                continue  # folded into the attribute's label, as in the AST stream
            if label in ("def", "class") or first:
                starts.append(len(labels))
                first = False
            labels.append(label)
            lo.append(tok.start[0] + unit.offset)
            hi.append(tok.end[0] + unit.offset)
    return _stream("tokens", labels, lo, hi, starts)
