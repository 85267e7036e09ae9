# Two commands do all the set-up on a fresh machine: `make test` and `make demo`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: system install test lint docs demo template clean

# bubblewrap (the sandbox's namespaces) and Chromium (the browser tests): installed if missing, or
# the exact command printed and nothing else run (scripts/system-packages, shared with .ci/run).
system:
	@scripts/system-packages

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned and by pip: a CPU build, which pip finds on the machine's disk (an
	# unpinned torch would pull a multi-GB CUDA build). uv installs everything else, torch's own
	# dependencies included, in parallel and byte-compiled; torch is byte-compiled on every core
	# (but for one Python 3.12 test file, which pip skips too). 35 s on 2 cores; pip alone took 64 s.
	$(PY) -m pip install -q --no-deps --no-compile torch==2.13.0 uv==0.13.9
	$(VENV)/bin/uv pip install -q --python $(PY) --compile-bytecode -e '.[dev]'
	$(PY) -m compileall -qq -j 0 -x py312_intrinsics "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch"
	touch $(STAMP)

install: $(STAMP)

# Two processes, a file's tests (or a group of files, tests/conftest.py's GROUPS) in one: much of a
# grade is waiting (timeouts, worker start-ups), which the other process fills.
# Bytecode written, whatever the machine's PYTHONDONTWRITEBYTECODE says: the suite starts ~140
# Python processes, each of which would otherwise compile the grader's modules again.
test: system $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n 2

# ruff (lint and format) and mypy on graders/, configured in pyproject.toml; the documentation
# site built with every warning an error (a broken link, a page missing from the nav).
lint: $(STAMP)
	$(VENV)/bin/ruff check graders
	$(VENV)/bin/ruff format --check graders
	$(VENV)/bin/mypy
	@# Not --quiet: mkdocs 1.6 then drops the warnings before --strict counts them, and passes.
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The documentation site, served at http://127.0.0.1:8000 while you edit it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# Grades the reference (full marks) and a copy with a planted bug (loses 3(a)iii's points).
demo: system $(STAMP)
	$(PY) -m graders.tools.demo demo

# Regenerates student_template/tests/data/ from reference/a3 (same bytes every run).
template: $(STAMP)
	$(PY) -m graders.tools.template student_template

clean:
	rm -rf $(VENV) demo grade-out
