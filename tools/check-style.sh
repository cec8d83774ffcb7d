#!/usr/bin/env bash
# The house style, checked on every tracked C++ file (a ctest, style/house): clang-format clean,
# snake_case file names, `#pragma once` in headers, an opening comment saying what the file is for,
# and no file over MAX_LINES lines. Usage: tools/check-style.sh [--fix] (--fix runs clang-format -i).
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_LINES=${MAX_LINES:-750}
mapfile -t files < <(git ls-files '*.cpp' '*.h' | grep -v '^tests/fuzz/corpus/')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
fi
status=0
fail() { echo "style: $1"; status=1; }
clang-format --dry-run --Werror "${files[@]}" 2>/dev/null ||
  fail "clang-format: run tools/check-style.sh --fix (or clang-format -i) on: $(clang-format --dry-run "${files[@]}" 2>&1 | grep -o '^[^:]*' | sort -u | tr '\n' ' ')"
for f in "${files[@]}"; do
  base=$(basename "$f")
  [[ "$base" =~ ^[a-z0-9_]+\.(cpp|h)$ ]] || fail "$f: file names are snake_case"
  if [[ "$f" == *.h ]] && ! grep -q '^#pragma once' "$f"; then fail "$f: headers use #pragma once"; fi
  head -1 "$f" | grep -q '^//' || fail "$f: the first line is a comment saying what the file is for"
  n=$(wc -l < "$f")
  [ "$n" -le "$MAX_LINES" ] || fail "$f: $n lines (split it by concern; the limit is $MAX_LINES)"
done
[ $status -eq 0 ] && echo "style: ${#files[@]} files follow the house style"
exit $status
