#!/usr/bin/env bash
# The digits VAE benchmark (see bench/README.md, "The digits VAE"): `vi` on examples/digits_vae.ssm
# (8 latents, an MLP decoder 8-128-64 with ReLU declared by `net`, the guide an MLP encoder
# 64-128-16 with ReLU declared the same way, Bernoulli pixels, the ELBO with one draw per item,
# batches of 100,
# Adam at 0.001 for both networks, the gradient's norm clipped to 100, one thread) against the
# same VAE written directly in PyTorch from Python (Debian's python3-torch), each in float64 and
# in float32 (ssmc: --precision double|single; its kernels compute in double either way). Prints
# the training steps per second of each and their ratios at the same precision, and the held-out
# digits' ELBO after the same number of epochs, each estimated with 100 draws per digit. Medians
# of REPS (default 3) runs, interleaved.
#
#   bench/run_vae_bench.sh [BUILD_DIR]      (default: build/ next to bench/)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
ssmc=$build/bin/ssmc
REPS=${REPS:-3}
ITER=${ITER:-3000}
PY=${PY:-/usr/bin/python3} # Debian's, where python3-torch installs
export OPENBLAS_NUM_THREADS=1 # torch.set_num_threads does not govern the BLAS threads
data=$root/examples/data
work=$(mktemp -d "${TMPDIR:-/tmp}/ssmc-vae-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { "$PY" -c "import json, sys; j = json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

"$ssmc" build "$root/examples/digits_vae.ssm" -o "$work/vae"

cat > "$work/vae.py" <<'PY'
# The VAE of examples/digits_vae.ssm as ssmc's `vi` trains it: both networks at LibTorch's
# initialisation, the encoder on the raw pixels, the ELBO with one reparameterised draw and the
# "sticking the landing" gradient, Adam, clipping at 100.
import csv, math, sys, time
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
train_path, test_path, iters, dtype = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dt = torch.float32 if dtype == "float32" else torch.float64
def load(path):
    with open(path) as f:
        return torch.tensor([[float(r[f"x[{k}]"]) for k in range(64)] for r in csv.DictReader(f)],
                            dtype=dt)
x, x_test = load(train_path), load(test_path)
N, D, B = x.shape[0], 8, 100
enc = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 2 * D))
dec = torch.nn.Sequential(torch.nn.Linear(D, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
enc, dec = enc.to(dt), dec.to(dt)
params = list(enc.parameters()) + list(dec.parameters())
opt = torch.optim.Adam(params, lr=1e-3)
c = 0.5 * math.log(2 * math.pi)
def elbo(xb, K, stick):
    h = enc(xb)
    m, s = h[:, :D], h[:, D:]
    eps = torch.randn(K, xb.shape[0], D, dtype=dt)
    z = m + eps * s.exp()
    logits = dec(z)
    log_lik = -torch.nn.functional.binary_cross_entropy_with_logits(
        logits, xb.expand_as(logits), reduction="none").sum(-1)
    log_prior = (-0.5 * z ** 2 - c).sum(-1)
    mq, sq = (m.detach(), s.detach()) if stick else (m, s)
    log_q = (-0.5 * ((z - mq) / sq.exp()) ** 2 - sq - c).sum(-1)
    return log_lik + log_prior - log_q  # [K, batch]
g = torch.Generator().manual_seed(1)
start = time.time()
for it in range(iters):
    if it % (N // B) == 0:
        order = torch.randperm(N, generator=g)
    idx = order[(it % (N // B)) * B:(it % (N // B) + 1) * B]
    loss = -elbo(x[idx], 1, True).mean() * N
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 100.0)
    opt.step()
train_s = time.time() - start
with torch.no_grad():
    test = elbo(x_test, 100, False).mean().item()
print(f"{train_s} {test}")
PY

have_torch=1
"$PY" -c "import torch" 2>/dev/null || have_torch=0
declare -A times elbos # by "tool precision": the runs' training seconds and test ELBOs
for ((r = 0; r < REPS; ++r)); do
  for precision in double single; do
    "$work/vae" vi --data "$data/digits_train.csv" \
      --test "$data/digits_test.csv" --batch-size 100 --iterations "$ITER" \
      --net-learning-rate 0.001 --eval-samples 100 --threads 1 \
      --precision "$precision" --seed $((r + 1)) --json > "$work/ssm.json"
    times["ssmc $precision"]+=" $(field 'j["train_s"]' < "$work/ssm.json")"
    elbos["ssmc $precision"]+=" $(field 'j["test"]["elbo"]' < "$work/ssm.json")"
  done
  if ((have_torch)); then
    for dt in float64 float32; do
      read -r t e < <("$PY" "$work/vae.py" "$data/digits_train.csv" "$data/digits_test.csv" \
        "$ITER" "$dt")
      times["pytorch $dt"]+=" $t"
      elbos["pytorch $dt"]+=" $e"
    done
  fi
done

rate() { awk -v t="$1" -v i="$ITER" 'BEGIN { printf "%.0f", i / t }'; }
epochs=$((ITER * 100 / 1500))
echo "digits VAE (examples/digits_vae.ssm): 1500 training digits, batches of 100, $ITER steps" \
  "($epochs epochs), K = 1, one thread; medians of $REPS"
for pair in "double float64" "single float32"; do
  read -r precision dt <<< "$pair"
  ssm_med=$(echo "${times["ssmc $precision"]}" | median)
  printf "  ssmc vi --precision %s: training %.2f s, %s steps/s; test ELBO %.3f\n" "$precision" \
    "$ssm_med" "$(rate "$ssm_med")" "$(echo "${elbos["ssmc $precision"]}" | median)"
  if ((have_torch)); then
    py_med=$(echo "${times["pytorch $dt"]}" | median)
    printf "  PyTorch %s:          training %.2f s, %s steps/s; test ELBO %.3f\n" "$dt" "$py_med" \
      "$(rate "$py_med")" "$(echo "${elbos["pytorch $dt"]}" | median)"
    printf "  ssmc's steps/s over PyTorch's, %s: %.2f\n" "$dt" \
      "$(awk -v a="$ssm_med" -v b="$py_med" 'BEGIN { print b / a }')"
  fi
done
((have_torch)) || echo "  PyTorch: not installed (apt-get install python3-torch)"
