"""Where the repository's folders are, found from this file: the one place that knows how deep
`graders/` sits in the checkout (or in the Gradescope bundle, which keeps the same layout)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENTS_DIR = REPO / "assignment"
