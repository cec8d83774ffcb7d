#!/usr/bin/python3
"""The hares and lynx benchmark (bench/README.md, "SDEs (issue 20)"): Martin (2022), section
7.5.4, figure 7.8, on the Hudson Bay data (1900-1920).

  bench/run_hare_lynx_bench.py [BUILD_DIR] [--params FIT.json] [--fit em|adam]
                               [--iterations 40] [--trajectories 50] [--replicates 30]
                               [--particles 200] [--backward-samples 20]

examples/hare_lynx_sde.ssm on examples/data/hare_lynx_tenths.csv (the stochastic Lotka-Volterra
model in log-abundances, a step a tenth of a year, pelts observed at whole years). First the
maximum likelihood estimate: EM as the thesis's (`optimize --method em`: bis's E-step, N
particles and K backward draws, --trajectories paths picked among them; an M-step that climbs Q
with the SDE's term estimated by the log of a mean of 32 parametrix estimates per pair; seed 1,
--iterations iterations), or with --fit adam Adam on bis's score (--iterations steps), or the
parameters of --params. Then, at the estimate, from --replicates seeds, the smoothing means
E[h_t | pelts] by bis (parametrix estimates, N particles, K backward draws: the thesis's N = 200,
K = 20) and by the poor man's smoother (the filter's genealogy, N particles), as the thesis's
figure 7.8. Printed: the fit; per year the pelts beside both smoothers' replicate-averaged
abundances exp(E[h_t]); per smoother, the median over the years and both species of the
replicates' standard deviation of E[h_t] (the figure's claim: bis's is much smaller), and the
median time per run; then the poor man's smoother with as many particles as bis's time buys.
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
from run_lv_bench import smooth  # noqa: E402
from run_sde_bench import ROOT, run  # noqa: E402

STEPS = 10  # model steps per year


def read_pelts(path):
    with open(path) as f:
        header = next(f).strip().split(",")
        rows = [[float("nan") if v in ("NA", "") else float(v) for v in line.strip().split(",")]
                for line in f if line.strip()]
    return {name: [r[i] for r in rows] for i, name in enumerate(header)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    p.add_argument("--params")
    p.add_argument("--fit", choices=("em", "adam"), default="em")
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--trajectories", type=int, default=50)
    p.add_argument("--replicates", type=int, default=30)
    p.add_argument("--particles", type=int, default=200)
    p.add_argument("--backward-samples", type=int, default=20)
    a = p.parse_args()
    ssmc = os.path.join(a.build, "bin", "ssmc")
    data = os.path.join(ROOT, "examples", "data", "hare_lynx_tenths.csv")
    work = tempfile.mkdtemp(prefix="ssm-hare-lynx-bench-")
    try:
        exe = os.path.join(work, "hare_lynx_sde")
        run([ssmc, "build", os.path.join(ROOT, "examples", "hare_lynx_sde.ssm"), "-o", exe])
        params = a.params
        if not params:
            params = os.path.join(work, "fit.json")
            extra = (["--e-step", "bis", "--backward-samples", str(a.backward_samples),
                      "--trajectories", str(a.trajectories)] if a.fit == "em" else [])
            fit = json.loads(run([exe, "optimize", "--method", a.fit, "--data", data,
                                  "--particles", str(a.particles), "--max-iterations",
                                  str(a.iterations), "--seed", "1", "--json", "--save", params]
                                 + extra))
            first = fit["starts"][0]
            if fit["log_likelihood"] is None:  # the filter failed at the estimate
                sys.exit(f"{a.fit}: no log-likelihood at the estimate: {fit['message']}")
            print(f"{a.fit}, {a.iterations} iterations, N = {a.particles}: log-likelihood "
                  f"{first['initial_objective']:.2f} at the start, {fit['log_likelihood']:.2f} "
                  f"(se {fit['log_likelihood_se']:.2f}) at the estimate, {fit['elapsed_s']:.0f} s; "
                  f"converged: {fit['converged']} ({fit['message']})")
        with open(params) as f:
            theta = json.load(f)
        print("estimate: " + ", ".join(f"{k} {v:.4g}" for k, v in theta.items()))

        runs = {m: [] for m in ("bis", "genealogy")}
        times = {m: [] for m in runs}
        for r in range(a.replicates):
            for m in runs:
                means, seconds = smooth(exe, data, work, m, a.particles, a.backward_samples,
                                        100 + r, ["--params", params])
                runs[m].append(means)
                times[m].append(seconds)
        pelts = read_pelts(data)
        years = range(0, len(pelts["t"]), STEPS)
        avg = {m: [[statistics.mean(rep[c][t] for rep in runs[m]) for t in range(len(pelts["t"]))]
                   for c in (0, 1)] for m in runs}
        print("\nyear   hares: pelts   bis  poor man | lynx: pelts   bis  poor man")
        for t in years:
            row = [pelts["hare"][t], pelts["lynx"][t]]
            ab = {m: [math.exp(avg[m][c][t]) for c in (0, 1)] for m in runs}
            print(f"{int(pelts['year'][t])}   {row[0]:12.1f} {ab['bis'][0]:5.1f} "
                  f"{ab['genealogy'][0]:9.1f} | {row[1]:11.1f} {ab['bis'][1]:5.1f} "
                  f"{ab['genealogy'][1]:9.1f}")
        print("\nsmoother   median sd of E[h_t] over runs (years, both species)   median time")
        sds = {}
        for m in runs:
            sds[m] = statistics.median(
                statistics.stdev(rep[c][t] for rep in runs[m]) for t in years for c in (0, 1))
            print(f"{m:<10} {sds[m]:.4f}{'':46} {statistics.median(times[m]):.2f} s")
        print(f"ratio poor man / bis: {sds['genealogy'] / sds['bis']:.1f}")
        # The poor man's smoother with as many particles as bis's time buys (10 runs; at most
        # 10^5, and its own time at N is at least a millisecond: the ratio of medians is noisy).
        n_eq = min(100000, int(a.particles * statistics.median(times["bis"]) /
                               max(1e-3, statistics.median(times["genealogy"]))))
        eq, eq_times = [], []
        for r in range(10):
            means, seconds = smooth(exe, data, work, "genealogy", n_eq, 0, 500 + r,
                                    ["--params", params])
            eq.append(means)
            eq_times.append(seconds)
        sd_eq = statistics.median(
            statistics.stdev(rep[c][t] for rep in eq) for t in years for c in (0, 1))
        print(f"genealogy, N = {n_eq} (bis's time): median sd {sd_eq:.4f} over 10 runs, median "
              f"time {statistics.median(eq_times):.2f} s; ratio to bis's sd {sd_eq / sds['bis']:.1f}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
