"""Intake: turn an uploaded zip (or folder) into a scratch folder of checked source files.

Nothing here runs student code. A submission that cannot be read at all is `rejected`; a
required file that is missing or does not parse is a `problem` of that file only, so the
items that do not need it are still graded.
"""

import ast
import hashlib
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from graders.intake.shell_lines import skip_shell_lines

MAX_ZIP_BYTES = 64 << 20  # the upload itself: bounds the work of reading its directory
MAX_ENTRIES = 200
MAX_FILE_BYTES = 2 << 20  # a required source file
MAX_TOTAL_BYTES = 16 << 20  # the required files together
MAX_DECLARED_BYTES = 256 << 20  # every entry together, as the headers declare them
MAX_RATIO = 100  # deflate reaches ~1000x on zeros; source code compresses 3-5x
RATIO_FLOOR = 8 << 20  # smaller entries cannot do harm whatever their ratio


@dataclass
class Intake:
    folder: Path
    sha256: str
    files: dict[str, Path] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    rejected: str | None = None


def _ignored(path: PurePosixPath) -> bool:
    return path.parts[0] == "__MACOSX" or any(p.startswith(".") for p in path.parts) or path.name == "__pycache__"


def _check_source(name: str, raw: bytes, module: bool) -> str | None:
    """Why the file cannot be used, if it cannot; only a module is parsed here (a notebook's cells
    are parsed one by one when it runs, so one broken cell costs only the answers it defines)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{name} is not valid UTF-8 text (byte {e.start})"
    if not module:
        return None
    try:
        ast.parse(text, filename=name)
    except SyntaxError as e:
        return f"{name}, line {e.lineno}: SyntaxError: {e.msg}"
    except ValueError as e:  # e.g. a NUL byte
        return f"{name} cannot be parsed: {e}"
    return None


def _without_shell_lines(name: str, raw: bytes, warnings: list[str]) -> bytes:
    """A module exported from a notebook with its `!pip` and `%magic` lines skipped, if that is all
    that stops it parsing (shell_lines.py); the file as it is otherwise."""
    try:
        skipped = skip_shell_lines(name, raw.decode("utf-8"))
    except UnicodeDecodeError:
        return raw
    if skipped is None:
        return raw
    warnings.append(skipped[1])
    return skipped[0].encode("utf-8")


def _pick(candidates: dict[str, list[PurePosixPath]], warnings: list[str]) -> dict[str, PurePosixPath]:
    """The shallowest copy of each required file, ties broken by path, so choice is deterministic."""
    chosen = {}
    for name, paths in candidates.items():
        ordered = sorted(paths, key=lambda p: (len(p.parts), str(p)))
        chosen[name] = ordered[0]
        if len(ordered) > 1:
            warnings.append(
                f"{name} appears {len(ordered)} times; graded {ordered[0]}, ignored "
                + ", ".join(str(p) for p in ordered[1:])
            )
    return chosen


def _bomb(source: Path, entries: list[zipfile.ZipInfo]) -> str | None:
    """A reason to refuse the zip from its central directory alone, before anything is inflated."""
    declared = 0
    for info in entries:
        declared += info.file_size
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            return (
                f"{source.name}: {info.filename} would expand {info.file_size // max(info.compress_size, 1)}x "
                f"to {info.file_size} bytes (a zip bomb?)"
            )
    if declared > MAX_DECLARED_BYTES:
        return (
            f"{source.name} would expand to {declared} bytes; at most {MAX_DECLARED_BYTES} are accepted "
            "(zip only your .py files)"
        )
    return None


def _from_zip(source: Path, required: tuple[str, ...], result: Intake) -> dict[str, bytes]:
    archive = _open_zip(source, result)
    if archive is None:
        return {}
    with archive:
        entries = archive.infolist()
        if reason := _refused_directory(source, entries):
            result.rejected = reason
            return {}
        chosen = _required_entries(source, entries, required, result)
        if chosen is None:
            return {}
        return _extract(source, archive, chosen, result)


def _open_zip(source: Path, result: Intake) -> zipfile.ZipFile | None:
    size = source.stat().st_size
    if size > MAX_ZIP_BYTES:
        result.rejected = (
            f"{source.name} is {size} bytes; at most {MAX_ZIP_BYTES} are accepted (zip only your .py files)"
        )
        return None
    try:
        return zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as e:
        result.rejected = f"{source.name} is not a readable zip file ({e})"
        return None


def _refused_directory(source: Path, entries: list[zipfile.ZipInfo]) -> str | None:
    """Why the zip is refused from its central directory alone (nothing inflated yet), if it is."""
    if not entries:
        return f"{source.name} is an empty zip file"
    if len(entries) > MAX_ENTRIES:
        return f"{source.name} has {len(entries)} entries; at most {MAX_ENTRIES} are accepted"
    return _bomb(source, entries)


def _required_entries(
    source: Path, entries: list[zipfile.ZipInfo], required: tuple[str, ...], result: Intake
) -> dict[str, tuple[PurePosixPath, zipfile.ZipInfo]] | None:
    """The entry picked for each required file found; None (and `result.rejected`) for an entry
    outside the folder or one that is not a regular file."""
    candidates: dict[str, list[PurePosixPath]] = {}
    infos: dict[PurePosixPath, zipfile.ZipInfo] = {}
    for info in entries:
        path = PurePosixPath(info.filename.replace("\\", "/"))
        if path.is_absolute() or ".." in path.parts:
            result.rejected = f"{source.name}: entry {info.filename!r} points outside the submission folder"
            return None
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
            result.rejected = f"{source.name}: entry {info.filename!r} is a link or device, not a file"
            return None
        if info.is_dir() or _ignored(path):
            continue
        if path.name in required:
            candidates.setdefault(path.name, []).append(path)
            infos[path] = info
    return {name: (path, infos[path]) for name, path in _pick(candidates, result.warnings).items()}


def _extract(
    source: Path, archive: zipfile.ZipFile, chosen: dict[str, tuple[PurePosixPath, zipfile.ZipInfo]], result: Intake
) -> dict[str, bytes]:
    """The chosen files' bytes, never read past the caps (headers may lie); {} when refused."""
    total = 0
    out = {}
    for name, (path, info) in chosen.items():
        if info.file_size > MAX_FILE_BYTES:
            result.problems[name] = f"{name} is {info.file_size} bytes; at most {MAX_FILE_BYTES} are accepted"
            continue
        try:
            with archive.open(info) as fh:
                raw = fh.read(MAX_FILE_BYTES + 1)  # headers may lie: never read past the cap
        except (zipfile.BadZipFile, OSError, RuntimeError, EOFError) as e:
            result.rejected = f"{source.name}: {path} cannot be extracted ({e})"
            return {}
        if len(raw) > MAX_FILE_BYTES:
            result.problems[name] = f"{name} is over {MAX_FILE_BYTES} bytes"
            continue
        total += len(raw)
        if total > MAX_TOTAL_BYTES:
            result.rejected = f"{source.name}: the files add up to over {MAX_TOTAL_BYTES} bytes"
            return {}
        out[name] = raw
    return out


def _from_folder(source: Path, required: tuple[str, ...], result: Intake) -> dict[str, bytes]:
    candidates: dict[str, list[PurePosixPath]] = {}
    for path in sorted(source.rglob("*")):
        rel = PurePosixPath(path.relative_to(source).as_posix())
        if path.name in required and not _ignored(rel) and path.is_file() and not path.is_symlink():
            candidates.setdefault(path.name, []).append(rel)
    out = {}
    for name, rel in _pick(candidates, result.warnings).items():
        size = (source / rel).stat().st_size
        if size > MAX_FILE_BYTES:
            result.problems[name] = f"{name} is {size} bytes; at most {MAX_FILE_BYTES} are accepted"
        else:
            out[name] = (source / rel).read_bytes()
    return out


def _digest(source: Path) -> str:
    h = hashlib.sha256()
    if source.is_dir():
        for path in sorted(p for p in source.rglob("*") if p.is_file() and not p.is_symlink()):
            h.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes())
    elif source.is_file():
        with source.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def take_in(
    source: Path,
    required: tuple[str, ...],
    folder: Path,
    alternatives: dict[str, tuple[str, ...]] | None = None,
    notebooks: tuple[str, ...] = (),
) -> Intake:
    """Check `source` and write its required files, and only those, into `folder`. A required
    file may come under one of its `alternatives` (A2S1.py as A2S1.ipynb); `files` maps the
    required name to the file taken, and problems are filed under the required name."""
    result = Intake(folder=folder, sha256=_digest(source) if source.exists() else "")
    if not source.exists():
        result.rejected = f"{source} does not exist"
        return result
    accepted = {name: (name, *(alternatives or {}).get(name, ())) for name in required}
    wanted = tuple(n for names in accepted.values() for n in names)
    raw_files = _from_folder(source, wanted, result) if source.is_dir() else _from_zip(source, wanted, result)
    if result.rejected:
        return result
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, names in accepted.items():
        given = [n for n in names if n in raw_files or n in result.problems]
        if len(given) > 1:
            result.warnings.append(f"{' and '.join(given)} were both submitted; graded {given[0]}")
        taken = given[0] if given else name
        if taken in result.problems:
            result.problems[name] = result.problems.pop(taken)
            continue
        if taken not in raw_files:
            either = " or ".join(names)
            result.problems[name] = f"{either} missing from the submission"
            continue
        module = taken.endswith(".py") and name not in notebooks
        raw = _without_shell_lines(taken, raw_files[taken], result.warnings) if module else raw_files[taken]
        problem = _check_source(taken, raw, module)
        if problem:
            result.problems[name] = problem
            continue
        (folder / taken).write_bytes(raw)
        result.files[name] = folder / taken
    return result
