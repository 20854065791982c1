#!/usr/bin/env bash
# A pull request's benchmark report: scripts/pr.sh BASE HEAD
# Measures BASE and HEAD with asv (a failing benchmark does not stop it), ingests both into a store local
# to this run (PR commits are not history), and writes into MLAPERF_PR_DIR (default artifacts/pr):
# report.json and the raw results (what the workflow hands on: the comment is rendered from report.json by
# the default branch, docs/security.md), report.md and report-full.md (local previews). Runs in the current
# directory (the checkout); pr-benchmarks.yml and tests/ops/test_loop.py call it. MLAPERF_MACHINE etc.
# Exit status: 0 no regression, 1 regression or a benchmark failed on head or base, 2 bad usage or input,
# 3 internal error.
set -euo pipefail
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
if [[ $# -ne 2 || -z "$1" || -z "$2" ]]; then usage >&2; exit 2; fi
MLAPERF="${MLAPERF:-$( [[ -x .venv/bin/mlaperf ]] && echo .venv/bin/mlaperf || echo mlaperf )}"
OUT="${MLAPERF_PR_DIR:-artifacts/pr}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/results" "$OUT/pr.sqlite" "$OUT/report.md" "$OUT/report-full.md" "$OUT/report.json"
export MLAPERF_DB="sqlite:///$OUT/pr.sqlite"
target=(--tier "${MLAPERF_RUN_TIER:-auto}")
if [[ -n "${MLAPERF_MACHINE:-}" ]]; then target+=(--machine "$MLAPERF_MACHINE"); fi

failed=()
for side in base head; do
  sha="$1"; [[ "$side" == head ]] && sha="$2"
  rc=0
  "$MLAPERF" run "$sha" --db none --results-dir "$OUT/results" "${target[@]}" || rc=$?
  if (( rc > 1 )); then exit "$rc"; fi
  if (( rc == 1 )); then failed+=("$side"); fi
done
if [[ -d "$OUT/results" ]]; then "$MLAPERF" ingest "$OUT/results" --repo . --quiet; fi

status=0
"$MLAPERF" compare "$1" "$2" --whole-suite --markdown-out "$OUT/report.md" --full-markdown-out "$OUT/report-full.md" \
  --json-out "$OUT/report.json" > /dev/null || status=$?
if [[ ! -s "$OUT/report.md" && ${#failed[@]} -gt 0 ]]; then
  # No comparison at all: a side produced no result (its suite did not run). Say so instead of staying silent.
  # No comment marker here: the workflow's report job puts it in front of any report that lacks it.
  printf '## mlaperf benchmarks: failed\n\nThe benchmarks produced no result at %s (`%s` .. `%s`): the suite failed to run. See the job log and the artifact.\n' \
    "${failed[*]}" "${1:0:10}" "${2:0:10}" > "$OUT/report.md"
  status=1
fi
echo "pr: exit $status ($OUT/report.md)"
exit "$status"
