"""What the benchmark scripts share: where the repo is, and a submission zip of a folder."""

import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def zip_folder(folder: Path, target: Path) -> Path:
    """`target`, a zip of the folder's .py files at its root (as a student uploads them)."""
    with zipfile.ZipFile(target, "w") as z:
        for f in sorted(folder.glob("*.py")):
            z.write(f, f.name)
    return target
