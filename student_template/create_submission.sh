#!/bin/sh
# Builds submission.zip with exactly the three files the grader reads, at the zip's root:
# model_solution.py, train.py and utils.py. Uses `zip` when it is installed, else Python.
set -eu
cd "$(dirname "$0")"
FILES="model_solution.py train.py utils.py"

missing=""
for f in $FILES; do
  [ -f "$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
  echo "create_submission.sh: not building submission.zip: missing$missing (it needs model_solution.py, train.py and utils.py here)" >&2
  exit 1
fi

rm -f submission.zip
if command -v zip >/dev/null 2>&1; then
  zip -q -X submission.zip $FILES
else
  PY="${PYTHON:-}"
  if [ -z "$PY" ]; then
    if command -v python3 >/dev/null 2>&1; then PY=python3; else PY=python; fi
  fi
  "$PY" -c 'import sys, zipfile
with zipfile.ZipFile("submission.zip", "w", zipfile.ZIP_DEFLATED) as z:
    for name in sys.argv[1:]:
        z.write(name)' $FILES
fi
echo "submission.zip: $FILES"
