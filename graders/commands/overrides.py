"""`--limit NAME=VALUE` and `--set SECTION.NAME=VALUE`: a spec with some settings replaced,
validated as the spec file would be."""

from typing import Any

from pydantic import ValidationError

from graders.spec import Spec


def with_limits(spec: Spec, overrides: list[str]) -> Spec:
    """`--limit NAME=VALUE` is `--set limits.NAME=VALUE`."""
    return with_settings(spec, [f"limits.{text}" for text in overrides], flag="--limit")


def with_settings(spec: Spec, overrides: list[str], flag: str = "--set") -> Spec:
    """The spec with SECTION.NAME=VALUE settings replaced; a ValueError names the flag as typed."""
    data = spec.model_dump()
    shown = [o.removeprefix("limits.") if flag == "--limit" else o for o in overrides]  # as typed
    for text, typed in zip(overrides, shown, strict=True):
        path, _, value = text.partition("=")
        *parents, name = path.split(".")
        section: Any = data
        for key in parents:
            section = section.get(key) if isinstance(section, dict) else None
        if (
            not parents
            or not isinstance(section, dict)
            or name not in section
            or isinstance(section[name], (dict, list))
            or not value
        ):
            names = (
                "one of " + ", ".join(k for k, v in section.items() if not isinstance(v, (dict, list)))
                if isinstance(section, dict) and parents
                else "e.g. hypothesis.max_examples or training.max_steps"
            )
            raise ValueError(f"{flag} {typed}: expected NAME=VALUE with NAME {names}")
        section[name] = value
    try:
        return type(spec).model_validate(data)
    except ValidationError as e:
        why = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ValueError(f"{flag} {', '.join(shown)}: {why}") from None
