#!/usr/bin/env bash
# The online-smoothing benchmark of Chopin & Singh (2014) (see bench/README.md): stdlib's
# poisson_count model (Y_t ~ Poisson(exp(X_t)), AR(1) log-intensity, mu = 0, phi = 0.9,
# sigma = 0.5) on T simulated observations, estimating the score for sigma^2 (an additive
# functional) with online (N = 100, 200), paris (N = 1000, 2 backward samples, drawn by rejection
# with the compiled density bound and by Metropolis-Hastings moves) and bis (N = 1000, 2 and 10
# backward samples). For each: the median wall time of the smoother, the median ratio of
# smoothing time to the bootstrap filter's time measured in the same run, the mean and variance of
# the estimate over RUNS seeds. Then the peak memory of paris at T = 10^3 and T = 10^5.
#
#   bench/run_smoothing_bench.sh [BUILD_DIR]      (default: build/ next to bench/)
#
# Environment: T (default 10000), RUNS (default 25), THREADS (default 1).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
ssmc=$build/bin/ssmc
T=${T:-10000}
RUNS=${RUNS:-25}
THREADS=${THREADS:-1}
if [[ ! -x $ssmc ]]; then
  echo "run_smoothing_bench.sh: $ssmc not found; build it first (cmake --build $build)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ssmc-smooth-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

json_field() { sed -n "s/.*\"$1\": *\([-+0-9.eE]*\).*/\1/p" | head -n 1; }
json_string() { sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" | head -n 1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mean_var() { tr ' ' '\n' | grep -v '^$' | awk '{s += $1; s2 += $1 * $1; n++} END {
  m = s / n; printf "%.4f %.4f", m, (n > 1) ? (s2 - n * m * m) / (n - 1) : 0 }'; }

cd "$root"
"$ssmc" build stdlib/models/poisson_count.ssm -o "$work/pc" >/dev/null
"$work/pc" simulate --T "$T" --seed 1 --out "$work/y.csv"

printf 'Chopin & Singh benchmark: stdlib/models/poisson_count.ssm, T = %s simulated observations,\n' "$T"
printf 'functional score_sigma2; %s runs (seeds 1..%s); --threads %s; times are medians.\n' \
  "$RUNS" "$RUNS" "$THREADS"
printf 'smooth/filter: the smoother'"'"'s own time over the filter steps'"'"' time in the same run.\n'
printf 'CPU: %s\n\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
printf '%-8s %6s %4s %10s %13s %12s %12s %10s\n' method N K "wall s" "smooth/filter" "mean" \
  "variance" backward

run_case() { # method N K [backward sampler]
  local method=$1 N=$2 K=$3 sampler=${4:-auto} walls=() ratios=() estimates=() backward=""
  for ((seed = 1; seed <= RUNS; ++seed)); do
    local out
    local flags=() # what the method reads (another method's flag is a usage error)
    [[ $method != online ]] && flags+=(--backward-samples "$K")
    [[ $method == paris ]] && flags+=(--backward "$sampler")
    out=$("$work/pc" smooth --data "$work/y.csv" --method "$method" --particles "$N" \
      "${flags[@]}" --functional score_sigma2 --seed "$seed" --threads "$THREADS" --json)
    local f s
    f=$(json_field filter_s <<<"$out")
    s=$(json_field smooth_s <<<"$out")
    walls+=("$(awk -v f="$f" -v s="$s" 'BEGIN { printf "%.4f", f + s }')")
    ratios+=("$(awk -v f="$f" -v s="$s" 'BEGIN { printf "%.3f", s / f }')")
    estimates+=("$(json_field score_sigma2 <<<"$out")")
    backward=$(json_string backward <<<"$out")
  done
  read -r m v <<<"$(mean_var <<<"${estimates[*]}")"
  printf '%-8s %6s %4s %10s %13s %12s %12s %10s\n' "$method" "$N" "$K" \
    "$(median <<<"${walls[*]}")" "$(median <<<"${ratios[*]}")" "$m" "$v" "${backward:-all}"
}

run_case online 100 1
run_case online 200 1
run_case paris 1000 2 rejection
run_case paris 1000 2 mcmc
run_case bis 1000 2
run_case bis 1000 10

echo
echo "Peak memory of paris (N = 1000, K = 2, mcmc), resident set size of the whole process:"
for TT in 1000 100000; do
  "$work/pc" simulate --T "$TT" --seed 2 --out "$work/y$TT.csv"
  out=$("$work/pc" smooth --data "$work/y$TT.csv" --method paris --particles 1000 \
    --backward mcmc --backward-samples 2 --functional score_sigma2 --seed 1 --threads "$THREADS" --json)
  printf '  T = %-7s peak %s MiB (data file %s KiB)\n' "$TT" "$(json_field peak_rss_mb <<<"$out")" \
    "$(($(stat -c %s "$work/y$TT.csv") / 1024))"
done
