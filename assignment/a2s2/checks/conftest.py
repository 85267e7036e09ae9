"""Hidden checks for A2S2. The `grade` fixture and the Hypothesis profile come from
graders.checks.session.GradePlugin."""

import pytest

import a2s2_checklib


@pytest.fixture
def nb(grade) -> a2s2_checklib.A2S2:
    return a2s2_checklib.A2S2(grade)
