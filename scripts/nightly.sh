#!/usr/bin/env bash
# The nightly service, one step per call. .github/workflows/nightly.yml runs each step in its own workflow
# step (so each gets only the secret it needs), `measure` in jobs of its own that hold no secret, and
# tests/ops/test_loop.py runs the same steps.
#
#   scripts/nightly.sh detect          store -> regressions.json (the state before tonight's runs)
#   scripts/nightly.sh plan ROUND      store -> plan-ROUND.txt: confirmations, gap bisection, newest unmeasured
#                                      (and the table of open regressions)
#   scripts/nightly.sh measure ROUND   plan -> results-ROUND/ with asv (no store access)
#   scripts/nightly.sh record ROUND    results-ROUND/ -> store, then detection -> regressions.json
#   scripts/nightly.sh alert           regressions.json -> GitHub issues (GITHUB_TOKEN: issues write only)
#
# Runs in the current directory: the checkout whose commits are measured.
# Round 1 keeps part of the budget for round 2, which confirms tonight's suspect steps before alerting.
# Environment: MLAPERF_NIGHT_DIR (default artifacts/nightly; fresh each night), MLAPERF_NIGHT_BUDGET (commits
# a night, default 20), MLAPERF_MACHINE (asv machine name), MLAPERF_RUN_TIER (auto|gpu|cpu), MLAPERF_DB (the
# store; detect, plan, record). Exit status: 0 ok, 1 (alert) a new confirmed regression opened an issue,
# 2 bad usage or input, 3 internal error.
set -euo pipefail
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
MLAPERF="${MLAPERF:-$( [[ -x .venv/bin/mlaperf ]] && echo .venv/bin/mlaperf || echo mlaperf )}"
NIGHT="${MLAPERF_NIGHT_DIR:-artifacts/nightly}"
step="${1:-}"
round="${2:-1}"
case "$step" in -h|--help) usage; exit 0 ;; "") usage >&2; exit 2 ;; esac
if [[ ! "$round" =~ ^[12]$ ]]; then echo "nightly.sh: ROUND must be 1 or 2, got '$round'" >&2; exit 2; fi
mkdir -p "$NIGHT"
target=(--tier "${MLAPERF_RUN_TIER:-auto}")
if [[ -n "${MLAPERF_MACHINE:-}" ]]; then target+=(--machine "$MLAPERF_MACHINE"); fi

case "$step" in
  detect)
    # The first night creates the store (detect refuses a missing one, so elsewhere a mistyped URL fails
    # instead of passing); a store at an older schema is left for the admin's `mlaperf db upgrade`.
    if "$MLAPERF" db current | grep -q '^none'; then "$MLAPERF" db upgrade >/dev/null; fi
    "$MLAPERF" detect --json --all > "$NIGHT/regressions.json"
    ;;
  plan)
    "$MLAPERF" nightly plan --round "$round" --regressions "$NIGHT/regressions.json" \
      --state "$NIGHT/state.json" --out "$NIGHT/plan-$round.txt" "${target[@]}"
    ;;
  measure)
    mapfile -t commits < "$NIGHT/plan-$round.txt"
    if (( ${#commits[@]} == 0 )); then echo "nightly: round $round has nothing to measure"; exit 0; fi
    rc=0
    env -u MLAPERF_DB "$MLAPERF" run "${commits[@]}" --db none --results-dir "$NIGHT/results-$round" \
      "${target[@]}" || rc=$?
    # 1: a benchmark failed at some commit; its failed results are stored like the others, the night goes on.
    if (( rc > 1 )); then exit "$rc"; fi
    ;;
  record)
    if [[ ! -d "$NIGHT/results-$round" ]]; then echo "nightly: round $round measured nothing"; exit 0; fi
    # Only what was planned, on this machine: the measure job ran the measured commits' code, which can leave any
    # file in results-ROUND. A refused file (2) is named and never stored; the planned ones are, and the night goes
    # on (detection, round 2, the issues) with an error annotation on the run. Anything else stops the step.
    machine="$("$MLAPERF" nightly machine "${target[@]}")"
    rc=0
    "$MLAPERF" ingest "$NIGHT/results-$round" --repo . --only-commits "$NIGHT/plan-$round.txt" \
      --only-machine "$machine" || rc=$?
    if (( rc == 2 )); then
      echo "::error::nightly: round $round: the results files named REFUSED above were not stored (not planned" \
        "tonight, another machine's, or not valid asv output); the others were, and the night goes on"
    elif (( rc != 0 )); then
      exit "$rc"
    fi
    "$MLAPERF" detect --json --all > "$NIGHT/regressions.json"
    ;;
  alert)
    "$MLAPERF" nightly alert --regressions "$NIGHT/regressions.json" --plan-out "$NIGHT/issues-plan.json"
    ;;
  *)
    echo "nightly.sh: unknown step '$step'" >&2; usage >&2; exit 2
    ;;
esac
