"""Written answers: a TA's key (key.py) with claims checked in the worker (keycheck.py), a
student's answers.yaml read as hostile input (answers.py, yamlsafe.py), and expressions parsed
without eval and compared by sympy (expressions.py)."""
