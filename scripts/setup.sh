#!/usr/bin/env bash
# Creates .venv and installs mlaperf into it. `scripts/setup.sh dev` adds the test tools.
# On a machine whose python3 already has a CUDA build of torch (a GPU runner), the venv sees it
# (--system-site-packages); elsewhere it gets the CPU build pinned below.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "setup: using the system's CUDA torch"
    "$PY" -m venv --system-site-packages .venv
  else
    "$PY" -m venv .venv
  fi
fi
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: installing torch (CPU build)"
  "${PIP[@]}" torch==2.13.0
fi
echo "setup: installing mlaperf${EXTRAS:+ [$EXTRAS]}"
if [[ -n "$EXTRAS" ]]; then "${PIP[@]}" -e ".[$EXTRAS]"; else "${PIP[@]}" -e .; fi
