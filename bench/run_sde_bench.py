#!/usr/bin/python3
"""The SDE benchmark (bench/README.md, "SDEs (issue 20)"): Martin (2022), section 7.5.2, figures
7.2 and 7.3, on this machine, and the random-weight filter against Euler-Maruyama.

  bench/run_sde_bench.py [BUILD_DIR] [--replicates 30] [--keep DIR]
                         [--parts filters,7.2,7.3,psi,lamperti]

The Sine model (examples/sine_sde.ssm: dX = sin(X - pi/4) dt + dW, Y_k = X_k + N(0, 1) every
0.5 time units, 11 observations) is simulated once. The reference E[X_0 | Y_0:10] is exact up to
1e-4: forward-backward on a grid of 400 points, the transition the Euler kernel of step 0.5 / 2^k
raised to the power 2^k by squaring, Richardson-extrapolated from k = 6, 7 (numpy). Then:
the filters, each from --replicates seeds: the random-weight filter (one Euler step proposed,
weighted by General Poisson estimates of the exact density) against the bootstrap filter through
20 and 400 Euler substeps: log-likelihood mean and sd, median time, with 1000 and 10000 particles.
Then E[X_0 | Y] by `smooth --method bis --backward-proposal filter` (the thesis's bis: indices
drawn from the filter weights) after the random-weight filter (auto's choice): figure 7.2 with
N = 100 and K backward samples from 2 to 100 (and paris, whose backward draws are accepted with
probability estimate / bound, at K = 2 and 10: the thesis's accept-reject; and its
Metropolis-Hastings alternative after the bootstrap filter, the start's estimate drawn among 10 or
one fresh estimate, proposals from the filter weights or times the Euler density), figure 7.3 with N from
50 to 2000 and K = N^0.5, N^0.6, N / 10; and bis with `--backward-proposal euler` (bis's
default for an SDE: indices drawn from the filter weights times the one-step Euler density) at
small K and at K = N^0.5. Each row: the mean over replicates, its bias against the reference in
standard errors, the replicates' standard deviation, and the median time of filter + smoother.
Last (psi), the same model with the bound psi_upper = 0.625 given (the compiler's is 1): the
filter, bis and paris's accept-reject with the same seeds, spread and time side by side.
Then (lamperti) X = exp(Y), Y the Sine diffusion: the coefficient x reads the path, and the
General Poisson estimator works in Lamperti's coordinate (quadrature and RK4) on the same data,
against the Sine model itself (the SDE written in that coordinate by hand).
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def euler_transition(x, drift, dt, squarings):
    """An SDE dX = drift(X) dt + dW's transition over dt on the grid x: the Euler kernel of step
    dt / 2^k (a Gaussian sampled on the grid, rows normalised) raised to the power 2^k by
    squaring."""
    import numpy as np
    h = dt / 2 ** squarings
    m = x + drift(x) * h
    P = np.exp(-(x[None, :] - m[:, None]) ** 2 / (2 * h))
    P /= P.sum(1, keepdims=True)
    for _ in range(squarings):
        P = P @ P
    return P


def sine_drift(x, theta=math.pi / 4):
    import numpy as np
    return np.sin(x - theta)


def grid_x0(y, drift=sine_drift, dt=0.5, r=1.0, points=400, of=None):
    """E[X_0 | y] by forward-backward on a grid (the module's docstring); E[of(X_0) | y] with
    `of` (an SDE written in other coordinates)."""
    import numpy as np
    y = np.asarray(y)
    x = np.linspace(y.min() - 6, y.max() + 6, points)

    def mean(squarings):
        P = euler_transition(x, drift, dt, squarings)
        g = [np.exp(-(v - x) ** 2 / (2 * r * r)) for v in y]
        alpha0 = np.exp(-x ** 2 / 2) * g[0]
        beta = np.ones(points)
        for t in range(len(y) - 1, 0, -1):
            beta = P @ (g[t] * beta)
            beta /= beta.sum()
        s = alpha0 * beta
        return float((s * (x if of is None else of(x))).sum() / s.sum())

    return 2 * mean(7) - mean(6)


def x0(exe, data, work, n, k, seed, method="bis", proposal="filter", extra=()):
    out = os.path.join(work, "s.csv")
    extra = (["--backward-proposal", proposal] if method == "bis" else []) + list(extra)
    j = json.loads(run([exe, "smooth", "--data", data, "--method", method, "--particles", str(n),
                        "--backward-samples", str(k), "--marginals", "--seed", str(seed),
                        "--threads", "1", "--json", "--out", out] + extra))
    with open(out) as f:
        next(f)
        return float(next(f).split(",")[1]), j["smooth_s"] + j["filter_s"]


def series(exe, data, work, n, k, reps, seed0, method="bis", proposal="filter", extra=()):
    vals, times = [], []
    for r in range(reps):
        v, s = x0(exe, data, work, n, k, seed0 + r, method, proposal, extra)
        vals.append(v)
        times.append(s)
    return vals, times


def filter_row(label, exe, method, data, n, reps, seed0):
    vals, times = [], []
    for r in range(reps):
        j = json.loads(run([exe, "filter", "--data", data, "--method", method, "--particles",
                            str(n), "--seed", str(seed0 + r), "--threads", "1", "--json"]))
        vals.append(j["log_likelihood"])
        times.append(j["elapsed_s"])
    med = statistics.median(times)
    print(f"{label:<30} N={n:<6} loglik {statistics.mean(vals):.3f} "
          f"(se {statistics.stdev(vals) / math.sqrt(reps):.3f}, sd {statistics.stdev(vals):.3f})  "
          f"median {1e3 * med:.1f} ms")
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--replicates", type=int, default=30)
    ap.add_argument("--keep")
    ap.add_argument("--parts", default="filters,7.2,7.3,psi,lamperti",
                    help="comma-separated: filters, 7.2, 7.3, psi, lamperti (default: all)")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    work = a.keep or tempfile.mkdtemp(prefix="sde_bench_")
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "sine_sde")
    run([os.path.join(a.build, "bin", "ssmc"), "build",
         os.path.join(ROOT, "examples", "sine_sde.ssm"), "-o", exe])
    data = os.path.join(work, "y.csv")
    run([exe, "simulate", "--T", "11", "--seed", "7", "--out", data])

    with open(data) as f:
        header = next(f).strip().split(",")
        y = [float(line.split(",")[header.index("y")]) for line in f]
    ref = grid_x0(y)
    print(f"reference E[X_0 | Y] = {ref:.4f} (forward-backward on a grid, exact to ~1e-4)")

    if "filters" in parts:
        filters(a, exe, data, work)

    def row(label, n, k, seed0, method="bis", proposal="filter", extra=()):
        vals, times = series(exe, data, work, n, k, a.replicates, seed0, method, proposal, extra)
        m, sd = statistics.mean(vals), statistics.stdev(vals)
        se = sd / math.sqrt(len(vals))  # the reference is exact
        print(f"{label:<22} N={n:<5} K={k:<4} mean {m:.4f}  bias {(m - ref) / se:+.1f} se  "
              f"sd {sd:.4f}  median {1e3 * statistics.median(times):.1f} ms")

    if "7.2" in parts:
        print("\nfigure 7.2: N = 100, K backward samples")
        for k in (2, 5, 10, 20, 50, 100):
            row("bis", 100, k, 20000 + 100 * k)
        for k in (2, 5, 10, 20):  # indices drawn from W_i times the Euler density (bis's auto)
            row("bis, Euler proposal", 100, k, 20000 + 100 * k, proposal="euler")
        for k in (2, 10):  # the thesis's accept-reject column: pseudo-marginal PaRIS
            row("paris (accept-reject)", 100, k, 40000 + 100 * k, "paris")
        # The thesis's Metropolis-Hastings alternative (end of 7.3.3): pseudo-marginal moves from
        # the bootstrap filter's ancestors, the start's estimate drawn among 10 (the default) or
        # one fresh estimate.
        moves = ["--filter", "bootstrap", "--backward", "mcmc", "--backward-proposal"]
        for k in (2, 10):
            row("paris (MH)", 100, k, 40000 + 100 * k, "paris", extra=moves + ["filter"])
            row("paris (MH, fresh start)", 100, k, 40000 + 100 * k, "paris",
                extra=moves + ["filter", "--start-estimates", "1"])
            row("paris (MH, Euler)", 100, k, 40000 + 100 * k, "paris", extra=moves + ["euler"])
    if "7.3" in parts:
        print("\nfigure 7.3: N from 50 to 2000")
        for n in (50, 100, 200, 500, 1000, 2000):
            for name, k in (("K = N^0.5", round(n ** 0.5)), ("K = N^0.6", round(n ** 0.6)),
                            ("K = N/10", max(1, n // 10))):
                row(name, n, k, 30000 + n + k)
            k = round(n ** 0.5)
            row("K = N^0.5, Euler", n, k, 30000 + n + k, proposal="euler")
    if "psi" in parts:
        psi_bounds(a, exe, data, work, row)
    if "lamperti" in parts:
        lamperti(a, data, work, y)
    if not a.keep:
        shutil.rmtree(work)


def psi_bounds(a, exe, data, work, row):
    """The model's bound psi_upper = 0.625 (the sup of (sin^2 + cos) / 2) against the compiler's
    1: the General Poisson estimator's Poisson rate (upper - lower) dt falls from 0.75 to 0.5625.
    The same seeds for both models, so the rows differ by the bound alone."""
    print("\npsi's upper bound: the compiler's (1) against the model's (0.625)")
    tight = sine_variant(a, work, "tight", "psi_upper = 0.625")
    for n in (1000, 10000):
        loose_t = filter_row("random-weight, psi <= 1", exe, "random-weight", data, n,
                             a.replicates, 100)
        tight_t = filter_row("random-weight, psi <= 0.625", tight, "random-weight", data, n,
                             a.replicates, 100)
        print(f"{'':<30} time ratio: {loose_t / tight_t:.2f}")
    for label, model in (("psi <= 1", exe), ("psi <= 0.625", tight)):
        def row_of(name, n, k, seed0, method="bis", proposal="filter", extra=(), model=model):
            vals, times = series(model, data, work, n, k, a.replicates, seed0, method, proposal,
                                 extra)
            print(f"{name + ', ' + label:<34} N={n:<5} K={k:<4} mean {statistics.mean(vals):.4f}  "
                  f"sd {statistics.stdev(vals):.4f}  "
                  f"median {1e3 * statistics.median(times):.1f} ms")
        row_of("bis, Euler proposal", 100, 10, 21000, proposal="euler")
        row_of("bis, Euler proposal", 1000, 32, 31000, proposal="euler")
        row_of("paris (accept-reject)", 100, 10, 41000, "paris")
    repelled(a, work)


REPELLED = """model repelled{0} {{
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(x[t] / (1 + x[t]^2), 1, 0.5{1});
  y[t] ~ normal(x[t], 1);
}}
"""


def repelled(a, work):
    """dX = X / (1 + X^2) dt + dW: psi = 1 / (2 (1 + X^2)^2), which the compiler cannot bound.
    With psi_lower = 0, psi_upper = 0.5 from the model the General Poisson estimator applies
    (positive estimates: the random-weight filter, bis weighing by them); without, only the
    parametrix estimator does (signed, Wald), after the Euler bootstrap filter."""
    print("\ndX = X / (1 + X^2) dt + dW: the model's bounds of psi against none")
    exes = {}
    for name, bounds in (("bounded", ", psi_lower = 0, psi_upper = 0.5"), ("free", "")):
        path = os.path.join(work, "repelled_" + name)
        build_model(a, path, REPELLED.format("_" + name, bounds))
        exes[name] = path
    data = os.path.join(work, "repelled.csv")
    run([exes["bounded"], "simulate", "--T", "11", "--seed", "7", "--out", data])
    with open(data) as f:
        header = next(f).strip().split(",")
        y = [float(line.split(",")[header.index("y")]) for line in f]
    ref = grid_x0(y, drift=lambda x: x / (1 + x * x))
    print(f"reference E[X_0 | Y] = {ref:.4f}")
    filter_row("random-weight (gpe, bounds)", exes["bounded"], "random-weight", data, 1000,
               a.replicates, 100)
    filter_row("bootstrap, 20 Euler substeps", exes["free"], "bootstrap", data, 1000,
               a.replicates, 100)
    for label, exe in (("bis (gpe, the model's bounds)", exes["bounded"]),
                       ("bis (parametrix)", exes["free"])):
        for n, k in ((100, 10), (1000, 32)):
            vals, times = series(exe, data, work, n, k, a.replicates, 51000 + n, "bis", "euler")
            m, sd = statistics.mean(vals), statistics.stdev(vals)
            print(f"{label:<34} N={n:<5} K={k:<4} mean {m:.4f}  "
                  f"bias {(m - ref) / (sd / math.sqrt(len(vals))):+.1f} se  sd {sd:.4f}  "
                  f"median {1e3 * statistics.median(times):.1f} ms")


EXP_SINE = """model exp_sine {
  param theta : real = 0.7853981633974483;
  state x : real;
  obs y : real;
  x[0] ~ lognormal(0, 1);
  x[t] ~ diffusion(drift = x[t] * (sin(log(x[t]) - theta) + 0.5), diffusion = x[t], dt = 0.5,
                   psi_lower = -0.5, psi_upper = 0.625);
  y[t] ~ normal(log(x[t]), 1);
}
"""


def lamperti(a, data, work, y):
    """X = exp(Y) with Y the Sine diffusion, by Ito dX = X (sin(log X - theta) + 1/2) dt + X dW,
    observed through log X: the likelihood is the Sine model's, E[X_0 | Y] = E[exp(Y_0) | Y].
    In Lamperti's coordinate (log x) psi is the Sine model's, in [-1/2, 5/8] (the model's bounds);
    the Sine model with the same bounds is the SDE written there by hand. Same data, same seeds:
    the rows differ by the quadrature and the RK4 walkers (and the parametrix estimator's
    heavy tails where the General Poisson one is not chosen)."""
    print("\nX = exp(Y): a coefficient that reads the path, in Lamperti's coordinate, against the "
          "Sine model written there by hand")
    path = os.path.join(work, "exp_sine")
    build_model(a, path, EXP_SINE)
    by_hand = sine_variant(a, work, "bounds", "psi_lower = -0.5, psi_upper = 0.625")
    ref = grid_x0(y, of=lambda x: __import__("numpy").exp(x))
    print(f"reference E[X_0 | Y] = {ref:.4f} (E[exp(Y_0) | Y] on the grid)")
    for n in (1000, 10000):
        hand_t = filter_row("random-weight, by hand (Y)", by_hand, "random-weight", data, n,
                            a.replicates, 100)
        lamp_t = filter_row("random-weight, Lamperti (X)", path, "random-weight", data, n,
                            a.replicates, 100)
        print(f"{'':<30} time ratio Lamperti / by hand: {lamp_t / hand_t:.2f}")
    # bis's backward proposals: auto's, one Euler step (in u = log x for the Lamperti model), and
    # the filter weights alone.
    for n, k in ((100, 10), (1000, 32)):
        times = {}
        for label, exe, exact, proposal in (
                ("bis, by hand (E[Y_0])", by_hand, None, "euler"),
                ("bis, Lamperti (E[X_0])", path, ref, "euler"),
                ("bis, Lamperti, filter draws", path, ref, "filter"),
                ("bis, parametrix (E[X_0])", path, ref, "euler")):
            extra = ["--estimator", "parametrix"] if "parametrix" in label else []
            try:
                vals, t = series(exe, data, work, n, k, a.replicates, 52000 + n, "bis", proposal,
                                 extra)
            except SystemExit as e:
                print(f"{label:<30} N={n:<5} K={k:<4} stopped: {str(e).splitlines()[-1]}")
                continue
            m, sd = statistics.mean(vals), statistics.stdev(vals)
            bias = f"bias {(m - exact) / (sd / math.sqrt(len(vals))):+.1f} se  " if exact else ""
            times[label] = statistics.median(t)
            print(f"{label:<30} N={n:<5} K={k:<4} mean {m:.4f}  {bias}sd {sd:.4f}  "
                  f"median {1e3 * times[label]:.1f} ms")
        print(f"{'':<30} time ratio Lamperti / by hand: "
              f"{times['bis, Lamperti (E[X_0])'] / times['bis, by hand (E[Y_0])']:.2f}")


def build_model(a, path, source):
    """Writes `source` to PATH.ssm and builds it as the executable PATH."""
    with open(path + ".ssm", "w") as f:
        f.write(source)
    run([os.path.join(a.build, "bin", "ssmc"), "build", path + ".ssm", "-o", path])


def sine_variant(a, work, suffix, extra):
    """examples/sine_sde.ssm with `extra` after diffusion(...)'s dt, built as sine_sde_SUFFIX."""
    source = open(os.path.join(ROOT, "examples", "sine_sde.ssm")).read()
    path = os.path.join(work, "sine_sde_" + suffix)
    variant = source.replace("model sine_sde", "model sine_sde_" + suffix).replace(
        "theta), 1, 0.5)", f"theta), 1, 0.5, {extra})")
    assert f"0.5, {extra})" in variant, "examples/sine_sde.ssm's diffusion changed"
    build_model(a, path, variant)
    return path


def filters(a, exe, data, work):
    print("\nfilters: log-likelihood of the 11 observations")
    fine = sine_variant(a, work, "400", "400")
    for n in (1000, 10000):
        rw = filter_row("random-weight", exe, "random-weight", data, n, a.replicates, 100)
        filter_row("bootstrap, 20 Euler substeps", exe, "bootstrap", data, n, a.replicates, 200)
        eu = filter_row("bootstrap, 400 Euler substeps", fine, "bootstrap", data, n,
                        a.replicates, 300)
        print(f"{'':<30} time ratio bootstrap-400 / random-weight: {eu / rw:.1f}")


if __name__ == "__main__":
    main()
