#!/usr/bin/env bash
# Builds the frontend's libFuzzer target (tests/fuzz) with clang++-14 in its own build directory
# and runs it on the corpus kept in the repository. Exits non-zero if libFuzzer finds a crash, a
# leak, undefined behaviour or a hang; the input is then in <build>/fuzz/artifacts/.
# Usage: tools/fuzz.sh [SECONDS (default 60)] [more libFuzzer arguments...]
# Environment: SSMC_FUZZ_BUILD_DIR (default build-fuzz), SSMC_FUZZ_JOBS (build jobs, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
dir=${SSMC_FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSSMC_FUZZ=ON -DBUILD_TESTING=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$dir" --target fuzz_frontend -j"${SSMC_FUZZ_JOBS:-2}"

# New inputs go to the first directory, in the build tree: the repository's corpus is only read.
mkdir -p "$dir/fuzz/corpus" "$dir/fuzz/artifacts"
echo "fuzz: running fuzz_frontend for ${seconds}s"
"$dir/bin/fuzz_frontend" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
  -dict=tests/fuzz/ssm.dict -artifact_prefix="$dir/fuzz/artifacts/" -print_final_stats=1 \
  "$@" "$dir/fuzz/corpus" tests/fuzz/corpus
