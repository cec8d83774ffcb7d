#!/usr/bin/env bash
# Sets everything up, compiles examples/nile.ssm, runs a particle filter on the Nile data, then
# smooths it (the model is linear-Gaussian, so `smooth` picks the exact Kalman/RTS smoother).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
mkdir -p out
build/bin/ssmc build examples/nile.ssm -o out/nile
out/nile filter --data examples/data/nile.csv --method bootstrap --particles 10000 --seed 1 \
  --out out/nile_filter.csv --json
out/nile smooth --data examples/data/nile.csv --out out/nile_smooth.csv --json
echo "filtering means and variances per year: out/nile_filter.csv"
echo "smoothing means, variances and lag-one covariances per year: out/nile_smooth.csv"
