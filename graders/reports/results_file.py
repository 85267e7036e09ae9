"""results.json on disk: the one file every other report is rendered from."""

from pathlib import Path

from graders.scoring.results import Results


def write_results(results: Results, out: Path) -> Path:
    """OUT/results.json (OUT made if need be); its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(results.model_dump_json(indent=2) + "\n")
    return path
