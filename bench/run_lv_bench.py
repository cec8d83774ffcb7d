#!/usr/bin/python3
"""The stochastic Lotka-Volterra benchmark (bench/README.md, "SDEs (issue 20)"): Martin (2022),
section 7.5.4, figures 7.7 and 7.8, on simulated data.

  bench/run_lv_bench.py [BUILD_DIR] [--replicates 30] [--particles 200] [--backward-samples 20]

examples/lotka_volterra_sde.ssm (the thesis's parameters, written in log-abundances h so that the
coefficient G is constant) is simulated once over t_0 .. t_300 (every 0.01, seed 7). Then, from
--replicates seeds, the smoothing means E[h_t | z_0:300] by bis with parametrix estimates of the
transition density (N particles, K backward draws: the thesis's N = 200, K = 20) and by the poor
man's smoother (the filter's genealogy, N particles). Printed: a few rows of the truth beside
both smoothers' replicate-averaged means (figure 7.7's picture, as numbers); per smoother, over
t and both components, the median of the replicates' standard deviation (figure 7.8's claim:
bis's is much smaller), the root mean square error of the replicate-averaged mean against the
simulated truth, and the median time per run; and the poor man's smoother again with as many
more particles as bis's time allows.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_sde_bench import ROOT, run  # noqa: E402


def read_csv(path):
    with open(path) as f:
        header = next(f).strip().split(",")
        rows = [list(map(float, line.split(","))) for line in f if line.strip()]
    return {name: [r[i] for r in rows] for i, name in enumerate(header)}


def smooth(exe, data, work, method, n, k, seed, extra=()):
    out = os.path.join(work, f"{method}.csv")
    cmd = [exe, "smooth", "--data", data, "--method", method, "--particles", str(n),
           "--marginals", "--seed", str(seed), "--json", "--out", out, *extra]
    if method == "bis":
        cmd += ["--backward-samples", str(k)]
    j = json.loads(run(cmd))
    table = read_csv(out)
    return [table["mean_h[0]"], table["mean_h[1]"]], j["filter_s"] + j["smooth_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    p.add_argument("--replicates", type=int, default=30)
    p.add_argument("--particles", type=int, default=200)
    p.add_argument("--backward-samples", type=int, default=20)
    a = p.parse_args()
    ssmc = os.path.join(a.build, "bin", "ssmc")
    work = tempfile.mkdtemp(prefix="ssm-lv-bench-")
    try:
        exe = os.path.join(work, "lv")
        run([ssmc, "build", os.path.join(ROOT, "examples", "lotka_volterra_sde.ssm"), "-o", exe])
        data = os.path.join(work, "lv.csv")
        run([exe, "simulate", "--T", "301", "--seed", "7", "--out", data])
        truth = read_csv(data)
        truth = [truth["h[0]"], truth["h[1]"]]
        T = len(truth[0])
        results = {}

        def replicates(label, method, n):
            means, times = [], []
            for r in range(a.replicates):
                m, s = smooth(exe, data, work, method, n, a.backward_samples, 100 + r)
                means.append(m)
                times.append(s)
            results[label] = (means, times)

        replicates("bis", "bis", a.particles)
        replicates("genealogy", "genealogy", a.particles)
        # The poor man's smoother given bis's time: as many more particles.
        ratio = statistics.median(results["bis"][1]) / statistics.median(results["genealogy"][1])
        same_time = int(a.particles * max(1.0, ratio))
        replicates(f"genealogy, N = {same_time} (N scaled by bis's time over its own)", "genealogy",
                   same_time)
        print(f"Lotka-Volterra SDE, T = {T}, N = {a.particles}, bis K = {a.backward_samples}, "
              f"{a.replicates} replicates")
        print("t      prey: truth  bis     poor man | predators: truth  bis     poor man")
        for t in range(0, T, 50):
            row = [math.exp(truth[c][t]) for c in (0, 1)]
            avg = {m: [math.exp(statistics.fmean(rep[c][t] for rep in results[m][0]))
                       for c in (0, 1)] for m in ("bis", "genealogy")}
            print(f"{t:4d}   {row[0]:11.2f} {avg['bis'][0]:7.2f} {avg['genealogy'][0]:8.2f} | "
                  f"{row[1]:16.2f} {avg['bis'][1]:7.2f} {avg['genealogy'][1]:8.2f}")
        print("smoother: median sd of E[h_t | z] over replicates, RMSE of their mean vs truth "
              "(log scale), median time per run")
        for m, (means, times) in results.items():
            sds, sq = [], []
            for c in (0, 1):
                for t in range(T):
                    v = [rep[c][t] for rep in means]
                    sds.append(statistics.stdev(v))
                    sq.append((statistics.fmean(v) - truth[c][t]) ** 2)
            print(f"  {m}: sd {statistics.median(sds):.4f}, RMSE "
                  f"{math.sqrt(statistics.fmean(sq)):.4f}, {statistics.median(times):.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
