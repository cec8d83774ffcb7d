#!/usr/bin/env bash
# The variational-inference benchmark (see bench/README.md, "Variational inference"): `vi` on the
# two-factor model of examples/factor.ssm (N items, a mean-field Gaussian guide per item, the
# loadings and the noise learned, one draw per item and iteration, Adam) against the same
# algorithm written directly in PyTorch from Python (Debian's python3-torch): the same guide,
# initialisation, objective, optimiser, step size and iterations, one thread each. Prints the
# training iterations per second of each (whole process: ssmc's executable with --eval-samples 1;
# Python's start-up and imports included) and their ratio, and the ratio of the training loops
# alone (ssmc's JSON train_s; Python's timed loop), and the final ELBO per item of each
# beside the exact log p(x) at each one's parameters. Medians of REPS (default 5) runs,
# interleaved.
#
#   bench/run_vi_bench.sh [BUILD_DIR]      (default: build/ next to bench/)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
ssmc=$build/bin/ssmc
REPS=${REPS:-5}
ITER=${ITER:-2000}
N=${N:-500}
PY=${PY:-/usr/bin/python3} # Debian's, where python3-torch installs
export OPENBLAS_NUM_THREADS=1 # torch.set_num_threads does not govern the BLAS threads
work=$(mktemp -d "${TMPDIR:-/tmp}/ssmc-vi-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
json_field() { sed -n "s/^  \"$1\": *\([-+0-9.eE]*\).*/\1/p" | head -n 1; }
now() { date +%s%N; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'; }

"$ssmc" build "$root/examples/factor.ssm" -o "$work/factor"
"$work/factor" simulate --T "$N" --seed 1 --out "$work/items.csv"

cat > "$work/vi.py" <<'PY'
# Mean-field VI of the two-factor model, as ssmc's `vi` runs it: a Gaussian guide per item
# starting at the prior, W and log psi learned, one reparameterised draw per item, the ELBO with
# the "sticking the landing" gradient, Adam, gradient norm clipped to 100.
import csv, math, sys, time
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
path, iters = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    rows = list(csv.DictReader(f))
x = torch.tensor([[float(r[f"x[{k}]"]) for k in range(4)] for r in rows], dtype=torch.float64)
N = x.shape[0]
W = torch.tensor([[1.0, 0.9], [0.8, 0.7], [0.6, 1.0], [0.5, 0.4]], dtype=torch.float64,
                 requires_grad=True)
log_psi = torch.tensor(math.log(0.5), dtype=torch.float64, requires_grad=True)
mu = torch.zeros(N, 2, dtype=torch.float64, requires_grad=True)
log_sd = torch.zeros(N, 2, dtype=torch.float64, requires_grad=True)
params = [mu, log_sd, W, log_psi]
opt = torch.optim.Adam(params, lr=0.05)
c = 0.5 * math.log(2 * math.pi)
def terms(z, m, s):
    psi = log_psi.exp()
    lp = (-0.5 * z ** 2 - c).sum(-1) + (-0.5 * ((x - z @ W.T) / psi) ** 2 - log_psi - c).sum(-1)
    lq = (-0.5 * ((z - m) / s.exp()) ** 2 - s - c).sum(-1)
    return lp - lq
start = time.time()
for it in range(iters):
    eps = torch.randn(N, 2, dtype=torch.float64)
    z = mu + eps * log_sd.exp()
    elbo = terms(z, mu.detach(), log_sd.detach()).sum()
    opt.zero_grad()
    (-elbo).backward()
    torch.nn.utils.clip_grad_norm_(params, 100.0)
    opt.step()
with torch.no_grad():
    eps = torch.randn(1000, N, 2, dtype=torch.float64)
    final = terms(mu + eps * log_sd.exp(), mu, log_sd).mean().item()
print(f"{final} {W.detach().tolist()} {log_psi.exp().item()} {time.time() - start}")
PY

have_torch=1
"$PY" -c "import torch" 2>/dev/null || have_torch=0
ssm_t=() py_t=() ssm_loop=() py_loop=()
for ((r = 0; r < REPS; ++r)); do
  t0=$(now)
  "$work/factor" vi --data "$work/items.csv" --iterations "$ITER" --eval-samples 1 --threads 1 \
    --json > "$work/ssm.json"
  t1=$(now)
  ssm_t+=("$(seconds "$t0" "$t1")")
  ssm_loop+=("$(json_field train_s < "$work/ssm.json")")
  if ((have_torch)); then
    t0=$(now)
    "$PY" "$work/vi.py" "$work/items.csv" "$ITER" > "$work/py.txt"
    t1=$(now)
    py_t+=("$(seconds "$t0" "$t1")")
    py_loop+=("$(awk '{ print $NF }' "$work/py.txt")")
  fi
done

ssm_med=$(echo "${ssm_t[*]}" | median)
echo "vi on examples/factor.ssm: N = $N items, $ITER iterations, K = 1, one thread"
printf "  ssmc vi:  %s s (median of %d), %.0f iterations/s\n" "$ssm_med" "$REPS" \
  "$(awk -v t="$ssm_med" -v i="$ITER" 'BEGIN { print i / t }')"
"$work/factor" vi --data "$work/items.csv" --iterations "$ITER" --eval-samples 1000 --json \
  > "$work/ssm_eval.json"
printf "  ssmc vi:  ELBO per item %s, log p(x) per item at its parameters %s\n" \
  "$(json_field elbo < "$work/ssm_eval.json")" "$(json_field log_likelihood < "$work/ssm_eval.json")"
if ((have_torch)); then
  py_med=$(echo "${py_t[*]}" | median)
  printf "  PyTorch:  %s s (median of %d), %.0f iterations/s\n" "$py_med" "$REPS" \
    "$(awk -v t="$py_med" -v i="$ITER" 'BEGIN { print i / t }')"
  read -r py_elbo _ < "$work/py.txt"
  printf "  PyTorch:  ELBO per item %s\n" "$py_elbo"
  printf "  ratio (ssmc iterations/s over PyTorch's): %.2f whole process, %.2f training alone\n" \
    "$(awk -v a="$ssm_med" -v b="$py_med" 'BEGIN { print b / a }')" \
    "$(awk -v a="$(echo "${ssm_loop[*]}" | median)" -v b="$(echo "${py_loop[*]}" | median)" \
      'BEGIN { print b / a }')"
else
  echo "  PyTorch: not installed (apt-get install python3-torch)"
fi
