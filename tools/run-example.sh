#!/usr/bin/env bash
# Sets everything up, compiles examples/nile.ssm and runs a particle filter on the Nile data.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
mkdir -p out
build/bin/ssmc build examples/nile.ssm -o out/nile
out/nile filter --data examples/data/nile.csv --particles 10000 --seed 1 --out out/nile_filter.csv --json
echo "filtering means and variances per year: out/nile_filter.csv"
