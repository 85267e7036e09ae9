"""Intake: what comes from the student's side, taken in as data before anything runs (the
submission's zip or folder; the training plot its code writes)."""
