"""Scoring: check results to item scores (`score.py`), the charge-once policy (`upstream.py`), and
the results.json schema every report is built from (`results.py`, `schemas/`)."""
