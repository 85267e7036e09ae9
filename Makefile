# Two commands do all the set-up on a fresh machine: `make test` and `make demo`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint demo template clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first and pinned: a CPU build; an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Two processes, a file's tests (or a group of files, tests/conftest.py's GROUPS) in one: much of a
# grade is waiting (timeouts, worker start-ups), which the other process fills.
test: $(STAMP)
	$(PY) -m pytest -q -n 2

# ruff (lint and format) and mypy on graders/, configured in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check graders
	$(VENV)/bin/ruff format --check graders
	$(VENV)/bin/mypy

# Grades the reference (full marks) and a copy with a planted bug (loses 3(a)iii's points).
demo: $(STAMP)
	$(PY) -m graders.tools.demo demo

# Regenerates student_template/tests/data/ from reference/a3 (same bytes every run).
template: $(STAMP)
	$(PY) -m graders.tools.template student_template

clean:
	rm -rf $(VENV) demo grade-out
