"""YAML that may be hostile, read without surprises: size, depth and node caps, no anchors,
aliases or tags, no duplicate keys, and every problem tied to its line.

The events are scanned before anything is composed: an alias bomb ("billion laughs") is refused at
its first `&anchor`, before PyYAML would build (or a walk would expand) a single shared node, and a
deep nesting is refused at the level past the cap, before the composer's recursion sees it.
"""

from dataclasses import dataclass
from typing import cast

import yaml
from yaml.constructor import SafeConstructor


class YamlProblem(ValueError):
    """The file cannot be read; the message names the file and, where one applies, the line."""


@dataclass(frozen=True)
class Caps:
    max_bytes: int
    max_depth: int
    max_nodes: int


def _problem(source: str, message: str, line: int | None = None) -> YamlProblem:
    return YamlProblem(f"{source}{f' line {line}' if line else ''}: {message}")


def _scan(text: str, source: str, caps: Caps) -> None:
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = cast(yaml.Mark, event.start_mark).line + 1  # the parser marks every event
            if isinstance(event, yaml.AliasEvent):
                raise _problem(source, f"YAML aliases (*{event.anchor}) are not accepted", line)
            if isinstance(event, yaml.NodeEvent):
                if event.anchor is not None:
                    raise _problem(source, f"YAML anchors (&{event.anchor}) are not accepted", line)
                # A plain or quoted scalar and an untagged collection carry no tag; anything else
                # (!!python/object, !!binary, !custom, even `!`) asks for a type we never build.
                tag = getattr(event, "tag", None)
                if tag is not None:
                    tag = tag.replace("tag:yaml.org,2002:", "!!")
                    raise _problem(source, f"YAML tags ({tag}) are not accepted", line)
                nodes += 1
                if nodes > caps.max_nodes:
                    raise _problem(source, f"more than {caps.max_nodes} values", line)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > caps.max_depth:
                    raise _problem(source, f"nested more than {caps.max_depth} levels deep", line)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise _problem(source, f"not valid YAML: {e.problem or e.context}", mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:
        raise _problem(source, f"not valid YAML: {e}") from None


def compose(data: bytes, source: str, caps: Caps) -> yaml.Node | None:
    """The document's node tree (None for an empty file), after every check above."""
    if len(data) > caps.max_bytes:
        raise _problem(source, f"{len(data)} bytes, more than the {caps.max_bytes} accepted")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _problem(source, f"not UTF-8 text (byte {e.start})") from None
    _scan(text, source, caps)
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:  # e.g. two documents in one file
        mark = getattr(e, "problem_mark", None)
        raise _problem(
            source, f"not valid YAML: {getattr(e, 'problem', None) or e}", mark.line + 1 if mark else None
        ) from None


def line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


_LONGEST_NUMBER = 100  # characters: Python refuses to parse ints past 4300 digits with a ValueError


def scalar(node: yaml.ScalarNode, source: str) -> object:
    if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and len(node.value) > _LONGEST_NUMBER:
        raise _problem(source, f"a number of {len(node.value)} characters is too long to read", line(node))
    # PyYAML's YAML 1.1 scalars (int, float, bool, null, timestamp, str); tags were refused above, so
    # this constructs only what the resolver inferred from plain text. A fresh constructor each
    # time: one keeps every node it built.
    try:
        return SafeConstructor().construct_object(node)
    except (ValueError, yaml.YAMLError) as e:
        raise _problem(source, f"cannot read {node.value[:40]!r}: {e}", line(node)) from None


def mapping(node: yaml.MappingNode, source: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """Key text (as written: `1:` is the id "1", not the number) to (key node, value node)."""
    out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            raise _problem(source, "a key must be plain text", line(key))
        if key.value in out:
            raise _problem(source, f"{key.value!r} appears twice (first on line {line(out[key.value][0])})", line(key))
        out[key.value] = (key, value)
    return out


def plain(node: yaml.Node | None, source: str) -> object:
    """The whole tree as dicts, lists and scalars."""
    if node is None:
        return None
    if isinstance(node, yaml.MappingNode):
        return {k: plain(v, source) for k, (_, v) in mapping(node, source).items()}
    if isinstance(node, yaml.SequenceNode):
        return [plain(v, source) for v in node.value]
    return scalar(cast(yaml.ScalarNode, node), source)  # a composed node that is no collection


def line_at(root: yaml.Node | None, loc: tuple) -> int | None:
    """The line of the value at a pydantic error location (e.g. ('questions', 2, 'points')), or
    of the deepest part of it that exists."""
    node, found = root, None
    for step in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            match = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == step), None)
            if match is None:
                break
            found, node = line(match[0]), match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = node.value[step]
            found = line(node)
        else:
            break
    return found if found is not None else (line(root) if root is not None else None)
