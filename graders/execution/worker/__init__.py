"""The worker: the only process that runs student code.

This package is copied into a private folder and run with `python -I`, so it must import nothing
of the grader beyond itself (relative imports only), and nothing the trusted side decides with.
"""
