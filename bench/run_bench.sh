#!/usr/bin/env bash
# The benchmark of issue 2 (see bench/README.md): particle-steps per second of the filter that ssmc
# generates for examples/sv.ssm (1 thread and all cores) against the hand-written filter in
# bench/handwritten_sv.cpp, and the wall time of `ssmc build` for every example. Prints one table;
# ratios are between numbers measured in this run, repetitions interleaved so that a change of
# machine load affects all columns alike.
#
#   bench/run_bench.sh [BUILD_DIR]      (default: build/ next to bench/)
#
# Environment: REPS (default 5) repetitions per N, REPS_BIG (default 3) at N >= 1e6, T (default
# 200) time steps, NS (default "1000 10000 100000 1000000"), THREADS (default: all cores).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
ssmc=$build/bin/ssmc
hand=$build/bin/handwritten_sv
REPS=${REPS:-5}
REPS_BIG=${REPS_BIG:-3}
T=${T:-200}
NS=${NS:-"1000 10000 100000 1000000"}
THREADS=${THREADS:-$(nproc)}
# The baseline is not part of the default build.
[[ -x $hand ]] || cmake --build "$build" --target handwritten_sv >&2
for exe in "$ssmc" "$hand"; do
  if [[ ! -x $exe ]]; then
    echo "run_bench.sh: $exe not found; build it first:" >&2
    echo "  cmake --build $build --target ssmc handwritten_sv" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/ssmc-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Field NAME of the (first) JSON object printed by a filter.
json_field() { sed -n "s/.*\"$1\": *\([-+0-9.eE]*\).*/\1/p" | head -n 1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Wall seconds of a command (its output discarded).
wall() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'
}

cd "$root"
"$ssmc" build examples/sv.ssm -o "$work/sv"
"$work/sv" simulate --T "$T" --seed 1 --out "$work/y.csv"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

printf 'SV model (examples/sv.ssm, default parameters), T = %s simulated observations, seed 2,\n' "$T"
printf 'ESS threshold 0.5. Rates in millions of particle-steps per second (N * T / elapsed_s of\n'
printf 'the filter, I/O excluded); medians of %s repetitions (%s for N >= 1e6).\n' "$REPS" "$REPS_BIG"
printf 'CPU: %s, %s cores; all cores = --threads %s.\n' \
  "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" "$(nproc)" "$THREADS"
printf 'hand-written: %s\n\n' \
  "$("$hand" --data "$work/y.csv" --particles 10 | sed -n 's/.*"compiler":"\([^"]*\)".*/\1/p')"
printf '%9s %12s %12s %12s %14s %14s %14s\n' N "gen 1 thr" "gen $THREADS thr" "hand 1 thr" \
  "gen/hand 1thr" "${THREADS}thr/1thr" "|dloglik|"

worst_dll=0
for N in $NS; do
  reps=$REPS
  ((N >= 1000000)) && reps=$REPS_BIG
  g1=() ga=() hw=()
  for ((r = 0; r < reps; ++r)); do
    out=$("$work/sv" filter --data "$work/y.csv" --particles "$N" --seed 2 --threads 1 --json)
    g1+=("$(json_field elapsed_s <<<"$out")")
    ll_gen=$(json_field log_likelihood <<<"$out")
    out=$("$work/sv" filter --data "$work/y.csv" --particles "$N" --seed 2 --threads "$THREADS" \
      --json)
    ga+=("$(json_field elapsed_s <<<"$out")")
    out=$("$hand" --data "$work/y.csv" --particles "$N" --seed 2)
    hw+=("$(json_field elapsed_s <<<"$out")")
    ll_hand=$(json_field log_likelihood <<<"$out")
  done
  mg1=$(median <<<"${g1[*]}")
  mga=$(median <<<"${ga[*]}")
  mhw=$(median <<<"${hw[*]}")
  # The two filters make the same draws: their log-likelihoods differ only by rounding.
  dll=$(awk -v a="$ll_gen" -v b="$ll_hand" 'BEGIN { d = a - b; printf "%.1e", d < 0 ? -d : d }')
  worst_dll=$(awk -v a="$worst_dll" -v b="$dll" 'BEGIN { print (b > a) ? b : a }')
  awk -v N="$N" -v T="$T" -v g1="$mg1" -v ga="$mga" -v hw="$mhw" -v d="$dll" 'BEGIN {
    s = N * T / 1e6
    printf "%9d %12.2f %12.2f %12.2f %14.2f %14.2f %14s\n", N, s / g1, s / ga, s / hw, hw / g1,
      g1 / ga, d }'
done

# Cold: --no-cache compiles every time. Cached: a private cache, filled by one build first, so
# each timed build is a cache hit (the executable copied out of the cache).
printf '\nssmc build wall time (s), median of %s; targets: sv cold < 0.5 s, cached < 0.05 s:\n' "$REPS"
printf '  %-24s %8s %8s\n' model cold cached
export SSMC_CACHE_DIR="$work/cache"
for model in examples/*.ssm; do
  # Plate models and simulators have no inference (so no executable) yet.
  "$ssmc" check --format=json "$model" | grep -q '"model_kind"' && continue
  cold=() cached=()
  for ((r = 0; r < REPS; ++r)); do
    cold+=("$(wall "$ssmc" build --no-cache "$model" -o "$work/model.out")")
  done
  "$ssmc" build "$model" -o "$work/model.out" >/dev/null
  for ((r = 0; r < REPS; ++r)); do
    cached+=("$(wall "$ssmc" build "$model" -o "$work/model.out")")
  done
  printf '  %-24s %8.3f %8.3f\n' "$model" "$(median <<<"${cold[*]}")" "$(median <<<"${cached[*]}")"
done
printf '\nload average before: %s, after: %s (other work on the machine skews absolute rates;\n' \
  "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'the ratios are between interleaved runs).\n'
if awk -v d="$worst_dll" 'BEGIN { exit !(d > 1e-6) }'; then
  echo "WARNING: generated and hand-written log-likelihoods differ by $worst_dll" >&2
  exit 1
fi
