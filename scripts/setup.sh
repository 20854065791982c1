#!/usr/bin/env bash
# Creates .venv and installs mlaperf into it from the lock (constraints/py311-cpu.txt: the versions the
# test suite passed with; refresh with `bash scripts/lock.sh`). `scripts/setup.sh dev` adds the test tools,
# `scripts/setup.sh postgres` the PostgreSQL driver.
# On a machine whose python3 already has a CUDA build of torch (a GPU runner), the venv sees it
# (--system-site-packages) and the lock's torch, triton and nvidia-* lines are left out, so the runner keeps
# its own CUDA torch; elsewhere the venv gets the lock's CPU build of torch.
# `scripts/setup.sh --hashed [EXTRAS]` (the workflows' runners and hosted jobs) installs every locked
# package from constraints/py311-cpu.hashes.txt with pip --require-hashes --no-deps (a file whose hash
# differs is refused), then mlaperf itself with --no-deps; that lock holds the dev and postgres extras.
# `--hashed --no-torch` leaves torch and triton out (the GitHub-hosted jobs render and alert without them).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
HASHED=""
NO_TORCH=""
while [[ "${1:-}" == --hashed || "${1:-}" == --no-torch ]]; do
  [[ "$1" == --hashed ]] && HASHED=constraints/py311-cpu.hashes.txt || NO_TORCH=1
  shift
done
if [[ -n "$NO_TORCH" && -z "$HASHED" ]]; then echo "setup: --no-torch goes with --hashed" >&2; exit 2; fi
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
SOURCE="${HASHED:-$LOCK}"
if [[ -n "$NO_TORCH" ]] || .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
  grep -viE '^(torch|triton|nvidia-|cuda-)' "$SOURCE" > "$CONSTRAINTS"  # keep the runner's CUDA stack
else
  cp "$SOURCE" "$CONSTRAINTS"
fi
if [[ -n "$HASHED" ]]; then
  echo "setup: installing the locked packages, each checked against its hash ($HASHED)"
  .venv/bin/python -m pip install --disable-pip-version-check -q --require-hashes --no-deps -r "$CONSTRAINTS"
  echo "setup: installing mlaperf itself (no dependency resolution: the lock above is the whole environment)"
  .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
  exit 0
fi
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q -c "$CONSTRAINTS")
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: installing torch (CPU build, from the lock)"
  "${PIP[@]}" torch
fi
echo "setup: installing mlaperf${EXTRAS:+ [$EXTRAS]} (versions from $LOCK)"
if [[ -n "$EXTRAS" ]]; then "${PIP[@]}" -e ".[$EXTRAS]"; else "${PIP[@]}" -e .; fi
