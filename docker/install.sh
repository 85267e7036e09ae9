#!/usr/bin/env bash
# Builds the grading environment; shared by Gradescope's setup.sh (every step) and docker/Dockerfile
# (one layer per group of steps). Run as root from the unpacked bundle (on Gradescope,
# /autograder/source). Steps, in order, all by default:
#   apt     bubblewrap (the sandbox's namespaces), Python 3.11
#   venv    a venv at $GRADER_VENV (/opt/grader-venv): outside /root, so the sandbox uid can run it
#   pip     the pinned requirements.txt, torch first from the CPU index (a plain torch is a CUDA build)
#   user    the unprivileged account at the base of the sandbox's uid range (graders/execution/sandbox.py)
#   perms   the grader's own files (hidden checks, reference) unreadable by anyone but root
#   verify  what the steps promise, checked: pinned versions, the sandbox uid runs the venv's Python
# The test suite runs `install.sh perms verify` with GRADER_VENV set to the project's venv.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${GRADER_VENV:-/opt/grader-venv}"
PYTHON="${GRADER_PYTHON:-python3.11}"
TORCH_INDEX="https://download.pytorch.org/whl/cpu"
SANDBOX_USER="grader-sandbox"

sandbox_uids() {  # "BASE SLOTS" from graders/execution/sandbox.py: the one place the range is defined
    (cd "$SRC" && "$VENV/bin/python" -I -c \
        'import sys; sys.path.insert(0, "."); from graders.execution.sandbox import UID_BASE, UID_SLOTS; print(UID_BASE, UID_SLOTS)')
}

step_apt() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends bubblewrap ca-certificates \
        "$PYTHON" "$PYTHON-venv"
    rm -rf /var/lib/apt/lists/*
}

step_venv() {
    "$PYTHON" -m venv "$VENV"
}

step_pip() {
    local torch
    torch="$(grep -E '^torch==' "$SRC/requirements.txt")"
    "$VENV/bin/python" -m pip install --no-cache-dir --index-url "$TORCH_INDEX" "$torch"
    "$VENV/bin/python" -m pip install --no-cache-dir -r "$SRC/requirements.txt"
    chmod -R a+rX "$VENV"
}

step_user() {
    local base
    read -r base _ < <(sandbox_uids)
    getent group "$SANDBOX_USER" >/dev/null || groupadd --system --gid "$base" "$SANDBOX_USER"
    getent passwd "$SANDBOX_USER" >/dev/null || useradd --system --uid "$base" --gid "$base" --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin "$SANDBOX_USER"
}

step_perms() {
    # The worker never reads these (it gets a staged copy of graders/execution/worker/); student code, as the
    # sandbox uid, must not either, even where Landlock is missing.
    chown -R root:root "$SRC"
    chmod -R go-rwx "$SRC"
    chmod 0755 "$SRC"
}

step_verify() {
    local base slots
    "$VENV/bin/python" -I - "$SRC/requirements.txt" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

assert sys.version_info >= (3, 11), f"Python {sys.version.split()[0]}: the grader needs 3.11+"
wrong = []
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line or line.startswith("-"):
        continue
    name, _, pinned = line.partition("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have is None or have.split("+")[0] != pinned:
        wrong.append(f"{name}: pinned {pinned}, installed {have}")
assert not wrong, "; ".join(wrong)
PY
    read -r base slots < <(sandbox_uids)
    # Nobody but our account may live in the range: the grader kills every process of a slot's uid.
    getent passwd | awk -F: -v lo="$base" -v hi="$((base + slots))" -v me="$SANDBOX_USER" \
        '$3 >= lo && $3 < hi && $1 != me { print "uid " $3 " (" $1 ") is in the sandbox range"; bad = 1 } END { exit bad }'
    if getent passwd "$SANDBOX_USER" >/dev/null; then
        [ "$(id -u "$SANDBOX_USER")" = "$base" ] || { echo "$SANDBOX_USER is not uid $base"; exit 1; }
    fi
    # What the worker will do without bwrap (in a container): drop to a sandbox uid, then run the
    # venv's Python with torch. Done as graders/execution/sandbox.py does it, so the two cannot disagree.
    "$VENV/bin/python" -I - "$base" "$SRC" <<'PY'
import os, subprocess, sys

uid, src = int(sys.argv[1]), sys.argv[2]

def drop():
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)

def as_uid(argv):
    try:
        return subprocess.run(argv, preexec_fn=drop, capture_output=True, cwd="/", timeout=120).returncode
    except OSError as e:
        return e

ran = as_uid([sys.executable, "-I", "-c", "import torch, numpy"])
assert ran == 0, f"the sandbox uid {uid} cannot run {sys.executable} with torch ({ran}): " \
    "its Python must be readable by every uid (not under /root)"
assert as_uid(["test", "-r", f"{src}/graders/execution/sandbox.py"]) != 0, f"the sandbox uid can read the grader's files in {src}"
PY
    command -v bwrap >/dev/null || echo "note: bwrap missing: the sandbox runs without its namespaces"
    echo "verified: $("$VENV/bin/python" -I -c 'import sys; print(sys.version.split()[0])'), sandbox uid $base, $SRC"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(apt venv pip user perms verify)
for s in "${steps[@]}"; do
    case "$s" in
        apt|venv|pip|user|perms|verify) echo "== install.sh: $s"; "step_$s" ;;
        *) echo "install.sh: unknown step $s (apt venv pip user perms verify)" >&2; exit 2 ;;
    esac
done
