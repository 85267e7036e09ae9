"""Hidden checks for A3. The `grade` fixture and the Hypothesis profile come from
graders.checks.session.GradePlugin."""

import pytest

import a3_checklib


@pytest.fixture
def a3(grade) -> a3_checklib.A3:
    return a3_checklib.A3(grade)


@pytest.fixture(scope="session", autouse=True)
def training_ahead(grade, request):
    """3(b)iii's run starts before the first check, in the spare worker when there is one."""
    if "train.py" not in grade.broken and any(i.name.startswith("test_training") for i in request.session.items):
        a3_checklib.start_training(grade)
