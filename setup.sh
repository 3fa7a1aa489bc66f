#!/usr/bin/env bash
# Set up zoo on a machine with Python >= 3.11 and pip.
#   ./setup.sh        install zoo (a plain, non-editable install)
#   ./setup.sh dev    install zoo editable with the test tools and the Ray executor
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
  # Ask for the CPU build first: a bare `torch` requirement would pull a multi-GB CUDA build.
  "$PY" -m pip install --quiet --root-user-action=ignore torch==2.13.0
fi
if [ "${1:-}" = "dev" ]; then
  "$PY" -m pip install --quiet --root-user-action=ignore -e ".[dev,ray]"
else
  "$PY" -m pip install --quiet --root-user-action=ignore .
fi
# pyenv only sees new console scripts (`zoo`) after a rehash.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
