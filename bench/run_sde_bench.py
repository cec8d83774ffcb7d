#!/usr/bin/python3
"""The SDE smoothing benchmark (bench/README.md, "SDEs (issue 20)"): Martin (2022), section 7.5.2,
figures 7.2 and 7.3, on this machine.

  bench/run_sde_bench.py [BUILD_DIR] [--replicates 30] [--keep DIR]

The Sine model (examples/sine_sde.ssm: dX = sin(X - pi/4) dt + dW, Y_k = X_k + N(0, 1) every
0.5 time units, 11 observations) is simulated once; E[X_0 | Y_0:10] is then estimated by
`smooth --method bis` (backward importance sampling whose weights are General Poisson estimates
of the transition density, the forward filter simulating the SDE by Euler-Maruyama) from
--replicates seeds: figure 7.2 with N = 100 and the number of backward samples K from 2 to 100,
figure 7.3 with N from 50 to 2000 and K = N^0.5, N^0.6, N / 10. The reference is the mean of 30
runs of bis with N = 5000, K = 500 (its standard error printed). Each row: the mean over
replicates, its bias against the reference in standard errors, the replicates' standard
deviation, and the median smoothing time.
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


def x0(exe, data, work, n, k, seed):
    out = os.path.join(work, "s.csv")
    j = json.loads(run([exe, "smooth", "--data", data, "--method", "bis", "--particles", str(n),
                        "--backward-samples", str(k), "--marginals", "--seed", str(seed),
                        "--threads", "1", "--json", "--out", out]))
    with open(out) as f:
        next(f)
        return float(next(f).split(",")[1]), j["smooth_s"] + j["filter_s"]


def series(exe, data, work, n, k, reps, seed0):
    vals, times = [], []
    for r in range(reps):
        v, s = x0(exe, data, work, n, k, seed0 + r)
        vals.append(v)
        times.append(s)
    return vals, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--replicates", type=int, default=30)
    ap.add_argument("--keep")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="sde_bench_")
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "sine_sde")
    run([os.path.join(a.build, "bin", "ssmc"), "build",
         os.path.join(ROOT, "examples", "sine_sde.ssm"), "-o", exe])
    data = os.path.join(work, "y.csv")
    run([exe, "simulate", "--T", "11", "--seed", "7", "--out", data])

    ref_vals, _ = series(exe, data, work, 5000, 500, 30, 10000)
    ref = statistics.mean(ref_vals)
    ref_se = statistics.stdev(ref_vals) / math.sqrt(len(ref_vals))
    print(f"reference E[X_0 | Y] = {ref:.4f} (se {ref_se:.4f}; bis, N = 5000, K = 500, 30 runs)")

    def row(label, n, k, seed0):
        vals, times = series(exe, data, work, n, k, a.replicates, seed0)
        m, sd = statistics.mean(vals), statistics.stdev(vals)
        se = math.sqrt(sd * sd / len(vals) + ref_se * ref_se)
        print(f"{label:<22} N={n:<5} K={k:<4} mean {m:.4f}  bias {(m - ref) / se:+.1f} se  "
              f"sd {sd:.4f}  median {1e3 * statistics.median(times):.1f} ms")

    print("\nfigure 7.2: N = 100, K backward samples")
    for k in (2, 5, 10, 20, 50, 100):
        row("bis", 100, k, 20000 + 100 * k)
    print("\nfigure 7.3: N from 50 to 2000")
    for n in (50, 100, 200, 500, 1000, 2000):
        for name, k in (("K = N^0.5", round(n ** 0.5)), ("K = N^0.6", round(n ** 0.6)),
                        ("K = N/10", max(1, n // 10))):
            row(name, n, k, 30000 + n + k)
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
