#!/usr/bin/python3
"""Recursive maximum likelihood on the Sine SDE (bench/README.md, "SDEs (issue 20)"): Martin
(2022), section 7.5.3, figure 7.4, on this machine.

  bench/run_sde_rml_bench.py [BUILD_DIR] [--starts 50] [--T 5000] [--keep DIR]

5000 observations of dX = sin(X - pi/4) dt + dW every 0.5, Y = X + N(0, 1), are simulated once
(Euler-Maruyama with 1000 substeps per interval, where the thesis uses the exact algorithm). From
--starts starting points uniform in (0, 2 pi) (seeded), `rml --method bis` runs with the thesis's
settings: N = 100 particles (the random-weight filter), K = 10 backward samples, step size 0.5 for
300 observations then 0.5 (k - 300)^-0.6, the estimated densities and gradients of the General
Poisson estimator. As in the thesis theta moves on the real line (the example's uniform(0, 2 pi)
prior is dropped: on its logit scale the steps stall at 2 pi), and the model is 2 pi-periodic in
theta, so estimates are reported modulo 2 pi. Printed: the last iterate and the Polyak average
(from observation 301) over the starts (median, quartiles, extremes), the trajectories at a few
observations, and the maximum likelihood estimate on these data by quadrature (forward
algorithm on a grid, numpy) for reference; with the median time per run.
"""
import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_sde_bench import euler_transition, run, sine_drift  # noqa: E402  the smoothing bench's


def grid_loglik(y, theta, squarings, dt=0.5, points=400):
    import numpy as np
    x = np.linspace(min(y) - 6, max(y) + 6, points)
    spacing = x[1] - x[0]
    P = euler_transition(x, lambda v: sine_drift(v, theta), dt, squarings)
    a = np.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi) * spacing
    total = 0.0
    for t, v in enumerate(y):
        if t > 0:
            a = a @ P
        a = a * np.exp(-(v - x) ** 2 / 2) / math.sqrt(2 * math.pi)
        s = a.sum()
        total += math.log(s)
        a /= s
    return total


def grid_mle(y):
    """Golden-section search of the Richardson-extrapolated grid log-likelihood near pi / 4."""
    f = lambda th: 2 * grid_loglik(y, th, 6) - grid_loglik(y, th, 5)
    lo, hi = math.pi / 4 - 0.4, math.pi / 4 + 0.4
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = f(a), f(b)
    while hi - lo > 2e-3:
        if fa > fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = f(b)
    return (lo + hi) / 2


def quartiles(v):
    q = statistics.quantiles(v, n=4)
    return f"median {statistics.median(v):.3f}  quartiles [{q[0]:.3f}, {q[2]:.3f}]  " \
           f"range [{min(v):.3f}, {max(v):.3f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--starts", type=int, default=50)
    ap.add_argument("--T", type=int, default=5000)
    ap.add_argument("--keep")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="sde_rml_bench_")
    os.makedirs(work, exist_ok=True)
    ssmc = os.path.join(a.build, "bin", "ssmc")
    source = open(os.path.join(ROOT, "examples", "sine_sde.ssm")).read()
    free_source = source.replace("model sine_sde", "model sine_sde_free").replace(
        "param theta ~ uniform(0, 6.283185307179586) = 0.7853981633974483;",
        "param theta : real = 0.7853981633974483;")
    assert "param theta : real" in free_source, "examples/sine_sde.ssm's parameter changed"
    exe = os.path.join(work, "sine_sde_free")
    with open(exe + ".ssm", "w") as f:
        f.write(free_source)
    run([ssmc, "build", exe + ".ssm", "-o", exe])
    fine_source = source.replace("model sine_sde", "model sine_sde_sim").replace(
        "theta), 1, 0.5)", "theta), 1, 0.5, 1000)")
    assert "0.5, 1000)" in fine_source, "examples/sine_sde.ssm's diffusion changed"
    sim = os.path.join(work, "sine_sde_sim")
    with open(sim + ".ssm", "w") as f:
        f.write(fine_source)
    run([ssmc, "build", sim + ".ssm", "-o", sim])
    data = os.path.join(work, "y.csv")
    run([sim, "simulate", "--T", str(a.T), "--seed", "74", "--out", data])
    with open(data) as f:
        header = next(f).strip().split(",")
        y = [float(line.split(",")[header.index("y")]) for line in f]

    rng = random.Random(2022)
    starts = [rng.uniform(0.05, 2 * math.pi - 0.05) for _ in range(a.starts)]
    last, averaged, times, paths = [], [], [], []
    checkpoints = [100, 300, 1000, 2000, a.T]
    for k, start in enumerate(starts):
        out = os.path.join(work, "trace.csv")
        j = json.loads(run([exe, "rml", "--data", data, "--method", "bis", "--particles", "100",
                            "--backward-samples", "10", "--step-size", "0.5", "--step-hold",
                            "300", "--step-decay", "0.6", "--average-from", "301", "--param",
                            f"theta={start}", "--seed", str(100 + k), "--threads", "1", "--json",
                            "--out", out]))
        last.append(j["last"]["theta"] % (2 * math.pi))
        averaged.append(j["params"]["theta"] % (2 * math.pi))
        times.append(j["elapsed_s"])
        with open(out) as f:
            next(f)
            trace = [float(line.strip().split(",")[-1]) for line in f]
        paths.append([trace[c - 1] % (2 * math.pi) for c in checkpoints])
    print(f"Sine SDE, theta* = pi/4 = {math.pi / 4:.4f}, T = {a.T}, {a.starts} starts in "
          f"(0, 2 pi): rml --method bis, N = 100, K = 10")
    print(f"maximum likelihood on these data (grid): {grid_mle(y):.3f}")
    print(f"last iterate:       {quartiles(last)}")
    print(f"averaged (k > 300): {quartiles(averaged)}")
    for i, c in enumerate(checkpoints):
        print(f"  after {c:>5} observations: {quartiles([p[i] for p in paths])}")
    print(f"median time per run {statistics.median(times):.2f} s (one thread)")
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
