"""Checks: the hidden checks run under pytest on the trusted side (`session.py`), and what they
import: failures and comparisons (`checking.py`, `vacuous.py`), the staff reference, synthetic
data, and notebooks run cell by cell."""
