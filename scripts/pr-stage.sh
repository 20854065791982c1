#!/usr/bin/env bash
# What a pull request's GPU job may hand on: scripts/pr-stage.sh SRC DEST
# Copies SRC/report.json and the asv result files under SRC/results (*.json) into DEST (emptied first) as
# regular files. A symbolic link anywhere under SRC is refused (exit 1, DEST left empty): the upload would
# follow it and publish whatever it points to on the runner. report.md is not handed on: the comment is
# rendered from report.json by the default branch's code (regressions/pr_render.py). Exit 0 copied (or SRC
# missing: nothing to hand on), 1 refused, 2 bad usage.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
if [[ $# -ne 2 || -z "$1" || -z "$2" ]]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; fi
src="$1"; dest="$2"
rm -rf "$dest"
mkdir -p "$dest"
if [[ ! -d "$src" ]]; then echo "pr-stage: no $src: nothing to hand on"; exit 0; fi
links="$(find "$src" -type l -print | head -n 5)"
if [[ -n "$links" ]]; then
  echo "::error::pr-stage: symbolic links under $src are refused: ${links//$'\n'/, }"
  exit 1
fi
n=0
if [[ -f "$src/report.json" ]]; then cp "$src/report.json" "$dest/report.json"; n=$((n + 1)); fi
if [[ -d "$src/results" ]]; then
  while IFS= read -r -d '' file; do
    rel="${file#"$src"/}"
    mkdir -p "$dest/$(dirname "$rel")"
    cp "$file" "$dest/$rel"
    n=$((n + 1))
  done < <(find "$src/results" -type f -name '*.json' -print0)
fi
if [[ -n "$(find "$dest" -type l -print -quit)" ]]; then  # a link made while copying
  rm -rf "$dest"; mkdir -p "$dest"
  echo "::error::pr-stage: a symbolic link appeared under $src while copying: refused"
  exit 1
fi
echo "pr-stage: $n file(s) from $src to $dest"
