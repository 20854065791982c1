#!/bin/bash
# Reset a bare-metal pull-request runner between jobs: scripts/runner-reset.sh [--dry-run]
# Install it root-owned in a root-owned folder and run it outside any job, as the runner user, from the runner
# service's first ExecStartPre (docs/admin.md): a job-completed hook runs with the job's PATH and environment
# ($GITHUB_PATH, $GITHUB_ENV), so the job picks the hook's interpreter. As the runner user it:
# 1. removes the user's crontab and at jobs, then kills every process of that user but itself and its ancestors:
#    a job's daemon leaves its process group and session, not its user (RESET_KILL=0: none of this step);
# 2. compares the runner's folder (RUNNER_ROOT, default ~/actions-runner; _work, _diag, registration aside) with a
#    root-owned pristine copy when RUNNER_PRISTINE names one: a difference leaves the marker (below) and exits 1,
#    as do a process that outlived the kill and a file it could not remove;
# 3. removes everything in $HOME but RUNNER_ROOT (which may lie deeper in $HOME), the work folder's contents
#    (RUNNER_WORK, default RUNNER_ROOT/_work) and the user's files in RESET_TMP_DIRS (default "/tmp /var/tmp
#    /dev/shm"). The next job's first step fails while the marker .mlaperf-pr-job is in $HOME, so a reset that
#    did not run or failed is noticed. RUNNER_ROOT stays writable by jobs (the runner needs it): only a root-owned
#    restore after this reset (docs/admin.md) undoes a change there. Settings: a root-owned runner-reset.conf
#    beside this script (KEY=value lines of HOME, RUNNER_ROOT, RUNNER_WORK, RUNNER_PRISTINE, RESET_KILL,
#    RESET_TMP_DIRS), and then the environment's are ignored; without the file, the environment's. PATH is always
#    the system's, and an unset or empty HOME is the user's home in the password database.
# Exit 0 reset, 1 runner folder changed, a process survived or a removal failed, 2 refused.
PATH=/usr/sbin:/usr/bin:/sbin:/bin  # never the caller's: a job prepends to it through $GITHUB_PATH
export PATH
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; --dry-run|"") ;; *) exit 2 ;; esac
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
fi
uid="$(id -u)"
# Started through `env -i` (docs/admin.md), HOME is unset: the password database's then.
HOME="${HOME:-$(getent passwd "$uid" | cut -d: -f6 || true)}"
if [[ -z "$HOME" ]]; then
  echo "runner-reset: refusing: no HOME, and none for uid $uid in the password database" >&2; exit 2
fi
# Canonical paths (no trailing slash, no symlink): the runner folder is compared with HOME's entries as a path.
home="$(realpath -m -- "$HOME")"
runner_root="$(realpath -m -- "${RUNNER_ROOT:-$home/actions-runner}")"
# The links the runner folder's configured path goes through, each as its canonical folder plus its name (an
# admin's ~/actions-runner -> ~/runners/v2, or a RUNNER_ROOT spelled through a linked folder): the only links kept.
path_links=()
walked="/"
IFS=/ read -r -a parts <<< "$(realpath -m -s -- "${RUNNER_ROOT:-$home/actions-runner}")"
for part in "${parts[@]}"; do
  [[ -n "$part" ]] || continue
  step="${walked%/}/$part"
  if [[ -L "$step" ]]; then path_links+=("$step"); fi
  walked="$(realpath -m -- "$step")"
done
path_link() {  # $1 is one of those links
  local link
  for link in "${path_links[@]}"; do [[ "$link" == "$1" ]] && return 0; done
  return 1
}
holds_path_link() {  # one of those links lies in folder $1
  local link
  for link in "${path_links[@]}"; do [[ "$link" == "$1"/* ]] && return 0; done
  return 1
}
work="$(realpath -m -- "${RUNNER_WORK:-$runner_root/_work}")"
if [[ "$home" == "/" || "$home" == "/root" && "$uid" != 0 ]]; then
  echo "runner-reset: refusing HOME=$home" >&2; exit 2
fi
if [[ "$home" == "$runner_root" || "$home" == "$runner_root"/* ]]; then
  echo "runner-reset: refusing RUNNER_ROOT=$runner_root: HOME=$home is in it" >&2; exit 2
fi
status=0
finished=""
# Whatever stops the reset after this point, the next job stops at its first step.
on_exit() {
  local rc=$?
  [[ -n "$finished" ]] || echo "::error::runner-reset: stopped early (exit $rc)" >&2
  if (( rc != 0 )) && [[ -z "$dry" ]]; then
    chmod u+rwx -- "$home" 2>/dev/null || true  # a job may have made it read-only
    echo 0 > "$home/.mlaperf-pr-job" || echo "::error::runner-reset: could not write $home/.mlaperf-pr-job" >&2
    # and in the work folder, the one a container job sees (its home is the runner's, emptied after each job)
    mkdir -p -- "$work" 2>/dev/null || true
    echo 0 > "$work/.mlaperf-pr-job" || echo "::error::runner-reset: could not write $work/.mlaperf-pr-job" >&2
  fi
}
trap on_exit EXIT

# 1. Scheduled and leftover processes. Kept: this shell and its ancestors, read before any scan.
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
unschedule() {  # cron and at start the user's processes later, after any kill: their entries go first
  local -a jobs=()
  if command -v crontab > /dev/null && crontab -l > /dev/null 2>&1; then  # fails with no crontab, or none allowed
    if [[ -n "$dry" ]]; then echo "would remove the crontab"; else crontab -r > /dev/null 2>&1 || true; fi
    if [[ -z "$dry" ]] && crontab -l > /dev/null 2>&1; then
      echo "::error::runner-reset: the crontab outlived crontab -r" >&2; status=1
    fi
  fi
  if command -v atq > /dev/null && command -v atrm > /dev/null; then
    mapfile -t jobs < <(atq 2>/dev/null | cut -f1 | grep -E '^[0-9]+$' || true)
    (( ${#jobs[@]} )) || return 0
    if [[ -n "$dry" ]]; then echo "would remove at jobs ${jobs[*]}"; return 0; fi
    atrm "${jobs[@]}" 2>/dev/null || true
    if [[ -n "$(atq 2>/dev/null || true)" ]]; then echo "::error::runner-reset: at jobs outlived atrm" >&2; status=1; fi
  fi
  return 0
}
if [[ "${RESET_KILL:-1}" == 0 ]]; then
  echo "runner-reset: RESET_KILL=0: no crontab, at job or process removed"
elif [[ "$uid" == 0 ]]; then
  echo "runner-reset: running as root: no crontab, at job or process removed (a runner user is never root)" >&2
else
  unschedule
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
  # The registration files change with every ephemeral registration; bin/, .env and .path do not.
  if ! changed="$(diff -rq --no-dereference -x _work -x _diag -x .runner -x .credentials -x .credentials_rsaparams \
      "$RUNNER_PRISTINE" "$runner_root" 2>&1)"; then
    echo "::error::runner-reset: $runner_root differs from $RUNNER_PRISTINE (restore it as root):" \
      "$(head -c 2000 <<< "$changed")" >&2
    tainted=1
    status=1
  fi
fi

# 3. Files. A failed removal is reported and counted, and the others go on.
remove() {
  if [[ -n "$dry" ]]; then echo "would remove $1"; return 0; fi
  # rm -rf fails on a directory its owner made read-only (chmod 500): writable again first, symlinks not followed.
  if [[ -d "$1" && ! -L "$1" ]]; then chmod -R u+rwX -- "$1" 2>/dev/null || true; fi
  rm -rf -- "$1" || true
  if [[ -e "$1" || -L "$1" ]]; then echo "::error::runner-reset: could not remove $1" >&2; status=1; fi
  return 0
}
writable() { [[ -n "$dry" || -L "$1" || ! -d "$1" ]] || chmod u+rwx -- "$1" 2>/dev/null || true; }
clean() {  # everything in $1 but the runner folder; a directory that holds it is cleaned, not removed
  local entry real
  writable "$1"
  for entry in "$1"/*; do
    if [[ -L "$entry" ]]; then
      # Kept only on the configured path, never followed; any other link goes (rm removes the link, not its
      # target): a job's link to HOME or to the runner folder as the marker's name kept the next job from starting
      # on every reset after it (a security review).
      if path_link "$entry"; then continue; fi
      remove "$entry"
      continue
    fi
    real="$(realpath -m -- "$entry")"
    if [[ "$real" == "$runner_root" ]]; then continue; fi
    if [[ "$runner_root" == "$real"/* ]] || holds_path_link "$entry"; then clean "$entry"; else remove "$entry"; fi
  done
}
shopt -s dotglob nullglob
clean "$home"
if [[ -d "$work" ]]; then clean "$work"; fi  # clean(), not a plain loop: a _work that leads to HOME keeps the runner
read -r -a tmp_dirs <<< "${RESET_TMP_DIRS:-/tmp /var/tmp /dev/shm}"
# The user's entries in the tmp folders and in every folder below them that any user may write into and that
# another user owns (sticky, mode 1777: /tmp/.X11-unix, /tmp/.ICE-unix on a systemd host), where a job can leave
# files too. Links are never followed; other filesystems mounted below are left alone (-xdev).
while IFS= read -r -d '' shared; do
  while IFS= read -r -d '' entry; do remove "$entry"; done < <(
    find "$shared" -mindepth 1 -maxdepth 1 -user "$uid" -print0 2>/dev/null || true)
done < <(find "${tmp_dirs[@]}" -xdev -type d -perm -1002 ! -user "$uid" -print0 2>/dev/null || true)
while IFS= read -r -d '' entry; do remove "$entry"; done < <(
  find "${tmp_dirs[@]}" -mindepth 1 -maxdepth 1 -user "$uid" -print0 2>/dev/null || true)
# A changed runner folder, a process that outlived the kill or a failed removal: the EXIT trap leaves the marker.
echo "runner-reset: ${dry:+(dry run) }reset $home (kept $runner_root)${tainted:+; runner folder CHANGED}"
finished=1
exit "$status"
