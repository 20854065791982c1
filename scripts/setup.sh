#!/usr/bin/env bash
# Creates .venv and installs mlaperf into it from the lock (constraints/py311-cpu.txt: the versions the
# test suite passed with; refresh with `bash scripts/lock.sh`). `scripts/setup.sh dev` adds the test tools,
# `scripts/setup.sh postgres` the PostgreSQL driver.
# On a machine whose python3 already has a CUDA build of torch (a GPU runner), the venv sees it
# (--system-site-packages) and the lock's torch, triton and nvidia-* lines are left out, so the runner keeps
# its own CUDA torch; elsewhere the venv gets the lock's CPU build of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
LOCK=constraints/py311-cpu.txt
if [[ ! -x .venv/bin/python ]]; then
  if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "setup: using the system's CUDA torch"
    "$PY" -m venv --system-site-packages .venv
  else
    "$PY" -m venv .venv
  fi
fi
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
if .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
  grep -viE '^(torch|triton|nvidia-|cuda-)' "$LOCK" > "$CONSTRAINTS"  # keep the runner's CUDA stack
else
  cp "$LOCK" "$CONSTRAINTS"
fi
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q -c "$CONSTRAINTS")
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: installing torch (CPU build, from the lock)"
  "${PIP[@]}" torch
fi
echo "setup: installing mlaperf${EXTRAS:+ [$EXTRAS]} (versions from $LOCK)"
if [[ -n "$EXTRAS" ]]; then "${PIP[@]}" -e ".[$EXTRAS]"; else "${PIP[@]}" -e .; fi
