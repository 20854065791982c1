#!/usr/bin/env bash
# Checks, before anything is installed, that the test suite has room: about 3 GiB where the repository lies
# while .venv is not there yet (the venv alone is 2.8 GiB) or 0.5 GiB once it is, and 1 GiB in the temporary
# directory ($TMPDIR, else /tmp: pytest's files, the private PostgreSQL cluster, browser profiles), the two added
# where they are one filesystem. Exits 2 naming the filesystem, the paths on it, what is free and what is needed,
# so a full runner fails in a second with that line instead of a pip "No space left on device" minutes in.
# MLAPERF_NEED_GIB=N asks N GiB of each filesystem instead (0 turns the check off).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
if [[ -n "${1:-}" ]]; then echo "free_space: no arguments but --help (got '$1')" >&2; exit 2; fi
REPO="$PWD"
TMP="${TMPDIR:-/tmp}"
NEED_REPO=3072  # MiB
[[ -x .venv/bin/python ]] && NEED_REPO=512
NEED_TMP=1024  # a run leaves about 0.7 GiB there
if [[ -n "${MLAPERF_NEED_GIB:-}" ]]; then
  if [[ ! "$MLAPERF_NEED_GIB" =~ ^[0-9]+$ ]]; then
    echo "free_space: MLAPERF_NEED_GIB must be a whole number of GiB (got '$MLAPERF_NEED_GIB')" >&2; exit 2
  fi
fi

# df -P: one line a filesystem; column 4 is the space this user may still write (1024-byte blocks), 6 its mount.
mount_and_free() { df -Pk "$1" | awk 'NR == 2 { print $6, int($4 / 1024) }'; }
read -r REPO_MOUNT REPO_FREE < <(mount_and_free "$REPO")
read -r TMP_MOUNT TMP_FREE < <(mount_and_free "$TMP")

check() {  # mount, free MiB, needed MiB, what lies there, what to do
  local need="$3"
  [[ -n "${MLAPERF_NEED_GIB:-}" ]] && need=$((MLAPERF_NEED_GIB * 1024))
  if (( $2 < need )); then
    awk -v m="$1" -v f="$2" -v n="$need" -v w="$4" -v h="$5" 'BEGIN {
      printf "free_space: %.1f GiB free on %s (%s); the test suite needs about %.1f GiB there. ", f / 1024, m, w, n / 1024
      print h "." }' >&2
    exit 2
  fi
}
if [[ "$REPO_MOUNT" == "$TMP_MOUNT" ]]; then
  check "$REPO_MOUNT" "$REPO_FREE" $((NEED_REPO + NEED_TMP)) "the repository $REPO and the temporary directory $TMP" \
    "Free some space there, or set TMPDIR to another filesystem with room"
else
  check "$REPO_MOUNT" "$REPO_FREE" "$NEED_REPO" "the repository $REPO" "Free some space there"
  check "$TMP_MOUNT" "$TMP_FREE" "$NEED_TMP" "the temporary directory $TMP" \
    "Free some space there, or set TMPDIR to a filesystem with room"
fi
