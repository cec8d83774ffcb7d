#!/usr/bin/env bash
# The learning benchmarks of issue 15 (see bench/README.md, "Learning"): PMMH iterations per
# second on an AR(1)-plus-noise model (T = 100, 300 particles, one chain on one thread) against the
# bootstrap filter's own rate on the same problem, and `optimize` on the Nile data against
# statsmodels' UnobservedComponents(...).fit() (Debian's python3-statsmodels, when installed): wall
# time of the whole process; recursive maximum likelihood's cost per observation against the
# bootstrap filter's per step (T = 20,000, 1000 particles, one thread). Medians of REPS
# (default 5) repetitions, interleaved.
#
#   bench/run_learning_bench.sh [BUILD_DIR]      (default: build/ next to bench/)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
ssmc=$build/bin/ssmc
REPS=${REPS:-5}
ITER=${ITER:-3000}
PY=${PY:-/usr/bin/python3} # Debian's, where python3-statsmodels installs
work=$(mktemp -d "${TMPDIR:-/tmp}/ssmc-learning-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
json_field() { sed -n "s/.*\"$1\": *\([-+0-9.eE]*\).*/\1/p" | head -n 1; }
wall() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'
}

cat > "$work/ar1n.ssm" <<'MODEL'
model ar1n {
  param rho ~ uniform(-1, 1) = 0.7;
  param sigma ~ half_normal(1) = 0.5;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(rho * x[t-1], sigma);
  y[t] ~ normal(x[t], 0.5);
}
MODEL
"$ssmc" build "$work/ar1n.ssm" -o "$work/ar1n" >/dev/null
"$work/ar1n" simulate --T 100 --seed 3 --out "$work/y.csv" >/dev/null
"$ssmc" build "$root/examples/nile.ssm" -o "$work/nile" >/dev/null

"$work/ar1n" simulate --T 20000 --seed 4 --out "$work/long.csv" >/dev/null

pmmh=() filt=() opt=() sm=() rml=() step=()
for ((r = 0; r < REPS; ++r)); do
  s=$("$work/ar1n" --threads 1 sample --data "$work/y.csv" --json --chains 1 --filter bootstrap \
        --particles 300 --warmup 0 --iterations "$ITER" | json_field elapsed_s)
  pmmh+=("$(awk -v n="$ITER" -v s="$s" 'BEGIN { printf "%.1f", n / s }')")
  s=$("$work/ar1n" --threads 1 filter --data "$work/y.csv" --json --method bootstrap \
        --particles 300 | json_field elapsed_s)
  filt+=("$(awk -v s="$s" 'BEGIN { printf "%.1f", 1 / s }')")
  s=$("$work/ar1n" --threads 1 rml --data "$work/long.csv" --json --particles 1000 \
        --step-size 1 | json_field elapsed_s)
  rml+=("$(awk -v s="$s" 'BEGIN { printf "%.2f", s / 20000 * 1e6 }')")
  s=$("$work/ar1n" --threads 1 filter --data "$work/long.csv" --json --method bootstrap \
        --particles 1000 | json_field elapsed_s)
  step+=("$(awk -v s="$s" 'BEGIN { printf "%.2f", s / 20000 * 1e6 }')")
  opt+=("$(wall "$work/nile" optimize --data "$root/examples/data/nile.csv" --json \
            --param sigma_eps=50 --param sigma_eta=10)")
  if "$PY" -c "import statsmodels" 2>/dev/null; then
    sm+=("$(wall "$PY" - "$root/examples/data/nile.csv" <<'PY'
import sys, pandas as pd, statsmodels.api as sm
y = pd.read_csv(sys.argv[1])["y"].values
sm.tsa.UnobservedComponents(y, "local level").fit(disp=False)
PY
)")
  fi
done
p=$(echo "${pmmh[*]}" | median) f=$(echo "${filt[*]}" | median) o=$(echo "${opt[*]}" | median)
printf 'CPU: %s; medians of %s repetitions\n\n' \
  "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" "$REPS"
printf 'PMMH, AR(1) + noise, T = 100, 300 particles, 1 chain, 1 thread (%s iterations):\n' "$ITER"
printf '  %10s it/s   (bootstrap filter alone: %s runs/s; PMMH/filter = %s)\n' "$p" "$f" \
  "$(awk -v a="$p" -v b="$f" 'BEGIN { printf "%.2f", a / b }')"
printf '  particles (Python) mcmc.PMMH on this machine, as the issue reports it: 139 it/s -> %sx\n' \
  "$(awk -v a="$p" 'BEGIN { printf "%.1f", a / 139 }')"
rm_=$(echo "${rml[*]}" | median) st=$(echo "${step[*]}" | median)
printf 'RML (paris, 1000 particles, 1 thread), AR(1) + noise, T = 20,000:\n'
printf '  %s us per observation (bootstrap filter: %s us per step; RML/filter = %s)\n' "$rm_" \
  "$st" "$(awk -v a="$rm_" -v b="$st" 'BEGIN { printf "%.1f", a / b }')"
printf 'optimize, Nile local level (from sigma_eps = 50, sigma_eta = 10), whole process:\n'
printf '  ssmc %s s' "$o"
if ((${#sm[@]})); then
  s=$(echo "${sm[*]}" | median)
  printf ', statsmodels UnobservedComponents.fit %s s (ratio %s)\n' "$s" \
    "$(awk -v a="$s" -v b="$o" 'BEGIN { printf "%.0f", a / b }')"
else
  printf ' (statsmodels not installed: apt-get install python3-statsmodels)\n'
fi
