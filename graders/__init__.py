"""An autograder for transformer programming assignments."""

__version__ = "0.1.0"
