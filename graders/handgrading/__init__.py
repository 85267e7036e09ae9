"""Grading by hand (`grade hand OUT`): the by-hand parts of a batch, their answers, a SQLite store
of marks and rubric items in OUT, a local web app, and sheets for staff who grade in a spreadsheet."""
