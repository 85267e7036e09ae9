"""Hidden checks for A3. The `grade` fixture and the Hypothesis profile come from
graders.runner.GradePlugin."""

import pytest

import a3_checklib


@pytest.fixture
def a3(grade) -> a3_checklib.A3:
    return a3_checklib.A3(grade)
