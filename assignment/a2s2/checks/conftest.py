"""Hidden checks for A2S2. The `grade` fixture and the Hypothesis profile come from
graders.checks.session.GradePlugin."""

import pytest

import a2s2_checklib


@pytest.fixture
def nb(grade, request) -> a2s2_checklib.A2S2:
    """The notebook as the check's item sees it: at the end of the cell of the name the item runs."""
    item = grade.spec.check_item().get(request.node.originalname.removeprefix("test_"))
    runs = item.runs if item is not None else None
    return a2s2_checklib.A2S2(grade, runs.split(".")[0] if runs else None)
