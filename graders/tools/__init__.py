"""Staff tools beside the grading pipeline: the demo and the student template's fixtures."""
