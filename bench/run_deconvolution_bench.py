#!/usr/bin/env python3
"""Density deconvolution with a learned density as a latent's law (bench/README.md, the section
"Learned densities as latents' laws"): the chapter's Orbits target (Argouarc'h 2024, ch. 2 and 4:
seven modes on a ring of radius 2.5, covariance 0.04 I) seen through Gaussian noise, its law
learned by `vi` as the distribution of the latent z[n] : vector[2], REPEATS seeds, medians.

  bench/run_deconvolution_bench.py [BUILD_DIR] [--repeats 3] [--items 500] [--noise 0.3]
                                   [--iterations 3000]

Per law of z (a Gaussian: a one-component dif; a dif with K maps; maf; realnvp): the ELBO and
the IWAE bound per item (a lower bound of the data's likelihood under the learned law), against
the exact log-likelihood per item of the law that made the data (x ~ sum_k N(m_k, (0.04 + s^2) I)
/ 7); the learned law itself (`vi --save-density`, then `ssmc density logpdf`) at 5000 fresh
draws of z from the true law, against the true law's own mean log-density there (the KL from the
truth to the learned law, up to Monte Carlo error); its parameter count; the wall time of
training. The items' guides are mean-field Gaussians, one per item.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LAWS = [
    ("gaussian (dif K=1)", "dif(dim = 2, components = 1)", "0.05"),
    ("dif K=8", "dif(dim = 2, components = 8, hidden = [32, 32])", "0.02"),
    ("maf L=4", "maf(dim = 2, layers = 4, hidden = [32, 32])", "0.005"),
    ("realnvp L=4", "realnvp(dim = 2, layers = 4, hidden = [32, 32])", "0.005"),
]


def orbits_centres():
    angles = 2 * np.pi * np.arange(7) / 7
    return 2.5 * np.stack([np.cos(angles), np.sin(angles)], 1)


def draw_z(rng, items):
    return orbits_centres()[rng.integers(0, 7, items)] + 0.2 * rng.standard_normal((items, 2))


def simulate(items, noise, seed):
    rng = np.random.default_rng(seed)
    return draw_z(rng, items) + noise * rng.standard_normal((items, 2))


def truth_logpdf(z):
    d2 = ((z[:, None, :] - orbits_centres()[None, :, :]) ** 2).sum(2)
    log_terms = -0.5 * d2 / 0.04 - np.log(2 * np.pi * 0.04) - np.log(7)
    top = log_terms.max(1)
    return top + np.log(np.exp(log_terms - top[:, None]).sum(1))


def truth_loglik(x, noise):
    var = 0.04 + noise * noise
    d2 = ((x[:, None, :] - orbits_centres()[None, :, :]) ** 2).sum(2)
    log_terms = -0.5 * d2 / var - np.log(2 * np.pi * var) - np.log(7)
    top = log_terms.max(1)
    return float(np.mean(top + np.log(np.exp(log_terms - top[:, None]).sum(1))))


def main():
    args = sys.argv[1:]
    build = args.pop(0) if args and not args[0].startswith("--") else os.path.join(ROOT, "build")
    opts = {"--repeats": "3", "--items": "500", "--noise": "0.3", "--iterations": "3000"}
    while args:
        flag = args.pop(0)
        if flag not in opts or not args:
            sys.exit(f"usage: {__doc__}")
        opts[flag] = args.pop(0)
    repeats, items = int(opts["--repeats"]), int(opts["--items"])
    noise, iterations = float(opts["--noise"]), opts["--iterations"]
    ssmc = os.path.join(build, "bin", "ssmc")
    work = tempfile.mkdtemp(prefix="ssmc-deconv-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    exes = {}
    for k, (label, net, _) in enumerate(LAWS):
        source = os.path.join(work, f"law{k}.ssm")
        with open(source, "w") as f:
            f.write(f"model law{k} {{\n  net prior : {net};\n  latent z[n] : vector[2] ~ "
                    f"prior();\n  obs x[n] : vector[2] ~ normal(z[n], {noise});\n}}\n")
        exes[label] = os.path.join(work, f"law{k}")
        subprocess.run([ssmc, "build", source, "-o", exes[label]], check=True)
    rows = {label: [] for label, _, _ in LAWS}
    truths = []
    fresh = draw_z(np.random.default_rng(12345), 5000)
    fresh_csv = os.path.join(work, "fresh_z.csv")
    np.savetxt(fresh_csv, fresh, delimiter=",", header="z[0],z[1]", comments="", fmt="%.10g")
    fresh_truth = float(truth_logpdf(fresh).mean())
    for seed in range(1, repeats + 1):
        x = simulate(items, noise, seed)
        data = os.path.join(work, f"items{seed}.csv")
        np.savetxt(data, np.column_stack([np.arange(items), x]), delimiter=",",
                   header="n,x[0],x[1]", comments="", fmt=["%d", "%.10g", "%.10g"])
        truths.append(truth_loglik(x, noise))
        for label, _, rate in LAWS:
            start = time.time()
            density = os.path.join(work, "density.pt")
            out = subprocess.run([exes[label], "vi", "--data", data, "--iterations", iterations,
                                  "--net-learning-rate", rate, "--schedule", "cosine",
                                  "--eval-samples", "200", "--seed", str(seed), "--json",
                                  "--save-density", density],
                                 check=True, capture_output=True, text=True).stdout
            seconds = time.time() - start
            j = json.loads(out)
            e = json.loads(subprocess.run([ssmc, "density", "logpdf", "--load", density, "--at",
                                           fresh_csv, "--json"], check=True, capture_output=True,
                                          text=True).stdout)
            os.remove(density)
            rows[label].append((j["elbo"], j["iwae"], fresh_truth - e["mean_logpdf"],
                                e["parameters"], seconds))
    truth = statistics.median(truths)
    print(f"Orbits through noise sd {noise}: {items} items, {repeats} seeds, medians; "
          f"the true law's log-likelihood {truth:.3f} per item")
    print(f"the true law's mean log-density at 5000 fresh draws of z: {fresh_truth:.3f}")
    print(f"{'law of z':<22} {'ELBO':>8} {'IWAE':>8} {'truth - IWAE':>13} {'KL(z) est':>10} "
          f"{'params':>7} {'time s':>8}")
    for label, _, _ in LAWS:
        r = rows[label]
        gaps = [t - row[1] for t, row in zip(truths, r)]
        med = [statistics.median(row[k] for row in r) for k in range(5)]
        print(f"{label:<22} {med[0]:8.3f} {med[1]:8.3f} {statistics.median(gaps):13.3f} "
              f"{med[2]:10.3f} {int(med[3]):7d} {med[4]:8.1f}")


if __name__ == "__main__":
    main()
