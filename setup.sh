#!/usr/bin/env bash
# Set up zoo on a machine with Python >= 3.11 and pip.
#   ./setup.sh        install zoo (a plain, non-editable install)
#   ./setup.sh dev    install zoo editable with the test tools and the Ray executor
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
# Outside a virtual environment (venv, virtualenv or conda) pip installs into that Python's own site-packages.
if ! "$PY" -c 'import os, sys; sys.exit(sys.prefix == sys.base_prefix and "CONDA_PREFIX" not in os.environ)'; then
  echo "setup.sh: warning: no virtual environment is active, so zoo installs into $("$PY" -c 'import sys; print(sys.prefix)');" \
       "to keep it apart: python3 -m venv .venv && . .venv/bin/activate, then ./setup.sh again" >&2
fi
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
