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
# Its own process group (job control on for this one start): an interrupt stops pip as well, not only the
# setup shell (a background job of a script ignores SIGINT, so pip would go on installing alone).
set -m
bash scripts/setup.sh &
setup=$!
set +m
stop() { kill -TERM -- -"$setup" 2>/dev/null || true; wait "$setup" 2>/dev/null || true; exit "$1"; }
trap 'stop 130' INT
trap 'stop 143' TERM
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
