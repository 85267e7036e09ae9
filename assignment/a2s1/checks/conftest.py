"""Hidden checks for A2S1. The `grade` fixture and the Hypothesis profile come from
graders.checks.session.GradePlugin."""

import pytest

import a2s1_checklib


@pytest.fixture
def nb(grade) -> a2s1_checklib.A2S1:
    return a2s1_checklib.A2S1(grade)
