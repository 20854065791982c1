#!/usr/bin/env bash
# Reset a bare-metal pull-request runner after each job: scripts/runner-reset.sh [--dry-run]
# Install it root-owned (a job must not be able to edit it) as the runner's job-completed hook
# (ACTIONS_RUNNER_HOOK_JOB_COMPLETED=/path/to/runner-reset.sh in the runner's .env). As the runner user it:
# 1. kills every process of that user but itself and its ancestors (the runner's Listener and Worker): a job's
#    daemon leaves its process group and session (setsid, double fork) but not its user (RESET_KILL=0: skip);
# 2. compares the runner's folder (RUNNER_ROOT, default ~/actions-runner; _work, _diag, registration aside) with a
#    root-owned pristine copy when RUNNER_PRISTINE names one: a difference leaves the marker (below) and exits 1,
#    as does a process that outlived the kill;
# 3. removes everything in $HOME but RUNNER_ROOT, the work folder's contents (RUNNER_WORK, default
#    RUNNER_ROOT/_work) and the user's files in RESET_TMP_DIRS (default "/tmp /dev/shm").
# The next job's first step fails while the marker .mlaperf-pr-job is in $HOME, so a reset that did not run is
# noticed. RUNNER_ROOT stays writable by jobs (the runner needs it): only a root-owned restore before each start
# (docs/admin.md) undoes a change there. Settings: a root-owned runner-reset.conf beside this script (KEY=value
# lines of HOME, RUNNER_ROOT, RUNNER_WORK, RUNNER_PRISTINE, RESET_KILL, RESET_TMP_DIRS; HOME defaults to the
# user's home in the password database), and then the environment's are ignored (a job can set the hook's
# environment through $GITHUB_ENV); without the file, the environment's.
# Exit 0 reset, 1 runner folder changed or a process survived, 2 refused.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; --dry-run|"") ;; *) exit 2 ;; esac
dry="${1:-}"
conf="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/runner-reset.conf"
if [[ -e "$conf" ]]; then
  # Only root may have written it: owned by root, writable by no one else.
  if [[ "$(stat -c '%u' "$conf")" != 0 || -n "$(find "$conf" -maxdepth 0 -perm /022)" ]]; then
    echo "runner-reset: refusing $conf: not root-owned, or writable by group or others" >&2; exit 2
  fi
  unset HOME RUNNER_ROOT RUNNER_WORK RUNNER_PRISTINE RESET_KILL RESET_TMP_DIRS
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
    if [[ ! "$line" =~ ^(HOME|RUNNER_ROOT|RUNNER_WORK|RUNNER_PRISTINE|RESET_KILL|RESET_TMP_DIRS)=(.*)$ ]]; then
      echo "runner-reset: $conf: not a KEY=value line of a known setting: $line" >&2; exit 2
    fi
    printf -v "${BASH_REMATCH[1]}" '%s' "${BASH_REMATCH[2]}"  # a value, never evaluated
  done < "$conf"
  HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
fi
home="${HOME:?}"
uid="$(id -u)"
runner_root="${RUNNER_ROOT:-$home/actions-runner}"
work="${RUNNER_WORK:-$runner_root/_work}"
if [[ "$home" == "/" || "$home" == "/root" && "$uid" != 0 ]]; then echo "runner-reset: refusing HOME=$home" >&2; exit 2; fi
status=0

# 1. Leftover processes. Kept: this shell and its ancestors, read before any scan.
declare -A keep=()
pid=$$
while [[ "$pid" =~ ^[0-9]+$ ]] && (( pid > 1 )); do
  keep[$pid]=1
  pid="$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null || true)"
done
leftovers() {  # fills `left`: live processes of this user not kept (bash builtins only: the scan starts no process)
  left=()
  local dir key value state owner
  for dir in /proc/[0-9]*; do
    [[ -n "${keep[${dir#/proc/}]:-}" ]] && continue
    state="" owner=""
    { while read -r key value _; do
        case "$key" in State:) state="$value" ;; Uid:) owner="$value"; break ;; esac
      done < "$dir/status"; } 2>/dev/null || continue
    [[ "$owner" == "$uid" && "$state" != Z ]] && left+=("${dir#/proc/}")
  done
  return 0
}
if [[ "${RESET_KILL:-1}" == 0 ]]; then
  echo "runner-reset: RESET_KILL=0: no process killed"
elif [[ "$uid" == 0 ]]; then
  echo "runner-reset: running as root: no process killed (a runner user is never root)" >&2
else
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    leftovers
    (( ${#left[@]} )) || break
    if [[ -n "$dry" ]]; then echo "would kill ${left[*]}"; break; fi
    kill -STOP "${left[@]}" 2>/dev/null || true  # frozen first, so none forks while the others die
    kill -KILL "${left[@]}" 2>/dev/null || true
    sleep 0.2
  done
  if [[ -z "$dry" ]]; then
    leftovers
    if (( ${#left[@]} )); then echo "::error::runner-reset: processes survived: ${left[*]}" >&2; status=1; fi
  fi
fi

# 2. The runner's own folder against the root-owned pristine copy.
tainted=""
if [[ -n "${RUNNER_PRISTINE:-}" ]]; then
  # The registration files change with every ephemeral registration; bin/, .env (the hook) and .path do not.
  if ! changed="$(diff -rq --no-dereference -x _work -x _diag -x .runner -x .credentials -x .credentials_rsaparams \
      "$RUNNER_PRISTINE" "$runner_root" 2>&1)"; then
    echo "::error::runner-reset: $runner_root differs from $RUNNER_PRISTINE (restore it as root): $(head -c 2000 <<< "$changed")" >&2
    tainted=1
    status=1
  fi
fi

# 3. Files.
remove() { if [[ -n "$dry" ]]; then echo "would remove $1"; else rm -rf -- "$1"; fi; }
shopt -s dotglob nullglob
for entry in "$home"/*; do
  [[ "$entry" == "$runner_root" ]] && continue
  remove "$entry"
done
if [[ -d "$work" ]]; then for entry in "$work"/*; do remove "$entry"; done; fi
read -r -a tmp_dirs <<< "${RESET_TMP_DIRS:-/tmp /dev/shm}"
while IFS= read -r -d '' entry; do remove "$entry"; done < <(
  find "${tmp_dirs[@]}" -mindepth 1 -maxdepth 1 -user "$uid" -print0 2>/dev/null || true)
# A changed runner folder or a process that outlived the kill: the next job stops at its first step.
if [[ ( -n "$tainted" || "$status" != 0 ) && -z "$dry" ]]; then echo 0 > "$home/.mlaperf-pr-job"; fi
echo "runner-reset: ${dry:+(dry run) }reset $home (kept $runner_root)${tainted:+; runner folder CHANGED}"
exit "$status"
