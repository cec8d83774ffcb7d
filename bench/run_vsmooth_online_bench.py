#!/usr/bin/python3
"""The online variational smoothing benchmark (bench/README.md, "Variational smoothing (issue
17)", streaming): Chagneux (2023), Table 4.2, on this machine.

  bench/run_vsmooth_online_bench.py [BUILD_DIR] [--runs 2] [--T 20000] [--samples 20]
                                    [--learning-rate 1e-2] [--family diagonal] [--keep DIR]

The model is examples/lgssm.ssm (p = q = 10) with the thesis code's parameters (as
run_vsmooth_bench.py): A = diag(U(0.9, 1)), B with entries U(0, 1), Q = R = 0.01 I. For each run
(its own parameters, series and seed) the guide starts, as in the offline benchmark, at the exact
smoother of another model drawn from the same law, and is trained by one streaming pass of
`smooth --method variational --online` (4.13; Adam, N draws per step); the trained guide is then
applied to the whole series (`--iterations 0 --load-guide`) and its marginal smoothing means
compared with RTS's (the thesis's RMSE: root mean square over dimensions, mean over time), with
its KL from the smoothing law. Also printed: the time per step, and the peak memory of the online
run on the first 1000 steps and on all T (flat in T: only the data grows).
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THESIS = (0.004, 13.1)  # Table 4.2: RMSE, ms per gradient step (T = 100 000)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_vsmooth_bench import means, run, setup_run  # noqa: E402  the offline one's


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--T", type=int, default=20000)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--learning-rate", type=float, default=1e-2)
    ap.add_argument("--family", default="diagonal")
    ap.add_argument("--keep")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="vsmooth_online_bench_")
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "lgssm")
    run([os.path.join(a.build, "bin", "ssmc"), "build", os.path.join(ROOT, "examples", "lgssm.ssm"),
         "-o", exe])
    rows = []
    for r in range(a.runs):
        rng = np.random.default_rng(200 + r)
        short = os.path.join(work, f"y{r}_1000.csv")

        def first_1000(data):
            with open(data) as src, open(short, "w") as dst:
                for k, line in enumerate(src):
                    if k > 1000:
                        break
                    dst.write(line)
            return short

        pfile, data, exact, start = setup_run(exe, work, r, rng, a.T, a.family, first_1000)
        before = json.loads(run([exe, "smooth", "--data", data, "--params", pfile, "--method",
                                 "variational", "--load-guide", start, "--iterations", "0",
                                 "--draws", "2", "--json", "--out", os.devnull]))
        online = [exe, "--threads", "1", "smooth", "--params", pfile, "--method", "variational",
                  "--online", "--load-guide", start, "--samples", str(a.samples), "--learning-rate",
                  str(a.learning_rate), "--seed", str(r + 1), "--json"]
        small = json.loads(run(online + ["--data", short, "--save-guide", os.path.join(work, "tmp.pt")]))
        trained = os.path.join(work, f"trained{r}.pt")
        j = json.loads(run(online + ["--data", data, "--save-guide", trained]))
        out = os.path.join(work, f"online{r}.csv")
        after = json.loads(run([exe, "smooth", "--data", data, "--params", pfile, "--method",
                                "variational", "--load-guide", trained, "--iterations", "0",
                                "--draws", "2", "--json", "--out", out]))
        rmse = float(np.mean(np.sqrt(np.mean((means(out) - exact) ** 2, axis=1))))
        ms = 1000 * j["details"]["seconds_per_step"]
        rows.append((rmse, before["kl"], after["kl"], ms, small["peak_rss_mb"], j["peak_rss_mb"]))
        print(f"run {r}: RMSE {rmse:.4f}, KL {before['kl']:.3g} -> {after['kl']:.3g}, {ms:.1f} ms "
              f"per step, peak {small['peak_rss_mb']:.0f} MB at T = 1000, {j['peak_rss_mb']:.0f} "
              f"MB at T = {a.T}, {j['fit_s']:.0f} s", flush=True)
    med = [statistics.median(x[k] for x in rows) for k in range(6)]
    print(f"\np = q = 10, T = {a.T}, N = {a.samples}, {a.runs} runs (medians); Table 4.2 beside")
    print(f"{'RMSE':>8s} {'thesis':>8s} {'KL start':>9s} {'KL end':>9s} {'ms/step':>8s} "
          f"{'thesis':>8s} {'MB T=1e3':>9s} {'MB T':>7s}")
    print(f"{med[0]:8.4f} {THESIS[0]:8.3f} {med[1]:9.3g} {med[2]:9.3g} {med[3]:8.1f} "
          f"{THESIS[1]:8.1f} {med[4]:9.0f} {med[5]:7.0f}")
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
