#!/usr/bin/env python3
"""A plate model's parameters with its latents: `vi --param-guide` (bench/README.md, the section
"Variational inference of a plate model's parameters"), against the exact posterior of (mu, tau)
by quadrature, beside PMMH (`sample`, the peer a user would run instead), REPEATS seeds, medians.

  bench/run_schools_bench.py [BUILD_DIR] [--repeats 3] [--iterations 3000] [--items 400]
                             [--batches 4] [--sequential-only]

- schools: the eight schools (examples/schools.ssm, examples/data/schools.csv), non-centred
  (eta[n] ~ N(0, 1), theta = mu + tau eta) and centred (theta[n] ~ N(mu, tau)); mu ~ N(0, 5^2),
  tau ~ half-normal(5);
- many: --items schools simulated from the non-centred model (mu = 4, tau = 3, sigma uniform on
  (9, 18)), where a particle filter's likelihood estimate is a product over the items.
Each school's guide is conditional on theta (--item-guide linear, the default) unless the label
says "indep" (--item-guide independent).
Per method: log p(x) - ELBO (nats: the KL from q(theta) prod q(z_n | theta) to the joint
posterior), the error of the importance-weighted log evidence, Pareto k-hat, the errors of the
posterior means and sds of mu and tau in units of the posterior sd (the worst of the two), and
the wall time.
The exact log p(x) and moments come from p(y | mu, tau) = prod N(y_n; mu, sigma_n^2 + tau^2) on a
grid. PMMH: `sample`'s 4 chains of 4000 iterations after 1000 of warm-up, its bootstrap filter.
Then sequential updating: the --items schools in --batches batches, each fitted with the previous
batch's q as its prior (--save-param-guide, --prior), or sampled by PMMH with a density fitted to
the previous batch's draws as its prior (unconstrain, ssmc density fit, --prior), the last draws
against the posterior of all.
"""
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from run_param_vi_bench import read_draws  # a Stan CSV's columns, q's mean row skipped

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CENTRED = """
model schools_centred {
  param mu ~ normal(0, 5) = 0;
  param tau ~ half_normal(5) = 5;
  input sigma[n];
  latent theta[n] ~ normal(mu, tau);
  obs y[n] ~ normal(theta[n], sigma[n]);
}
"""

FAMILIES = [("meanfield", []), ("fullrank", []), ("gmm K=4", ["--components", "4"]),
            ("dif K=4", ["--components", "4", "--hidden", "16", "--net-learning-rate", "0.01"]),
            ("maf", ["--layers", "3", "--hidden", "16", "--net-learning-rate", "0.01"])]


def exact(data):
    """log p(x) and the posterior means and sds of mu and tau, by a 2-D grid."""
    table = np.genfromtxt(data, delimiter=",", names=True, dtype=None, encoding=None)
    y, s = table["y"].astype(float), table["sigma"].astype(float)
    mu = np.linspace(-30, 40, 1401)
    tau = np.linspace(1e-4, 30, 1501)
    m, t = np.meshgrid(mu, tau, indexing="ij")
    log_f = np.zeros_like(m)
    for yn, sn in zip(y, s):  # item by item: the grid times the items would not fit
        v = sn * sn + t * t
        log_f += -0.5 * np.log(2 * np.pi * v) - (yn - m) ** 2 / (2 * v)
    log_f += (-0.5 * np.log(2 * np.pi * 25) - m * m / 50 + np.log(2) -
              0.5 * np.log(2 * np.pi * 25) - t * t / 50)
    top = log_f.max()
    w = np.exp(log_f - top)
    log_z = top + np.log(w.sum() * (mu[1] - mu[0]) * (tau[1] - tau[0]))
    w /= w.sum()
    moments = {}
    for name, grid in (("mu", m), ("tau", t)):
        mean = (w * grid).sum()
        moments[name] = (mean, np.sqrt((w * grid * grid).sum() - mean * mean))
    return log_z, moments


def errors(draws, moments):
    mean_err = max(abs(draws[k].mean() - m) / sd for k, (m, sd) in moments.items())
    sd_err = max(abs(draws[k].std() - sd) / sd for k, (m, sd) in moments.items())
    return mean_err, sd_err


def simulate_many(path, items):
    """--items schools from the non-centred model at mu = 4, tau = 3, sigma ~ U(9, 18)."""
    rng = np.random.default_rng(7)
    sigma = rng.uniform(9, 18, items)
    y = 4 + 3 * rng.standard_normal(items) + sigma * rng.standard_normal(items)
    with open(path, "w") as f:
        f.write("sigma,y\n")
        for s, v in zip(sigma, y):
            f.write(f"{s!r},{v!r}\n")


def main():
    args = sys.argv[1:]
    build_dir = args[0] if args and not args[0].startswith("--") else os.path.join(ROOT, "build")
    option = lambda name, default: int(args[args.index(name) + 1]) if name in args else default
    repeats, iterations, items = (option("--repeats", 3), option("--iterations", 3000),
                                  option("--items", 400))
    batches = option("--batches", 4)
    ssmc = os.path.join(build_dir, "bin", "ssmc")
    work = tempfile.mkdtemp(prefix="ssmc-schools-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # also after an error
    exes = {}
    for name, source in (("noncentred", os.path.join(ROOT, "examples", "schools.ssm")),
                         ("centred", None)):
        if source is None:
            source = os.path.join(work, "centred.ssm")
            with open(source, "w") as f:
                f.write(CENTRED)
        exes[name] = os.path.join(work, name)
        subprocess.run([ssmc, "build", source, "-o", exes[name]], check=True,
                       capture_output=True)
    schools = os.path.join(ROOT, "examples", "data", "schools.csv")
    many = os.path.join(work, "many.csv")
    simulate_many(many, items)
    cases = [("schools", schools, ["noncentred", "centred"]), (f"many ({items})", many,
                                                              ["noncentred"])]
    if "--sequential-only" in args:  # the updating rows alone
        cases = []
    print(f"vi: {iterations} iterations, --samples 4 per item, cosine schedule, 1000 draws; "
          f"PMMH: 4 chains of 4000; {repeats} seeds, medians; errors in posterior sds")
    print(f"{'data':11} {'model':11} {'method':22} {'KL':>7} {'logZ err':>9} {'k-hat':>6} "
          f"{'mean err':>9} {'sd err':>7} {'wall s':>7}")
    for case, data, models in cases:
        log_z, moments = exact(data)
        for model in models:
            runs = [(label, ["vi", "--param-guide", label.split()[0], "--samples", "4",
                             "--iterations", str(iterations), "--schedule", "cosine"] + flags)
                    for label, flags in FAMILIES]
            runs.insert(1, ("meanfield+psis", ["vi", "--param-guide", "meanfield", "--samples",
                                               "4", "--iterations", str(iterations),
                                               "--schedule", "cosine", "--psis-resample"]))
            # The schools' guides independent of θ: q(θ) Π q(z_n), the default before.
            runs.insert(2, ("meanfield indep", runs[0][1] + ["--item-guide", "independent"]))
            # The amortized encoder's schools' guides, given θ and (its default) independent.
            runs.insert(3, ("meanfield amortized", runs[0][1] + ["--method", "amortized",
                                                               "--item-guide", "linear"]))
            runs.insert(4, ("meanfield amort. indep", runs[0][1] + ["--method", "amortized"]))
            runs.append(("pmmh", ["sample", "--iterations", "4000", "--warmup", "1000"]))
            for label, command in runs:
                rows = []
                for r in range(repeats):
                    out = os.path.join(work, f"{model}_{label.replace(' ', '')}_{r}.csv")
                    written = ["--param-draws", out] if label != "pmmh" else ["--out", out]
                    start = time.perf_counter()
                    p = subprocess.run([exes[model]] + command + written +
                                       ["--data", data, "--json", "--seed", str(r + 1)],
                                       check=True, capture_output=True, text=True)
                    wall = time.perf_counter() - start
                    j = json.loads(p.stdout)
                    if label == "pmmh":
                        chains = [read_draws(out.replace(".csv", f"_{c}.csv"), 0)
                                  for c in (1, 2, 3, 4)]
                        draws = {k: np.concatenate([c[k] for c in chains]) for k in chains[0]}
                        rows.append((np.nan, np.nan, np.nan) + errors(draws, moments) + (wall,))
                    else:
                        q = j["parameters"]
                        rows.append((log_z - q["elbo"], q["log_evidence"] - log_z,
                                     q["pareto_k"] if q["pareto_k"] is not None else np.nan) +
                                    errors(read_draws(out, 1), moments) + (wall,))
                med = [statistics.median(c) for c in zip(*rows)]
                print(f"{case:11} {model:11} {label:22} {med[0]:7.3f} {med[1]:9.3f} "
                      f"{med[2]:6.2f} {med[3]:9.3f} {med[4]:7.3f} {med[5]:7.1f}", flush=True)
    sequential(exes["noncentred"], ssmc, many, batches, iterations, repeats, work)


def sequential(exe, ssmc, data, batches, iterations, repeats, work):
    """The items in `batches` batches, each fitted with the previous batch's q as its prior
    (--save-param-guide, --prior), or sampled by PMMH with the previous batch's draws, mapped
    to the unconstrained scale and fitted by `ssmc density fit`, as its prior (unconstrain,
    --prior): the final draws against the exact posterior of all items."""
    _, moments = exact(data)
    with open(data) as f:
        header, *rows = f.read().splitlines()
    size = (len(rows) + batches - 1) // batches
    files = []
    for b in range(batches):
        files.append(os.path.join(work, f"batch{b}.csv"))
        with open(files[-1], "w") as f:
            f.write("\n".join([header] + rows[b * size:(b + 1) * size]) + "\n")
    print(f"\nsequential updating: {len(rows)} schools in {batches} batches, each fitted with the "
          f"previous one's q as its prior; errors of the last batch's draws against the posterior "
          f"of all")
    print(f"{'method':16} {'mean err':>9} {'sd err':>7} {'wall s':>7}")
    for label, flags in FAMILIES[1:4:2] + [("fullrank indep", ["--item-guide", "independent"])]:
        errs = []
        for r in range(repeats):
            prior, start = [], time.perf_counter()
            for b, batch in enumerate(files):
                saved = os.path.join(work, f"q{b}_{r}.pt")
                draws = os.path.join(work, f"seq{b}_{r}.csv")
                subprocess.run([exe, "vi", "--data", batch, "--param-guide", label.split()[0],
                                "--samples", "4", "--iterations", str(iterations), "--schedule",
                                "cosine", "--seed", str(r + 1), "--save-param-guide", saved,
                                "--param-draws", draws] + flags + prior,
                               check=True, capture_output=True, text=True)
                prior = ["--prior", saved]
            errs.append(errors(read_draws(draws, 1), moments) + (time.perf_counter() - start,))
        med = [statistics.median(c) for c in zip(*errs)]
        print(f"{label:16} {med[0]:9.3f} {med[1]:7.3f} {med[2]:7.1f}", flush=True)
    for label, fit in (("PMMH, gaussian", ["--model", "gaussian"]),
                       ("PMMH, gmm K=4", ["--model", "gmm", "--components", "4"])):
        errs = []
        for r in range(repeats):
            prior, start = [], time.perf_counter()
            for b, batch in enumerate(files):
                out = os.path.join(work, f"pmmh{b}_{r}.csv")
                subprocess.run([exe, "sample", "--data", batch, "--iterations", "4000", "--warmup",
                                "1000", "--seed", str(r + 1), "--out", out] + prior,
                               check=True, capture_output=True, text=True)
                chains = [out.replace(".csv", f"_{c}.csv") for c in (1, 2, 3, 4)]
                u, saved = os.path.join(work, f"u{b}_{r}.csv"), os.path.join(work, f"p{b}_{r}.pt")
                subprocess.run([exe, "unconstrain", "--out", u] +
                               [a for c in chains for a in ("--from", c)],
                               check=True, capture_output=True, text=True)
                subprocess.run([ssmc, "density", "fit", "--data", u, "--save", saved, "--seed",
                                str(r + 1)] + fit, check=True, capture_output=True, text=True)
                prior = ["--prior", saved]
            last = [read_draws(c, 0) for c in chains]
            draws = {k: np.concatenate([c[k] for c in last]) for k in last[0]}
            errs.append(errors(draws, moments) + (time.perf_counter() - start,))
        med = [statistics.median(c) for c in zip(*errs)]
        print(f"{label:16} {med[0]:9.3f} {med[1]:7.3f} {med[2]:7.1f}", flush=True)


if __name__ == "__main__":
    main()
