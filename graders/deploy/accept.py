"""What a grade that ran elsewhere (a container, a Dask worker) left in a staging folder, taken in as
data: results.json read with a size cap and validated by `Results`, the training plot only if it
is a PNG, and report.html rendered here from the validated results, never taken as sent."""

from pathlib import Path

from graders.intake.png import read_png
from graders.reports.html import write_report
from graders.scoring.results import Results

MAX_RESULTS_BYTES = 32 << 20


def accept_results(staging: Path, out: Path) -> Results:
    """`staging`'s results.json and plot, checked, written to `out` with a report.html rendered
    here. Raises ValueError (or OSError) when there is no usable results.json."""
    path = staging / "results.json"
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RESULTS_BYTES:
        raise ValueError("no results.json (or not a plain file under 32 MiB)")
    results = Results.model_validate_json(path.read_bytes())
    out.mkdir(parents=True, exist_ok=True)
    if results.training is not None and results.training.plot is not None:
        name = Path(results.training.plot).name
        data = read_png(staging / name) if name and not (staging / name).is_symlink() else None
        results.training.plot = name if data is not None else None
        if data is not None:
            (out / name).write_bytes(data)
    (out / "results.json").write_text(results.model_dump_json(indent=2) + "\n")
    write_report(results, out)
    return results
