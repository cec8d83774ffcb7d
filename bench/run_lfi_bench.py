#!/usr/bin/python3
"""The likelihood-free inference benchmark (bench/README.md, "Likelihood-free inference"):
simulators compiled by ssmc against the sbibm tasks' reference posteriors and sbi's NRE figures.

  bench/run_lfi_bench.py [BUILD_DIR] [--budgets 1000,10000,100000] [--tasks two_moons,gaussian_linear]
                         [--variant b] [--hidden 64,64,64] [--keep DIR]

1. Simulation throughput: `simulate --n 10^6` of examples/two_moons.ssm on 1 thread and on all
   cores, against the same simulator written with NumPy, vectorised (median of 5 runs each).
2. For each task and simulation budget: `simulate --n BUDGET`, `nre` (by default NRE-B with 10
   atoms and a 3 x 64 SiLU classifier, as sbibm's NRE is SNRE-B; `--variant a --hidden 32,32,32`
   is the thesis's), `posterior --sampler ar --draws 10000` given the task's observation (accept-
   reject gives distinct draws: repeated ones, as SIR's, raise the C2ST by themselves), and
   `ssmc c2st` against 10000 reference draws, with the wall time of each step. The references:
   gaussian_linear (10-D) analytic, N(x_o / 2, 0.05 I); two_moons by rejection from the uniform
   prior with its exact likelihood (the density of the radius and the uniform angle, over the
   Jacobian r). sbi's NRE C2ST from the sbibm paper (Lueckmann et al. 2021, figure 2; medians
   over 10 observations) are printed beside them.
"""
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# sbi's NRE, C2ST at 10^3 / 10^4 / 10^5 simulations (sbibm, Lueckmann et al. 2021), and the
# median time of two_moons at 10^5 (148 min, on their machines).
SBI_NRE = {"two_moons": (0.82, 0.76, 0.63), "gaussian_linear": (0.67, 0.56, 0.54),
           "slcp": (0.97, 0.95, 0.92)}
BUDGETS = (1000, 10000, 100000)


def run(args, json_out=True):
    out = subprocess.run(args, check=True, capture_output=True, text=True)
    return json.loads(out.stdout) if json_out else out.stdout


def timed(args, json_out=True):
    start = time.time()
    result = run(args, json_out)
    return result, time.time() - start


def two_moons_numpy(n, rng):
    theta = rng.uniform(-1, 1, (n, 2))
    a = rng.uniform(-math.pi / 2, math.pi / 2, n)
    r = rng.normal(0.1, 0.01, n)
    p = np.stack([r * np.cos(a) + 0.25, r * np.sin(a)], 1)
    shift = np.stack([-np.abs(theta[:, 0] + theta[:, 1]) / math.sqrt(2),
                      (theta[:, 1] - theta[:, 0]) / math.sqrt(2)], 1)
    return theta, p + shift


def two_moons_reference(x_o, n, rng):
    """Rejection from the uniform prior with the exact likelihood p(x | theta)."""
    def density(theta):
        shift = np.stack([-np.abs(theta[:, 0] + theta[:, 1]) / math.sqrt(2),
                          (theta[:, 1] - theta[:, 0]) / math.sqrt(2)], 1)
        u = x_o[0] - shift[:, 0] - 0.25
        v = x_o[1] - shift[:, 1]
        r = np.hypot(u, v)
        inside = u > 0  # the angle in (-pi/2, pi/2)
        dens = np.exp(-0.5 * ((r - 0.1) / 0.01) ** 2) / (0.01 * math.sqrt(2 * math.pi))
        return np.where(inside & (r > 0), dens / math.pi / np.maximum(r, 1e-12), 0.0)
    # Bound: the radius density at most 1 / (0.01 sqrt(2 pi)), 1 / r at most 1 / 0.05 where the
    # radius density is not negligible (r > 0.05 is 5 sd below 0.1); checked on the proposals.
    bound = 1 / (0.01 * math.sqrt(2 * math.pi)) / math.pi / 0.05
    out = []
    while sum(len(o) for o in out) < n:
        theta = rng.uniform(-1, 1, (2_000_000, 2))
        d = density(theta)
        assert d.max() <= bound, "the rejection bound is too low"
        out.append(theta[rng.uniform(0, bound, len(d)) < d])
    return np.concatenate(out)[:n]


def write_draws(path, draws):
    d = draws.shape[1]
    with open(path, "w") as f:
        f.write(",".join("theta.%d" % (k + 1) for k in range(d)) + "\n")
        for row in draws:
            f.write(",".join(repr(float(v)) for v in row) + "\n")


def throughput(build, work):
    src = os.path.join(ROOT, "examples", "two_moons.ssm")
    exe = os.path.join(work, "two_moons")
    run([os.path.join(build, "bin", "ssmc"), "build", src, "-o", exe], json_out=False)
    n = 1_000_000
    cores = os.cpu_count() or 1
    rates = {"ssmc 1 thread": [], "ssmc %d threads" % cores: [], "numpy": []}
    rng = np.random.default_rng(1)
    for rep in range(5):
        for threads, key in ((1, "ssmc 1 thread"), (cores, "ssmc %d threads" % cores)):
            j = run([exe, "simulate", "--n", str(n), "--threads", str(threads), "--seed",
                     str(rep + 1), "--json"])
            rates[key].append(n / j["elapsed_s"])
        start = time.time()
        two_moons_numpy(n, rng)
        rates["numpy"].append(n / (time.time() - start))
    print("\nSimulation throughput, two_moons, 10^6 draws (millions per second, median of 5)")
    numpy_rate = statistics.median(rates["numpy"])
    for key, values in rates.items():
        m = statistics.median(values)
        print("  %-18s %8.2f   x%.1f of NumPy" % (key, m / 1e6, m / numpy_rate))
    return {k: statistics.median(v) for k, v in rates.items()}


def task_run(build, work, task, budgets, rng, nre_args):
    src = os.path.join(ROOT, "examples", task + ".ssm")
    exe = os.path.join(work, task)
    run([os.path.join(build, "bin", "ssmc"), "build", src, "-o", exe], json_out=False)
    if task == "two_moons":
        x_o = np.array([0.0, 0.0])  # the crescent's centre: a bimodal posterior
        reference = two_moons_reference(x_o, 10000, rng)
    else:
        x_o = run([exe, "simulate", "--n", "1", "--seed", "7"], json_out=False)
        x_o = np.array([float(v) for v in x_o.splitlines()[1].split(",")[10:]])
        reference = rng.normal(x_o / 2, math.sqrt(0.05), (10000, len(x_o)))
    ref_path = os.path.join(work, task + "_reference.csv")
    write_draws(ref_path, reference)
    observed = os.path.join(work, task + "_xo.json")
    with open(observed, "w") as f:
        json.dump({"x": x_o.tolist()}, f)
    rows = []
    for i, budget in enumerate(budgets):
        pairs = os.path.join(work, "%s_%d.csv" % (task, budget))
        ratio = os.path.join(work, "%s_%d.ratio" % (task, budget))
        post = os.path.join(work, "%s_%d_post.csv" % (task, budget))
        _, t_sim = timed([exe, "simulate", "--n", str(budget), "--seed", "11", "--out", pairs],
                         json_out=False)
        fit, t_fit = timed([exe, "nre", "--pairs", pairs, "--save", ratio, "--seed", "3",
                            "--json"] + nre_args)
        p, t_post = timed([exe, "posterior", "--ratio", ratio, "--observed", observed,
                           "--sampler", "ar", "--draws", "10000", "--bound-draws", "100000",
                           "--seed", "5", "--out", post, "--json"])
        c = run([os.path.join(build, "bin", "ssmc"), "c2st", post, ref_path, "--json",
                 "--threads", str(os.cpu_count() or 1)])
        sbi = SBI_NRE.get(task, (None,) * 3)[BUDGETS.index(budget)] if budget in BUDGETS else None
        rows.append({"budget": budget, "c2st": c["c2st"], "sbi_nre": sbi,
                     "mean_error": c["mean_error"], "simulate_s": t_sim, "nre_s": t_fit,
                     "epochs": fit["epochs"], "validation_loss": fit["validation_loss"],
                     "posterior_s": t_post, "acceptance": p["acceptance_rate"]})
    print("\n%s: C2ST of nre %s + ar (10^4 draws) against the reference, sbi's NRE beside it"
          % (task, " ".join(nre_args)))
    print("  %8s %7s %8s %10s %8s %7s %9s %8s %10s" % (
        "budget", "c2st", "sbi NRE", "mean err", "sim s", "nre s", "epochs", "post s",
        "ar acc"))
    for r in rows:
        print("  %8d %7.3f %8s %10.3f %8.2f %7.1f %9d %8.2f %10.2g" % (
            r["budget"], r["c2st"], "-" if r["sbi_nre"] is None else "%.2f" % r["sbi_nre"],
            r["mean_error"], r["simulate_s"], r["nre_s"], r["epochs"], r["posterior_s"],
            r["acceptance"]))
    return rows


def main():
    build = "build"
    budgets = list(BUDGETS)
    tasks = ["gaussian_linear", "two_moons"]
    keep = None
    nre_args = ["--variant", "b", "--hidden", "64,64,64"]
    args = sys.argv[1:]
    while args:
        a = args.pop(0)
        if a == "--budgets":
            budgets = [int(b) for b in args.pop(0).split(",")]
        elif a == "--tasks":
            tasks = args.pop(0).split(",")
        elif a == "--variant":
            nre_args[1] = args.pop(0)
        elif a == "--hidden":
            nre_args[3] = args.pop(0)
        elif a == "--keep":
            keep = args.pop(0)
        else:
            build = a
    work = keep or tempfile.mkdtemp(prefix="ssmc-lfi-bench-")
    os.makedirs(work, exist_ok=True)
    print("load average before:", os.getloadavg())
    rng = np.random.default_rng(2024)
    results = {"throughput": throughput(build, work)}
    for task in tasks:
        results[task] = task_run(build, work, task, budgets, rng, nre_args)
    print("load average after:", os.getloadavg())
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    if not keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
