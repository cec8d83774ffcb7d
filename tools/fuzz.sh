#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: the frontend, the CSV reader, the parameter and data
# readers) with clang++-14 in their own build directory and runs each on its corpus kept in the
# repository: the frontend for SECONDS and, beside it on the second core, each reader for a third
# of that (the readers' output follows the frontend's when both end). Exits non-zero if
# libFuzzer finds a crash, a leak, undefined behaviour or a hang; the input is then in
# <build>/fuzz/artifacts/<corpus>/ (frontend, csv, json).
# Usage: tools/fuzz.sh [SECONDS (default 60)] [more libFuzzer arguments...]
# Environment: SSMC_FUZZ_BUILD_DIR (default build-fuzz), SSMC_FUZZ_JOBS (build jobs, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
dir=${SSMC_FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSSMC_FUZZ=ON -DBUILD_TESTING=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$dir" --target fuzz_frontend fuzz_csv fuzz_json -j"${SSMC_FUZZ_JOBS:-2}"

# New inputs go to the first directory, in the build tree: the repository's corpus is only read.
run() { # TARGET CORPUS SECONDS [DICTIONARY]
  local target=$1 corpus=$2 time=$3 dict=${4:-}
  mkdir -p "$dir/fuzz/corpus/$corpus" "$dir/fuzz/artifacts/$corpus"
  echo "fuzz: running $target for ${time}s"
  "$dir/bin/$target" -max_total_time="$time" -rss_limit_mb=2048 -timeout=10 ${dict:+-dict="$dict"} \
    -artifact_prefix="$dir/fuzz/artifacts/$corpus/" -print_final_stats=1 \
    "${extra[@]}" "$dir/fuzz/corpus/$corpus" "tests/fuzz/corpus/$corpus"
}
extra=("$@")
readers_log="$dir/fuzz/readers.log"
mkdir -p "$dir/fuzz"
(run fuzz_csv csv $(((seconds + 2) / 3)) && run fuzz_json json $(((seconds + 2) / 3))) \
  >"$readers_log" 2>&1 &
readers=$!
status=0
run fuzz_frontend frontend "$seconds" tests/fuzz/ssm.dict || status=$?
wait "$readers" || status=$?
cat "$readers_log"
exit "$status"
