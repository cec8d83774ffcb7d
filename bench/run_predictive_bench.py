#!/usr/bin/env python3
"""Generative against discriminative posterior predictives (bench/README.md, "Generative vs
discriminative predictives"): the affine regression of Argouarc'h (2024, ch. 3) by `sample
--method gibbs` on examples/affine_generative.ssm and examples/affine_discriminative.ssm, over
REPLICATES data sets, medians printed.

  bench/run_predictive_bench.py [BUILD_DIR] [--replicates 20] [--iterations 2000]

Each data set (as examples/data/make_affine.py, another seed each): y = x + N(0, 1); 50 labelled
items with x ~ N(0, 1); the label to predict and 50 unlabelled items with x ~ N(7.5, 1), the
prior of a label (the generative model's). Supervised runs see the labelled items and the query;
semi-supervised ones the unlabelled items too. Against the true posterior of the query's label,
N((y0 + 7.5) / 2, 1/2) (3.5):

- the Kolmogorov-Smirnov distance of the predictive's draws (4 chains, thinned to their ESS);
- the calibration error: the largest gap, over alpha = 0.05 .. 0.95, between alpha and the share
  of the draws in the true posterior's alpha highest-density interval (the curves of fig. 3.13);
- the two-sample KS test of supervised against semi-supervised draws, as the thesis runs it for
  the discriminative model (fig. 3.12: p = 0.566, the unlabelled data change nothing), and here
  for the generative one too (where they should);
- the time of ssmc's Gibbs sampler (the JSON's elapsed_s: the chains, not the start or the
  summary's diagnostics) against the same sampler vectorised in NumPy (Algorithm 4, as the
  thesis's code writes it), with the two predictive means side by side.
"""
import atexit
import csv
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRIOR_MEAN = 7.5
ALPHAS = [0.05 * k for k in range(1, 20)]


def write_data(path, labelled, unknown):
    with open(path, "w", newline="") as out:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["x", "y"])
        for x, y in labelled:
            w.writerow([repr(x), repr(y)])
        for _, y in unknown:
            w.writerow(["", repr(y)])


def draws_of(prefix, chains, column):
    values = []
    for c in range(1, chains + 1):
        with open("%s_%d.csv" % (prefix, c)) as f:
            rows = [line for line in f if not line.startswith("#")]
        reader = csv.DictReader(rows)
        values.append([float(r[column]) for r in reader])
    return values


def thinned(chains, ess):
    step = max(1, math.ceil(sum(len(c) for c in chains) / max(ess, 1.0)))
    return [v for c in chains for v in c[::step]]


def normal_cdf(x, mean, sd):
    return 0.5 * math.erfc(-(x - mean) / (sd * math.sqrt(2)))


def ks_one(draws, mean, sd):
    xs = sorted(draws)
    n = len(xs)
    return max(max(normal_cdf(x, mean, sd) - i / n, (i + 1) / n - normal_cdf(x, mean, sd))
               for i, x in enumerate(xs))


def kolmogorov_p(d, n_effective):
    lam = (math.sqrt(n_effective) + 0.12 + 0.11 / math.sqrt(n_effective)) * d
    return max(0.0, min(1.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam)
                                     for k in range(1, 101))))


def ks_two(a, b):
    a, b = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            i += 1
        else:
            j += 1
        d = max(d, abs(i / len(a) - j / len(b)))
    return d, kolmogorov_p(d, len(a) * len(b) / (len(a) + len(b)))


def calibration_error(draws, mean, sd):
    z = [abs(x - mean) / sd for x in draws]
    worst = 0.0
    for alpha in ALPHAS:
        half = statistics.NormalDist().inv_cdf((1 + alpha) / 2)
        worst = max(worst, abs(sum(v <= half for v in z) / len(z) - alpha))
    return worst


def numpy_gibbs(labelled, unknown, chains, warmup, iterations, seed):
    """Algorithm 4 for the generative model, vectorised over items (the thesis's code's way):
    the unknown labels, then s2 | b, then b | s2. Returns the query label's draws."""
    rng = np.random.default_rng(seed)
    xl = np.array([x for x, _ in labelled])
    yl = np.array([y for _, y in labelled])
    yu = np.array([y for _, y in unknown])
    out = []
    for _ in range(chains):
        b = np.array([0.0, 1.0])
        s2 = 1.0
        draws = []
        for it in range(warmup + iterations):
            prec = b[1] ** 2 / s2 + 1.0
            mean = (b[1] * (yu - b[0]) / s2 + PRIOR_MEAN) / prec
            xu = mean + rng.standard_normal(len(yu)) / np.sqrt(prec)
            x = np.concatenate([xl, xu])
            y = np.concatenate([yl, yu])
            r = y - b[0] - b[1] * x
            s2 = (0.5 + r @ r / 2) / rng.gamma(0.5 + len(y) / 2)
            X = np.stack([np.ones_like(x), x], axis=1)
            P = np.eye(2) + X.T @ X / s2
            L = np.linalg.cholesky(P)
            m = np.linalg.solve(P, X.T @ y / s2)
            b = m + np.linalg.solve(L.T, rng.standard_normal(2))
            if it >= warmup:
                draws.append(xu[0])
        out.append(draws)
    return out


def main():
    args = sys.argv[1:]
    build = args[0] if args and not args[0].startswith("--") else os.path.join(ROOT, "build")
    option = lambda name, default: int(args[args.index(name) + 1]) if name in args else default
    replicates = option("--replicates", 20)
    iterations = option("--iterations", 2000)
    warmup, chains = 500, 4
    work = tempfile.mkdtemp(prefix="ssmc-predictive-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # also after an error
    exes = {}
    for kind in ("generative", "discriminative"):
        exes[kind] = os.path.join(work, kind)
        subprocess.run([os.path.join(build, "bin", "ssmc"), "build",
                        os.path.join(ROOT, "examples", "affine_%s.ssm" % kind), "-o",
                        exes[kind]], check=True, capture_output=True)
    results = {}
    for r in range(replicates):
        rng = random.Random(1000 + r)
        labelled = [(x, x + rng.gauss(0, 1)) for x in (rng.gauss(0, 1) for _ in range(50))]
        unknown = [(x, x + rng.gauss(0, 1)) for x in (rng.gauss(PRIOR_MEAN, 1) for _ in range(51))]
        y0 = unknown[0][1]
        mean, sd = (y0 + PRIOR_MEAN) / 2, math.sqrt(0.5)
        files = {"supervised": os.path.join(work, "sup%d.csv" % r),
                 "semi-supervised": os.path.join(work, "semi%d.csv" % r)}
        write_data(files["supervised"], labelled, unknown[:1])
        write_data(files["semi-supervised"], labelled, unknown)
        draws = {}
        for kind, exe in exes.items():
            for setting, data in files.items():
                prefix = os.path.join(work, "%s_%s_%d" % (kind, setting, r))
                start = time.time()
                out = subprocess.run([exe, "sample", "--method", "gibbs", "--data", data,
                                      "--json", "--out", prefix + ".csv", "--seed", str(r + 1),
                                      "--chains", str(chains), "--warmup", str(warmup),
                                      "--iterations", str(iterations)],
                                     check=True, capture_output=True, text=True)
                seconds = time.time() - start
                result = json.loads(out.stdout)
                summary = result["summary"]["x.51"]
                d = thinned(draws_of(prefix, chains, "x.51"), summary["ess_bulk"])
                draws[kind, setting] = d
                row = results.setdefault((kind, setting), {"ks": [], "calibration": [],
                                                           "error": [], "seconds": [],
                                                           "sampler": []})
                row["ks"].append(ks_one(d, mean, sd))
                row["calibration"].append(calibration_error(d, mean, sd))
                row["error"].append(abs(summary["mean"] - mean))
                row["seconds"].append(seconds)
                row["sampler"].append(result["elapsed_s"])
        for kind in exes:
            _, p = ks_two(draws[kind, "supervised"], draws[kind, "semi-supervised"])
            results.setdefault((kind, "two-sample"), {"p": []})["p"].append(p)
        start = time.time()
        peer = numpy_gibbs(labelled, unknown, chains, warmup, iterations, r)
        numpy_seconds = time.time() - start
        ours = results["generative", "semi-supervised"]
        row = results.setdefault(("numpy", "semi-supervised"), {"seconds": [], "ratio": [],
                                                                "mean_gap_se": []})
        row["seconds"].append(numpy_seconds)
        row["ratio"].append(numpy_seconds / ours["sampler"][-1])
        # Batch means (20 per chain) for the peer's autocorrelated draws; ours are thinned.
        batches = [statistics.fmean(c[k * len(c) // 20:(k + 1) * len(c) // 20])
                   for c in peer for k in range(20)]
        ours_draws = draws["generative", "semi-supervised"]
        se = math.sqrt(statistics.variance(ours_draws) / len(ours_draws) +
                       statistics.variance(batches) / len(batches))
        gap = statistics.fmean(batches) - statistics.fmean(ours_draws)
        row["mean_gap_se"].append(abs(gap) / se)

    med = statistics.median
    print("%d data sets, %d chains x %d draws (warmup %d); medians over the data sets" %
          (replicates, chains, iterations, warmup))
    print("%-15s %-16s %8s %12s %12s %9s %9s" % ("model", "data", "KS dist", "calibration",
                                                 "|mean err|", "sampler s", "wall s"))
    for kind in ("generative", "discriminative"):
        for setting in ("supervised", "semi-supervised"):
            row = results[kind, setting]
            print("%-15s %-16s %8.3f %12.3f %12.3f %9.3f %9.3f" %
                  (kind, setting, med(row["ks"]), med(row["calibration"]), med(row["error"]),
                   med(row["sampler"]), med(row["seconds"])))
    for kind in ("generative", "discriminative"):
        p = results[kind, "two-sample"]["p"]
        print("%s: supervised vs semi-supervised two-sample KS: median p = %.3f, rejected at 5%% "
              "in %d of %d" % (kind, med(p), sum(v < 0.05 for v in p), len(p)))
    row = results["numpy", "semi-supervised"]
    print("generative semi-supervised: NumPy %.3f s, ssmc's sampler %.3f s (NumPy / ssmc = %.1f; "
          "the wall time adds the start and the summary's diagnostics); predictive means %.2f "
          "(median) standard errors apart" %
          (med(row["seconds"]), med(results["generative", "semi-supervised"]["sampler"]),
           med(row["ratio"]), med(row["mean_gap_se"])))


if __name__ == "__main__":
    main()
