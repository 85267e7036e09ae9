"""An autograder for transformer programming assignments."""

__version__ = "0.2.0"
