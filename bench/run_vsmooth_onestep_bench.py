#!/usr/bin/python3
"""One-step smoothing and filtering on the chaotic RNN (bench/README.md, "Variational smoothing
(issue 17)", Table 4.4): Chagneux (2023), Table 4.4, on this machine.

  bench/run_vsmooth_onestep_bench.py [BUILD_DIR] [--series 3] [--T 500] [--keep DIR]

examples/chaotic_rnn.ssm (p = q = 5), one simulated series per seed. Three guides, each from the
simulated linear-Gaussian fit (`--init model`), each fitted on its series and then asked for its
per-step moments (`--online-out`): the amortised network encoder trained online with updates
inside 10 epochs (4.15, the thesis's "ours"); the same encoder trained offline by the pathwise
gradient; and the non-amortised family (`--encoder free`: each step's natural parameters its
own, the comparison with Campbell et al. 2021) trained offline by the pathwise gradient. For
each: the thesis's 1-step smoothing RMSE (E_q[x_{t-1} | y_{0:t}] against the true x_{t-1}, root
mean square over dimensions, mean over t >= 1), the filtering RMSE (E_q[x_t | y_{0:t}] against
x_t) and the time per gradient step; medians over the series.
"""
import argparse
import csv
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THESIS = {"ours": (0.089, 0.103, 1.0), "Campbell et al. 2021": (0.092, 0.103, 4.8)}

GUIDES = [
    ("amortised mlp, online (4.15), 10 epochs, N = 16",
     ["--online", "--epochs", "10", "--learning-rate", "1e-3", "--samples", "16"]),
    ("amortised mlp, offline pathwise, 200 steps, K = 16",
     ["--gradient", "pathwise", "--iterations", "200", "--learning-rate", "1e-3",
      "--samples", "16"]),
    ("free (non-amortised), offline pathwise, 200 steps, K = 16",
     ["--encoder", "free", "--gradient", "pathwise", "--iterations", "200", "--learning-rate",
      "1e-2", "--samples", "16"]),
]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def columns(path, names):
    """Rows of the CSV's columns `names`, as lists of floats (an empty cell is NaN)."""
    with open(path) as f:
        return [[float(row[c]) if row[c] != "" else math.nan for c in names]
                for row in csv.DictReader(f)]


def rmse_per_step(estimate, truth):
    """The root mean square over dimensions, averaged over the steps."""
    per_step = [math.sqrt(sum((e - x) ** 2 for e, x in zip(es, xs)) / len(es))
                for es, xs in zip(estimate, truth)]
    return sum(per_step) / len(per_step)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--series", type=int, default=3)
    ap.add_argument("--T", type=int, default=500)
    ap.add_argument("--keep")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="vsmooth_onestep_bench_")
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "chaotic_rnn")
    run([os.path.join(a.build, "bin", "ssmc"), "build",
         os.path.join(ROOT, "examples", "chaotic_rnn.ssm"), "-o", exe])
    xs = [f"x[{d}]" for d in range(5)]
    results = {name: [] for name, _ in GUIDES}
    for k in range(a.series):
        data = os.path.join(work, f"c{k}.csv")
        run([exe, "simulate", "--T", str(a.T), "--seed", str(k + 1), "--out", data])
        truth = columns(data, xs)
        for name, flags in GUIDES:
            steps = os.path.join(work, f"steps{k}_{len(results[name])}.csv")
            j = json.loads(run([exe, "--threads", "1", "smooth", "--data", data, "--method",
                                "variational", "--seed", str(k + 1), "--json", "--online-out",
                                steps, "--out", os.path.join(work, "q.csv")] + flags))
            d = j["details"]
            one_step = columns(steps, [f"one_step_mean_{c}" for c in xs])
            filt = columns(steps, [f"filter_mean_{c}" for c in xs])
            ms = 1e3 * (d["seconds_per_step"] if "seconds_per_step" in d
                        else d["seconds_per_evaluation"])
            results[name].append((rmse_per_step(one_step[1:], truth[:-1]),
                                  rmse_per_step(filt, truth), ms))
            print(f"series {k + 1}: {name}: one-step {results[name][-1][0]:.4f}, filtering "
                  f"{results[name][-1][1]:.4f}, {ms:.1f} ms per step", file=sys.stderr)
    print("| guide | 1-step smoothing RMSE | filtering RMSE | ms per gradient step (online: per "
          "observation; offline: over the whole series) |")
    print("| --- | --- | --- | --- |")
    for name, rows in results.items():
        med = [statistics.median(r[i] for r in rows) for i in range(3)]
        print(f"| {name} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.1f} |")
    for name, (o, f, ms) in THESIS.items():
        print(f"| thesis, {name} | {o:.3f} | {f:.3f} | {ms:.1f} |")
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
