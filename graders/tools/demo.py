"""`make demo`: build two example zips from the reference, one with a planted bug, and grade both."""

import sys
import zipfile
from pathlib import Path

from graders.cli import main
from graders.paths import REPO

# Scaling scores by sqrt(d_model) instead of sqrt(d_attention): right when n_heads == 1, so a test
# with one configuration can miss it.
PLANTED = ("math.sqrt(self.d_attention)", "math.sqrt(self.d_attention * self.n_heads)")


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    reference = REPO / "reference" / "a3"
    files = {p.name: p.read_text() for p in sorted(reference.glob("*.py"))}
    buggy = dict(files)
    buggy["model_solution.py"] = files["model_solution.py"].replace(*PLANTED)
    paths = []
    for name, content in (("reference", files), ("planted_bug", buggy)):
        path = out / f"{name}.zip"
        with zipfile.ZipFile(path, "w") as z:
            for file, text in content.items():
                z.writestr(file, text)
        paths.append(path)
    return paths


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "demo")
    sys.exit(main([*map(str, build(out)), "--out", str(out / "reports")]))
