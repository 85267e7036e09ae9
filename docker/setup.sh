#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image: every step of install.sh.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/install.sh" "$@"
