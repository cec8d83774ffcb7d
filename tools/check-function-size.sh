#!/usr/bin/env bash
# Lists functions over LINES lines (default 120): clang-tidy's readability-function-size over the
# compile database of a build directory (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON). Exits 1 if any.
# Usage: tools/check-function-size.sh [BUILD_DIR] [LINES]   (takes a few minutes: it parses every file)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
lines=${2:-120}
[ -f "$build/compile_commands.json" ] ||
  { echo "no $build/compile_commands.json: configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON"; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' | grep -v '^tests/fuzz/' | grep -v '^runtime/kernel_lib\|kernel/kernel_lib.cpp')
out=$(clang-tidy -p "$build" --quiet -checks='-*,readability-function-size' \
        -config="{CheckOptions: [{key: readability-function-size.LineThreshold, value: $lines}]}" \
        "${files[@]}" 2>/dev/null | grep 'readability-function-size' | sort -u || true)
if [ -n "$out" ]; then
  echo "$out" | sed "s|^$PWD/||"
  exit 1
fi
echo "no function over $lines lines in ${#files[@]} files"
