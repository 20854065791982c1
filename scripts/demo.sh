#!/usr/bin/env bash
# Quick start, the main job: set up, ingest the bundled GPU history into the embedded SQLite store,
# benchmark this commit (GPU when present, the CPU smoke tier otherwise), detect regressions and serve
# the dashboard on the machine just measured. Extra arguments go to `mlaperf demo` (--help lists them, before
# anything is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  case "$arg" in
    -h|--help) exec "${PYTHON:-python3}" -m mlaperf.demo --help ;;  # the standard library only: no install
  esac
done
# The install prints a line every 10 seconds while pip works quietly (pip's own output is hundreds of lines).
start=$SECONDS
bash scripts/setup.sh &
setup=$!
trap 'kill "$setup" 2>/dev/null || true' INT TERM
ticks=0
while kill -0 "$setup" 2>/dev/null; do
  sleep 1
  ticks=$((ticks + 1))
  if (( ticks % 10 == 0 )) && kill -0 "$setup" 2>/dev/null; then
    echo "setup: still installing ($((SECONDS - start)) s)"
  fi
done
wait "$setup"
trap - INT TERM
echo "setup: done in $((SECONDS - start)) s"
exec .venv/bin/mlaperf demo "$@"
