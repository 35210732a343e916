#!/usr/bin/env bash
# Checks that every C and C++ file of the repository (git ls-files '*.h'
# '*.cpp' '*.c', plus new files git does not ignore) is laid out as
# .clang-format says. Lists each file clang-format would change, with the
# number of places it would change, then a count; exits 1 if there is any, 2
# if clang-format is missing.
#   .ci/check_format.sh            # check
#   .ci/check_format.sh --diff     # and show what clang-format would change
# Fix a file with `clang-format -i FILE`. The settings are tuned for Debian
# 12's clang-format 14; another version may lay a few lines out differently.
# CLANG_FORMAT=/path/to/clang-format picks another binary.
set -uo pipefail

show_diff=0
[ "${1:-}" = "--diff" ] && show_diff=1
clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check_format: $clang_format is not installed (Debian: apt-get install -y clang-format)" >&2
  exit 2
fi
# The repository holding the current directory, else the one holding this script.
top=$(git rev-parse --show-toplevel 2>/dev/null || git -C "$(dirname "$0")" rev-parse --show-toplevel) || exit 2
cd "$top" || exit 2
if [ ! -f .clang-format ]; then
  echo "check_format: no .clang-format at the top of the repository" >&2
  exit 2
fi
echo "check_format: $("$clang_format" --version)"

mapfile -d '' files < <(git ls-files -z --cached --others --exclude-standard -- '*.h' '*.cpp' '*.c' | sort -zu)
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
# clang-format --dry-run reports each place it would change as
# "FILE:LINE:COL: warning: code should be clang-formatted"; 100 files per
# clang-format, one per core. One line per file it would change: "path: N places".
report=$(printf '%s\0' "${existing[@]}" |
  xargs -0 -r -n 100 -P "$(nproc)" "$clang_format" --style=file --dry-run 2>&1 |
  sed -nE 's/^(.*):[0-9]+:[0-9]+: (warning|error): code should be clang-formatted.*/\1/p' |
  sort | uniq -c | awk '{ n = $1; $1 = ""; sub(/^ /, ""); print $0 ": " n " places would change" }')
if [ "$show_diff" -eq 1 ]; then
  for f in $(printf '%s\n' "$report" | sed -nE 's/: [0-9]+ places would change$//p'); do
    "$clang_format" --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" -
  done
fi
[ -n "$report" ] && printf '%s\n' "$report"
bad=$(printf '%s\n' "$report" | grep -cE ': [0-9]+ places would change$')
if [ "$bad" -gt 0 ]; then
  echo "check_format: $bad of ${#existing[@]} files are not formatted (clang-format -i FILE fixes one; --diff shows the changes)"
  exit 1
fi
echo "check_format: all ${#existing[@]} files are formatted"
