"""mkdocs hooks (mkdocs.yml `hooks:`): the reference pages generated from the code at every build
(graders/tools/reference_docs.py), and the changelog, from CHANGELOG.md at the repository's root."""

from typing import Any

from mkdocs.structure.files import File, Files

from graders.paths import REPO
from graders.tools.reference_docs import cli_reference, results_reference, spec_reference


def generated_pages() -> dict[str, str]:
    """The generated pages by their path in the site's source."""
    return {
        "reference/cli.md": cli_reference(),
        "reference/spec.md": spec_reference(),
        "reference/results.md": results_reference(),
        "changelog.md": (REPO / "CHANGELOG.md").read_text(encoding="utf-8"),
    }


def on_files(files: Files, config: Any) -> Files:
    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    return files
