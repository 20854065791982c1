#!/usr/bin/env bash
# Quick start, the main job: set up, ingest the bundled GPU history into the embedded SQLite store,
# benchmark this commit (GPU when present, the CPU smoke tier otherwise), detect regressions and serve
# the dashboard. Extra arguments go to `mlaperf demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/mlaperf demo "$@"
