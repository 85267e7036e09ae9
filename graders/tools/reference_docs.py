"""The documentation site's reference pages, generated from the code they describe: every `grade`
subcommand's options from its argparse parser, the spec.toml format and results.json from their
pydantic models. mkdocs builds them on every build (graders/tools/mkdocs_hooks.py), so they cannot
drift from the code."""

import argparse
import importlib
import inspect
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from graders.cli import SUBCOMMANDS


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    return ", ".join(f"`{flag}`" for flag in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, [], argparse.SUPPRESS) or action.required:
        return "required" if action.required else ""
    return f"`{action.default}`"


def parser_page(title: str, parser: argparse.ArgumentParser) -> str:
    """One command: its usage and a table of its arguments (argument groups after the rest)."""
    usage = parser.format_usage().removeprefix("usage: ").strip()
    lines = [f"## `{title}`", "", parser.description or "", "", "```", usage, "```", ""]
    lines += ["| argument | default | what |", "| --- | --- | --- |"]
    for action in parser._actions:  # argparse has no public list of its arguments
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        what = action.help or ""
        if action.choices:
            what += f" (one of: {', '.join(map(str, action.choices))})"
        lines.append(f"| {_flags(action)} | {_default(action)} | {_cell(what)} |")
    return "\n".join(lines) + "\n"


def cli_reference() -> str:
    """Every `grade` command, from the parser each command module exposes as `parser()`."""
    parts = [
        "# The `grade` command",
        "",
        "Generated from the commands' own parsers (`graders/commands/`, `graders/written/keycheck.py`). "
        "`grade SUBMISSION...` grades; `grade SUBCOMMAND ...` runs a subcommand.",
        "",
    ]
    modules = {"grade": "graders.commands.grade", **{f"grade {k}": v for k, v in SUBCOMMANDS.items()}}
    for title, name in modules.items():
        parts.append(parser_page(title, importlib.import_module(name).parser()))
    return "\n".join(parts)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation) if a is not Ellipsis)
        return f"{getattr(origin, '__name__', str(origin))} of {args}"
    if annotation is type(None):
        return "none"
    return getattr(annotation, "__name__", str(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _field_default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    default = field.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return f"its own defaults (`{type(default).__name__}`, below)"
    return f"`{default!r}`"


def model_page(title: str, root: type[BaseModel], intro: str) -> str:
    """`root` and every model it holds, a table each: field, type, default, description."""
    lines, seen, todo = [f"# {title}", "", intro, ""], set(), [root]
    while todo:
        model = todo.pop(0)
        if model in seen:
            continue
        seen.add(model)
        lines += [f"## `{model.__name__}`", "", inspect.cleandoc(model.__doc__ or "").split("\n\n")[0], ""]
        lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            lines.append(
                f"| `{name}` | {_type_name(field.annotation)} | {_cell(_field_default(field))} "
                f"| {_cell(field.description or '')} |"
            )
            todo += _models_in(field.annotation)
        lines.append("")
    return "\n".join(lines)


def spec_reference() -> str:
    from graders.spec import Spec

    return model_page(
        "The assignment spec (`spec.toml`)",
        Spec,
        "Each assignment's `assignment/NAME/spec.toml`, validated by these pydantic models (`graders/spec.py`): "
        "a spec with an unknown or invalid field fails to load, naming it. Generated from the models.",
    )


def results_reference() -> str:
    from graders.scoring.results import Results

    return model_page(
        "`results.json`",
        Results,
        "What every grade writes (`OUT/results.json`, or `OUT/<student>/results.json` in a batch), by the models of "
        "`graders/scoring/results.py`; its JSON Schema is `graders/scoring/schemas/results.schema.json`. "
        "Generated from the models.",
    )
