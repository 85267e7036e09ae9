"""`grade gradescope-bundle`: the zip Gradescope's autograder takes, also the build context of
docker/Dockerfile (`--dir`).

At its root: `setup.sh` and `run_autograder` (docker/), `install.sh`, which both setup.sh and the
Dockerfile run, `requirements.txt` (pyproject.toml's pins), and what the grader reads at grading
time: `graders/`, the assignment's spec and hidden checks, and its reference. Gradescope unpacks
it to /autograder/source/. Same inputs, same bytes: entries sorted, fixed timestamps and modes.
"""

import tomllib
import zipfile
from pathlib import Path

from graders.paths import REPO
from graders.spec import Spec

DOCKER = REPO / "docker"
SCRIPTS = ("setup.sh", "run_autograder", "install.sh")
_STAMP = (2024, 1, 1, 0, 0, 0)
_SKIP = ("__pycache__", ".pytest_cache", ".hypothesis")


def _closure(deps: list[str]) -> dict[str, str]:
    """Every distribution `deps` pull in on this machine, by name, at its installed version: the
    image gets the environment the tests passed in, not whatever is newest on the day it is built."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    todo = [(Requirement(d), "") for d in deps]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        key = canonicalize_name(req.name)
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            raise ValueError(f"{req.name} is not installed here: run make install first") from None
        for wanted in sorted(req.extras):
            todo += [(Requirement(r), wanted) for r in dist.requires or [] if "extra ==" in r]
        if key in pins:
            continue
        pins[key] = f"{dist.metadata['Name']}=={dist.version.split('+')[0]}"  # torch's +cpu: the index says which
        todo += [(Requirement(r), "") for r in dist.requires or [] if "extra ==" not in r]
    return pins


def requirements() -> str:
    """pyproject.toml's runtime dependencies, one exact pin a line (an unpinned one is refused),
    then what they pull in, pinned at the versions installed here."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    loose = [d for d in deps if "==" not in d]
    if loose:
        raise ValueError(f"pyproject.toml: not pinned to one version: {', '.join(loose)}")
    direct = {d.split("==")[0].lower() for d in deps}
    pulled = sorted(pin for key, pin in _closure(deps).items() if key not in direct)
    return (
        "# pyproject.toml's pins (install.sh installs torch first, from the CPU index)\n"
        + "\n".join(deps)
        + "\n# what they pull in, as installed where the tests passed\n"
        + "\n".join(pulled)
        + "\n"
    )


def _tree(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part in _SKIP for part in p.parts) and p.suffix != ".pyc"
    )


def contents(spec: Spec, sandbox: str = "container") -> dict[str, tuple[bytes, int]]:
    """Every file of the bundle: its path in the bundle, its bytes and its mode; `sandbox`, the level
    run_autograder grades at (graders/execution/policy.py)."""
    files: dict[str, tuple[bytes, int]] = {}
    for name in SCRIPTS:
        text = (DOCKER / name).read_text().replace("@ASSIGNMENT@", spec.assignment).replace("@SANDBOX@", sandbox)
        files[name] = (text.encode(), 0o755)
    files["requirements.txt"] = (requirements().encode(), 0o644)
    folders = [
        REPO / "graders",
        REPO / "assignment" / spec.assignment,
        *(REPO / d for d in (spec.checks_dir, spec.reference_dir) if d),
    ]
    for folder in folders:
        for path in _tree(folder):
            files[path.relative_to(REPO).as_posix()] = (path.read_bytes(), 0o644)
    return dict(sorted(files.items()))


def write_bundle(spec: Spec, out: Path, sandbox: str = "container") -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, (data, mode) in contents(spec, sandbox).items():
            info = zipfile.ZipInfo(name, _STAMP)
            info.external_attr = (0o100000 | mode) << 16  # a regular file with these permission bits
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return out


def write_folder(spec: Spec, folder: Path, sandbox: str = "container") -> Path:
    """The same files unpacked (the Docker build context)."""
    for name, (data, mode) in contents(spec, sandbox).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    return folder
