#!/usr/bin/python3
"""The variational smoothing benchmark (bench/README.md, "Variational smoothing"): Chagneux
(2023), Table 4.1, on this machine.

  bench/run_vsmooth_bench.py [BUILD_DIR] [--runs 2] [--T 500] [--analytic-iterations 1000]
                             [--score-iterations 1000] [--learning-rate 1e-2] [--samples 2]
                             [--family diagonal] [--gradients analytic,pathwise,score]
                             [--keep DIR]

The model is examples/lgssm.ssm (p = q = 10) with the thesis code's parameters: A = diag(U(0.9,
1)), B with entries U(0, 1), Q = R = 0.01 I, x_0 ~ N(0, Q). For each run (its own parameters,
series of T steps and guide seed): `smooth --method rts` (the exact marginals) and `smooth --method
variational` with the closed-form gradient (L-BFGS), the pathwise gradient through backward
trajectories of the guide and the score-function recursions (both Adam, --samples N trajectories
or draws per step, as the thesis's N = 2, for --score-iterations steps), in the thesis code's family by default
(diagonal A, Q, R and prior covariance; --family full for ours). The guide starts as the thesis's code starts
it: the exact smoother of another model drawn from the same law (A, B random, covariances 0.01 I),
written by `--iterations 0 --save-guide` under those parameters and read by `--load-guide` (by
default a linear-Gaussian model's guide starts at its own exact smoothing law, and `--init random`
from a generic start, which converges far more slowly here: bench/README.md). Printed per
gradient: the marginal smoothing RMSE against RTS, averaged over time of the root-mean-square over
dimensions (as the thesis), the KL of the guide from the smoothing law (log p(y) - ELBO), and the
time per gradient step; medians over the runs beside the thesis's figures.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THESIS = {"analytic": (0.003, 37.1), "pathwise": (0.005, 50.5),
          "score": (0.007, 89.5)}  # RMSE, ms per gradient step


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.stdout


def params(rng, p):
    A = np.diag(rng.uniform(0.9, 1.0, p))
    B = rng.uniform(0.0, 1.0, (p, p))
    Q = 0.01 * np.eye(p)
    return {"A": A.tolist(), "Q": Q.tolist(), "B": B.tolist(), "R": Q.tolist()}


def means(path):
    data = np.genfromtxt(path, delimiter=",", names=True)
    cols = [n for n in data.dtype.names if n.startswith("mean_")]
    return np.array([data[c] for c in cols]).T


def setup_run(exe, work, r, rng, T, family, start_data=None):
    """Run r's parameters (drawn from rng), its series of T steps, RTS's exact smoothing means,
    and the starting guide: the exact smoother of another model drawn from the same law, saved
    from start_data (default: the series). Returns (params file, data file, means, guide file)."""
    pfile = os.path.join(work, f"params{r}.json")
    with open(pfile, "w") as f:
        json.dump(params(rng, 10), f)
    data = os.path.join(work, f"y{r}.csv")
    run([exe, "simulate", "--T", str(T), "--seed", str(r + 1), "--params", pfile, "--out", data])
    rts = os.path.join(work, f"rts{r}.csv")
    run([exe, "smooth", "--data", data, "--params", pfile, "--method", "rts", "--out", rts])
    start_params = os.path.join(work, f"start{r}.json")
    with open(start_params, "w") as f:
        json.dump(params(rng, 10), f)
    start = os.path.join(work, f"start{r}.pt")
    run([exe, "smooth", "--data", start_data(data) if start_data else data, "--params",
         start_params, "--method", "variational", "--family", family, "--iterations", "0",
         "--draws", "2", "--save-guide", start, "--out", os.devnull])
    return pfile, data, means(rts), start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--T", type=int, default=500)
    ap.add_argument("--analytic-iterations", type=int, default=1000)
    ap.add_argument("--score-iterations", type=int, default=1000)
    ap.add_argument("--learning-rate", type=float, default=1e-2)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--family", default="diagonal")
    ap.add_argument("--gradients", default="analytic,pathwise,score")
    ap.add_argument("--keep")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="vsmooth_bench_")
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "lgssm")
    run([os.path.join(a.build, "bin", "ssmc"), "build", os.path.join(ROOT, "examples", "lgssm.ssm"),
         "-o", exe])
    gradients = a.gradients.split(",")
    results = {g: [] for g in gradients}
    for r in range(a.runs):
        rng = np.random.default_rng(100 + r)
        pfile, data, exact, start = setup_run(exe, work, r, rng, a.T, a.family)
        for gradient in gradients:
            out = os.path.join(work, f"{gradient}{r}.csv")
            cmd = [exe, "--threads", "1", "smooth", "--data", data, "--params", pfile, "--method",
                   "variational", "--load-guide", start, "--gradient", gradient, "--seed",
                   str(r + 1), "--json", "--out", out]
            if gradient != "analytic":
                cmd += ["--samples", str(a.samples), "--iterations", str(a.score_iterations),
                        "--learning-rate", str(a.learning_rate)]
            else:
                cmd += ["--iterations", str(a.analytic_iterations)]
            j = json.loads(run(cmd))
            rmse = float(np.mean(np.sqrt(np.mean((means(out) - exact) ** 2, axis=1))))
            d = j["details"]
            ms = 1000 * d["seconds_per_evaluation"]
            results[gradient].append((rmse, j["kl"], ms, d["evaluations"]))
            print(f"run {r} {gradient:8s}: RMSE {rmse:.4f}, KL {j['kl']:.3g}, {ms:.1f} ms per "
                  f"gradient step, {d['evaluations']} steps, {j['fit_s']:.0f} s", flush=True)
    print(f"\np = q = 10, T = {a.T}, {a.runs} runs (medians); the thesis's Table 4.1 beside")
    print(f"{'gradient':10s} {'RMSE':>8s} {'thesis':>8s} {'KL':>9s} {'ms/step':>8s} {'thesis':>8s} {'steps':>6s}")
    for gradient, rows in results.items():
        med = [statistics.median(x[k] for x in rows) for k in range(4)]
        print(f"{gradient:10s} {med[0]:8.4f} {THESIS[gradient][0]:8.3f} {med[1]:9.3g} "
              f"{med[2]:8.1f} {THESIS[gradient][1]:8.1f} {med[3]:6.0f}")
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
