#!/usr/bin/env bash
# Reset a bare-metal pull-request runner after each job: scripts/runner-reset.sh [--dry-run]
# Install it as the runner's job-completed hook (ACTIONS_RUNNER_HOOK_JOB_COMPLETED=/path/to/runner-reset.sh in
# the runner's .env). It removes what a pull request's code could have left for the next job as the runner
# user: everything in $HOME but the runner's own folder (RUNNER_ROOT, default ~/actions-runner), the work
# folder's contents (RUNNER_WORK, default RUNNER_ROOT/_work), and the user's files in RESET_TMP_DIRS
# (default "/tmp /dev/shm"). The next job's first step fails while the marker .mlaperf-pr-job is still in $HOME, so a reset
# that did not run is noticed. A fresh VM or the container job (docs/security.md) is safer still: this
# cannot undo what a job did outside the user's files. Exit 0 reset, 2 bad usage or a refused folder.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; --dry-run|"") ;; *) exit 2 ;; esac
dry="${1:-}"
home="${HOME:?}"
runner_root="${RUNNER_ROOT:-$home/actions-runner}"
work="${RUNNER_WORK:-$runner_root/_work}"
if [[ "$home" == "/" || "$home" == "/root" && "$(id -u)" != 0 ]]; then echo "runner-reset: refusing HOME=$home" >&2; exit 2; fi
remove() { if [[ -n "$dry" ]]; then echo "would remove $1"; else rm -rf -- "$1"; fi; }
shopt -s dotglob nullglob
for entry in "$home"/*; do
  [[ "$entry" == "$runner_root" ]] && continue
  remove "$entry"
done
if [[ -d "$work" ]]; then for entry in "$work"/*; do remove "$entry"; done; fi
read -r -a tmp_dirs <<< "${RESET_TMP_DIRS:-/tmp /dev/shm}"
while IFS= read -r -d '' entry; do remove "$entry"; done < <(
  find "${tmp_dirs[@]}" -mindepth 1 -maxdepth 1 -user "$(id -u)" -print0 2>/dev/null || true)
echo "runner-reset: ${dry:+(dry run) }reset $home (kept $runner_root)"
