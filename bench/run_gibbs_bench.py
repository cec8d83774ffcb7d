#!/usr/bin/env python3
"""Gibbs against PMMH on a dynamic linear model (bench/README.md, the section of that name): the
Nile flows (examples/data/nile.csv) as a local level model with inverse-gamma priors on both
variances, sampled by `sample --method gibbs` (the state path by forward filtering and backward
sampling, then each variance from its inverse-gamma conditional) and by `sample --method pmmh`
(a random walk with the exact Kalman likelihood), REPEATS times each; medians printed.

  bench/run_gibbs_bench.py [BUILD_DIR] [--repeats 5] [--iterations 4000]

Per run: the posterior means (the two samplers target the same posterior, so they must agree
within their Monte Carlo errors), the smallest bulk ESS over the two variances, the sampler's
time (the JSON's elapsed_s) and ESS per second, whose ratio is the figure of merit.
"""
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODEL = """
model nile_ig {
  param v_eps : real(0, inf) ~ inverse_gamma(2, 10000) = 15000;  // observation noise variance
  param v_eta : real(0, inf) ~ inverse_gamma(2, 1000) = 1500;    // level noise variance
  state level : real;
  obs y : real;
  level[0] ~ normal(1000, 500);
  level[t] ~ normal(level[t-1], sqrt(v_eta));
  y[t] ~ normal(level[t], sqrt(v_eps));
}
"""


def main():
    args = sys.argv[1:]
    build = args[0] if args and not args[0].startswith("--") else os.path.join(ROOT, "build")
    option = lambda name, default: int(args[args.index(name) + 1]) if name in args else default
    repeats = option("--repeats", 5)
    iterations = option("--iterations", 4000)
    work = tempfile.mkdtemp(prefix="ssmc-gibbs-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # also after an error
    source = os.path.join(work, "nile_ig.ssm")
    with open(source, "w") as f:
        f.write(MODEL)
    exe = os.path.join(work, "nile_ig")
    subprocess.run([os.path.join(build, "bin", "ssmc"), "build", source, "-o", exe], check=True,
                   capture_output=True)
    data = os.path.join(ROOT, "examples", "data", "nile.csv")
    rows = {}
    for method in ("gibbs", "pmmh"):
        for r in range(repeats):
            out = subprocess.run([exe, "sample", "--method", method, "--data", data, "--json",
                                  "--seed", str(r + 1), "--iterations", str(iterations),
                                  "--warmup", "1000"],
                                 check=True, capture_output=True, text=True)
            j = json.loads(out.stdout)
            ess = min(j["summary"][p]["ess_bulk"] for p in ("v_eps", "v_eta"))
            row = rows.setdefault(method, {"v_eps": [], "v_eta": [], "se_eps": [], "se_eta": [],
                                           "ess": [], "seconds": [], "ess_per_s": []})
            for p, se in (("v_eps", "se_eps"), ("v_eta", "se_eta")):
                row[p].append(j["summary"][p]["mean"])
                row[se].append(j["summary"][p]["mcse_mean"])
            row["ess"].append(ess)
            row["seconds"].append(j["elapsed_s"])
            row["ess_per_s"].append(ess / j["elapsed_s"])
    med = statistics.median
    print("Nile local level, IG priors: 4 chains x %d draws (warmup 1000), %d runs each; medians"
          % (iterations, repeats))
    print("%-6s %12s %8s %12s %8s %9s %9s %10s" % ("method", "v_eps", "mcse", "v_eta", "mcse",
                                                   "min ESS", "seconds", "ESS / s"))
    for method, row in rows.items():
        print("%-6s %12.0f %8.0f %12.0f %8.0f %9.0f %9.3f %10.0f" %
              (method, med(row["v_eps"]), med(row["se_eps"]), med(row["v_eta"]),
               med(row["se_eta"]), med(row["ess"]), med(row["seconds"]), med(row["ess_per_s"])))
    print("gibbs / pmmh, ESS per second: %.1f" %
          (med(rows["gibbs"]["ess_per_s"]) / med(rows["pmmh"]["ess_per_s"])))


if __name__ == "__main__":
    main()
