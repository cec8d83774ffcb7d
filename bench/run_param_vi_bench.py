#!/usr/bin/env python3
"""Variational inference of a state-space model's parameters (bench/README.md, the section of
that name): `vi` with each family against the exact posterior by quadrature, beside PMMH with the
same exact likelihood (`sample`, the peer a user would run instead), REPEATS seeds, medians.

  bench/run_param_vi_bench.py [BUILD_DIR] [--repeats 3] [--iterations 1500] [--pmmh 4000]
                              [--reference 100000]

- nile: the local level model on the Nile flows (examples/nile.ssm, 100 years), its two noise
  scales under half-normal priors; the posterior of sigma_eta is skewed towards 0;
- signflip: y_t = b x_t + noise with x a zero-mean AR(1), b ~ N(0, 1): b and -b explain the data
  equally, so the posterior has two modes (60 simulated steps, b = 1);
- var3: a 3-D linear-Gaussian model with its 3 x 3 transition matrix and two noise scales
  learned (200 simulated steps): an 11-D correlated posterior, against a long PMMH run
  (--reference iterations per chain) as no grid is feasible.
Per method: the KL from q to the posterior (log p(y) - ELBO, nats; var3, whose log p(y) is
unknown: -ELBO, whose differences between methods are differences of KL), the error of the importance
-weighted log evidence of the draws, Pareto k-hat, the worst error of a posterior mean and of a
posterior sd in units of the posterior sd (signflip: of |b|), the fraction of draws with b > 0
(signflip: 1/2 when both modes are held), and the wall time. PMMH's errors
are those of its draws (4 chains of --pmmh iterations after as many warm-up).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SIGNFLIP = """
model signflip {
  param b ~ normal(0, 1) = 0.5;
  param phi = 0.8;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(phi * x[t-1], 1);
  y[t] ~ normal(b * x[t], 0.5);
}
"""

# Nine transition coefficients and two noise scales of a 3-D linear-Gaussian model: a correlated
# 11-D posterior, where a random walk needs many steps; the reference is a long PMMH run.
VAR3 = """
model var3 {
  param A : matrix[3, 3] ~ normal(0, 0.5) = [[0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]];
  param q ~ half_normal(1) = 0.5;
  param r ~ half_normal(1) = 0.5;
  state x : vector[3];
  obs y : vector[3];
  x[0] ~ mvnormal(zeros(3), eye(3));
  x[t] ~ mvnormal(A * x[t-1], q * q * eye(3));
  y[t] ~ mvnormal(x[t], r * r * eye(3));
}
"""
VAR3_TRUTH = ["--param", "A=[[0.7, 0.2, 0], [-0.2, 0.6, 0.1], [0, 0.3, 0.5]]", "--param", "q=0.6",
              "--param", "r=0.4"]

FAMILIES = [
    ("meanfield", ["--method", "meanfield"]),
    ("meanfield+PSIS", ["--method", "meanfield", "--psis-resample"]),
    ("fullrank", ["--method", "fullrank"]),
    ("fullrank+PSIS", ["--method", "fullrank", "--psis-resample"]),
    ("gmm K=4", ["--method", "gmm", "--components", "4"]),
    ("dif K=8", ["--method", "dif", "--components", "8", "--hidden", "16",
                 "--net-learning-rate", "0.01"]),
    ("maf", ["--method", "maf", "--layers", "3", "--hidden", "16", "--net-learning-rate", "0.01"]),
]


def kalman_loglik(y, a, q, c, r, m0, p0):
    """log p(y) of x_0 ~ N(m0, p0), x_t = a x_{t-1} + N(0, q), y_t = c x_t + N(0, r), vectorised
    over arrays of parameters (broadcast together)."""
    m, P = np.broadcast_arrays(np.float64(m0), np.float64(p0) * np.ones_like(q * c * r))
    m, P = m.astype(float).copy(), P.astype(float).copy()
    ll = np.zeros_like(P)
    for t, yt in enumerate(y):
        if t > 0:
            m, P = a * m, a * a * P + q
        S = c * c * P + r
        e = yt - c * m
        ll += -0.5 * (np.log(2 * np.pi * S) + e * e / S)
        gain = P * c / S
        m, P = m + gain * e, P - gain * c * P
    return ll


def log_half_normal(s, scale):
    return 0.5 * np.log(2 / np.pi) - np.log(scale) - 0.5 * (s / scale) ** 2


def observations(data):
    return np.genfromtxt(data, delimiter=",", names=True)["y"]


def nile_exact(data):
    """The Nile posterior on a 600 x 600 grid of (sigma_eps, sigma_eta): log p(y), means, sds."""
    eps = np.linspace(0, 300, 601)[1:] - 0.25
    eta = np.linspace(0, 200, 601)[1:] - 1 / 6
    E, H = np.meshgrid(eps, eta, indexing="ij")
    log_f = (kalman_loglik(observations(data), 1.0, H * H, 1.0, E * E, 1000.0, 500.0 ** 2) +
             log_half_normal(E, 500) + log_half_normal(H, 200))
    top = log_f.max()
    w = np.exp(log_f - top)
    z = w.sum()
    cell = (eps[1] - eps[0]) * (eta[1] - eta[0])
    moments = {}
    for name, v in (("sigma_eps", E), ("sigma_eta", H)):
        mean = (w * v).sum() / z
        moments[name] = (mean, np.sqrt((w * v * v).sum() / z - mean * mean))
    return top + np.log(z * cell), moments


def signflip_exact(data):
    """The posterior of b on (-4, 4): log p(y), and the mean and sd of |b|."""
    b = np.linspace(-4, 4, 16001)
    log_f = kalman_loglik(observations(data), 0.8, 1.0, b, 0.25, 0.0, 1.0) - 0.5 * b * b - 0.5 * np.log(2 * np.pi)
    top = log_f.max()
    w = np.exp(log_f - top)
    z = w.sum()
    mean = (w * np.abs(b)).sum() / z
    return top + np.log(z * (b[1] - b[0])), {
        "|b|": (mean, np.sqrt((w * b * b).sum() / z - mean * mean))}


def simulated(ssmc, work, name, source, simulate):
    """Builds the model `source` as work/NAME and simulates work/NAME.csv with `simulate`'s
    arguments: the executable and the data."""
    path = os.path.join(work, name + ".ssm")
    with open(path, "w") as f:
        f.write(source)
    exe, data = os.path.join(work, name), os.path.join(work, name + ".csv")
    subprocess.run([ssmc, "build", path, "-o", exe], check=True)
    subprocess.run([exe, "simulate", "--out", data] + simulate, check=True, capture_output=True)
    return exe, data


def reference(exe, data, work, iterations):
    """The posterior means and sds of every sampled component from a long PMMH run (4 chains of
    `iterations` after as many warm-up, exact likelihood): the reference where no grid is
    feasible. log p(y) is unknown (NaN)."""
    out = os.path.join(work, "reference.csv")
    subprocess.run([exe, "sample", "--data", data, "--iterations", str(iterations), "--warmup",
                    str(iterations), "--seed", "99", "--out", out], check=True,
                   capture_output=True)
    chains = [read_draws(out.replace(".csv", f"_{c}.csv"), 0) for c in (1, 2, 3, 4)]
    moments = {}
    for name in chains[0]:
        if name.endswith("__"):
            continue
        v = np.concatenate([c[name] for c in chains])
        moments[name] = (v.mean(), v.std())
    return np.nan, moments


def read_draws(path, skip_mean_row):
    rows = [line for line in open(path) if not line.startswith("#")]
    names = rows[0].strip().split(",")
    values = np.array([[float(v) for v in r.split(",")] for r in rows[1 + skip_mean_row:]])
    return {n: values[:, i] for i, n in enumerate(names)}


def errors(draws, moments):
    """The worst |mean error| and |sd error| over the parameters, in posterior sds, and the
    fraction of draws with b > 0 (signflip: 0.5 when both modes are held; NaN elsewhere)."""
    mean_err = sd_err = 0.0
    for name, (mean, sd) in moments.items():
        v = np.abs(draws["b"]) if name == "|b|" else draws[name]
        mean_err = max(mean_err, abs(v.mean() - mean) / sd)
        sd_err = max(sd_err, abs(v.std() - sd) / sd)
    positive = (draws["b"] > 0).mean() if "b" in draws else np.nan
    return mean_err, sd_err, positive


def main():
    work = tempfile.mkdtemp(prefix="ssmc-param-vi-")
    try:
        run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work):
    args = sys.argv[1:]
    build_dir = args[0] if args and not args[0].startswith("--") else os.path.join(ROOT, "build")
    option = lambda name, default: int(args[args.index(name) + 1]) if name in args else default
    repeats, iterations, pmmh = (option("--repeats", 3), option("--iterations", 1500),
                                 option("--pmmh", 4000))
    reference_iterations = option("--reference", 100000)
    ssmc = os.path.join(build_dir, "bin", "ssmc")
    nile = os.path.join(work, "nile")
    subprocess.run([ssmc, "build", os.path.join(ROOT, "examples", "nile.ssm"), "-o", nile],
                   check=True)
    signflip, signflip_data = simulated(ssmc, work, "signflip", SIGNFLIP,
                                        ["--T", "60", "--seed", "2", "--param", "b=1"])
    var3, var3_data = simulated(ssmc, work, "var3", VAR3, ["--T", "200", "--seed", "4"] + VAR3_TRUTH)
    cases = [("nile", nile, os.path.join(ROOT, "examples", "data", "nile.csv"), [], nile_exact),
             ("signflip", signflip, signflip_data, ["--fix", "phi"], signflip_exact),
             ("var3", var3, var3_data, [],
              lambda data: reference(var3, data, work, reference_iterations))]
    print(f"vi: {iterations} iterations, 4 base draws each, cosine schedule; PMMH: 4 chains of "
          f"{pmmh}; {repeats} seeds, medians; errors in posterior sds")
    print(f"{'model':9} {'method':14} {'KL':>7} {'logZ err':>9} {'k-hat':>6} {'mean err':>9} "
          f"{'sd err':>7} {'P(b>0)':>7} {'wall s':>7}")
    for name, exe, data, extra, exact in cases:
        log_z, moments = exact(data)
        runs = [(label, ["vi"] + flags + ["--samples", "4", "--iterations", str(iterations),
                                          "--schedule", "cosine"]) for label, flags in FAMILIES]
        runs.append(("pmmh", ["sample", "--iterations", str(pmmh), "--warmup", str(pmmh)]))
        for label, command in runs:
            rows = []
            for r in range(repeats):
                out = os.path.join(work, f"{name}_{label.replace(' ', '')}_{r}.csv")
                start = time.perf_counter()
                p = subprocess.run([exe] + command + ["--data", data, "--json", "--out", out,
                                                      "--seed", str(r + 1)] + extra,
                                   check=True, capture_output=True, text=True)
                wall = time.perf_counter() - start
                j = json.loads(p.stdout)
                if label == "pmmh":
                    chains = [read_draws(out.replace(".csv", f"_{c}.csv"), 0) for c in (1, 2, 3, 4)]
                    draws = {k: np.concatenate([c[k] for c in chains]) for k in chains[0]}
                    rows.append((np.nan, np.nan, np.nan) + errors(draws, moments) + (wall,))
                else:
                    draws = read_draws(out, 1)
                    rows.append((log_z - j["elbo"] if np.isfinite(log_z) else -j["elbo"],
                                 j["log_evidence"] - log_z,
                                 j["pareto_k"] if j["pareto_k"] is not None else np.nan) +
                                errors(draws, moments) + (wall,))
            med = [statistics.median(c) for c in zip(*rows)]
            print(f"{name:9} {label:14} {med[0]:7.3f} {med[1]:9.3f} {med[2]:6.2f} {med[3]:9.3f} "
                  f"{med[4]:7.3f} {med[5]:7.2f} {med[6]:7.1f}", flush=True)


if __name__ == "__main__":
    main()
