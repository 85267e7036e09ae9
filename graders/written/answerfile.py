"""A student's answers.yaml, read as hostile input: question id to answer, or to part id to answer.

A file that cannot be read at all (too big, not YAML, anchors, tags, not a mapping) raises
AnswersProblem; anything wrong with one answer (a list where one value belongs, LaTeX that YAML's
double quotes turned into control characters) is kept beside it, to cost that part only.
"""

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from graders.written import yamlsafe

ANSWER_CAPS = yamlsafe.Caps(max_bytes=256 << 10, max_depth=8, max_nodes=5_000)
# In double quotes YAML reads \t \f \b \n \r \v \a \e \0 as control characters: "\times" is a tab
# and "imes", "\frac" a form feed and "rac". An escaped backslash (\\times) is fine.
_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\[0abtnvfre]")
_DOUBLE_QUOTED_LATEX = (
    "is in double quotes, where YAML reads \\t, \\f, \\n, \\b... as control characters (\\times "
    "becomes a tab and 'imes'): write LaTeX without quotes, or in single quotes"
)


class AnswersProblem(Exception):
    """answers.yaml cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class Answer:
    value: object  # as YAML read it: str, int, float, bool, None (or a date...)
    line: int
    problem: str | None = None  # why it cannot be graded, e.g. a list where one value belongs
    text: str = ""  # as the student wrote it ("yes", not True; "010", not 8), for the reading and messages


@dataclass(frozen=True)
class Answers:
    source: str
    entries: dict[str, "Answer | dict[str, Answer]"]  # question id -> its answer, or part id -> answer
    lines: dict[str, int]  # question id -> the line it is on


def _kind(node: yaml.Node) -> str:
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"


def _raw(node: yaml.Node) -> str:
    """The node's text in the file, quotes and escapes as written."""
    start, end = node.start_mark, node.end_mark
    buffer = getattr(start, "buffer", None)
    return buffer[start.index : end.index] if isinstance(buffer, str) else ""


def _answer(node: yaml.Node, source: str) -> Answer:
    line = yamlsafe.line(node)
    if not isinstance(node, yaml.ScalarNode):
        return Answer(None, line, f"{_kind(node)} is not an answer: give one number or expression")
    if node.style == '"' and _ESCAPE.search(_raw(node)):
        return Answer(None, line, _DOUBLE_QUOTED_LATEX, text=node.value)
    try:
        return Answer(yamlsafe.scalar(node, source), line, text=node.value)
    except yamlsafe.YamlProblem as e:
        return Answer(None, line, str(e).removeprefix(f"{source} line {line}: "))


def read_answers(data: bytes, source: str = "answers.yaml") -> Answers:
    try:
        root = yamlsafe.compose(data, source, ANSWER_CAPS)
        if root is None:
            return Answers(source, {}, {})
        if not isinstance(root, yaml.MappingNode):
            raise AnswersProblem(
                f"{source} line {yamlsafe.line(root)}: the file must map question ids to answers, e.g. `1a: 64`"
            )
        entries: dict[str, Answer | dict[str, Answer]] = {}
        lines: dict[str, int] = {}
        for qid, (key_node, node) in yamlsafe.mapping(root, source).items():
            lines[qid] = yamlsafe.line(key_node)
            if isinstance(node, yaml.MappingNode):
                entries[qid] = {pid: _answer(v, source) for pid, (_, v) in yamlsafe.mapping(node, source).items()}
            else:
                entries[qid] = _answer(node, source)
        return Answers(source, entries, lines)
    except yamlsafe.YamlProblem as e:
        raise AnswersProblem(str(e)) from None


def load_answers(path: Path) -> Answers:
    try:
        with open(path, "rb") as fh:  # never more than the cap (plus one byte, to tell it was over)
            data = fh.read(ANSWER_CAPS.max_bytes + 1)
    except OSError as e:
        raise AnswersProblem(f"{path.name}: cannot be read ({e.strerror})") from None
    return read_answers(data, path.name)
