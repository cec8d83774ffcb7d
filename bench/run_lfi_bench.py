#!/usr/bin/python3
"""The likelihood-free inference benchmark (bench/README.md, "Likelihood-free inference"):
simulators compiled by ssmc against the sbibm tasks' reference posteriors and sbi's NRE figures.

  bench/run_lfi_bench.py [BUILD_DIR] [--budgets 1000,10000,100000] [--tasks two_moons,gaussian_linear]
                         [--variant b] [--hidden 64,64,64] [--nre-seeds 3] [--npe]
                         [--observations 1] [--no-throughput] [--keep DIR]

1. Simulation throughput: `simulate` of examples/two_moons.ssm (10^6 draws) and examples/sir.ssm
   (10^5 draws, 320 Runge-Kutta steps each) on 1 thread and on all cores, against the same
   simulators written with NumPy, vectorised over the draws (median of 5 runs each).
2. For each task and simulation budget: `simulate --n BUDGET`, `nre` (by default NRE-B with 10
   atoms and a 3 x 64 SiLU classifier, as sbibm's NRE is SNRE-B; `--variant a --hidden 32,32,32`
   is the thesis's), `posterior --sampler ar --draws 10000` given the task's observation (accept-
   reject gives distinct draws: repeated ones, as SIR's, raise the C2ST by themselves), and
   `ssmc c2st` against 10000 reference draws, with the wall time of each step. The references:
   gaussian_linear (10-D) analytic, N(x_o / 2, 0.05 I); two_moons by rejection from the uniform
   prior with its exact likelihood (the density of the radius and the uniform angle, over the
   Jacobian r); sir and lotka_volterra by tempered SMC (`posterior --ratio exact --sampler smc`,
   10^4 draws, 20 moves per step) with their exact likelihoods, slcp's too, then its four
   mirror-image modes given equal mass by random sign flips; gaussian_mixture by rejection
   (a component, then its normal around x_o, kept inside the prior's box); bernoulli_glm by
   random-walk Metropolis on its exact posterior given the sufficient statistics. sbi's NRE C2ST
   from the sbibm paper (Lueckmann et al. 2021, figure 2; medians over 10 observations) are
   printed beside them.
   With --nre-seeds 1,2,3, each budget trains one classifier per seed on the same pairs and
   reports the run with the median C2ST, every seed's beside it. With --observations K, the
   tasks whose x_o is simulated take K of them (seeds 7, 8, ...), each with its reference, and a
   classifier's C2ST is the median over them, as sbibm's figures are over 10; the trained ratio
   serves them all. --no-throughput skips part 1.
3. With --npe, beside NRE at each budget, neural posterior estimation by a conditional DIF on the
   same pairs, at the first observation (`ssmc density fit --model dif --columns THETA --context
   X`, its default 8 maps and 64 x 64 networks, then `ssmc density sample --context` at the
   observation, 10^4 draws), against the same reference: q(theta | x) needs no posterior
   sampler.
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
# How each task's posterior is sampled with the trained ratio: accept-reject (distinct draws)
# where the posterior is not too narrow for it; Lotka-Volterra's accepts about 1 prior draw in
# 10^6, so tempered SMC with 20 moves per step, as its reference.
AR_SAMPLER = ["--sampler", "ar", "--bound-draws", "100000"]
POSTERIOR_SAMPLER = {"lotka_volterra": ["--sampler", "smc", "--moves", "20"],
                     "slcp": ["--sampler", "smc", "--moves", "20"],
                     "bernoulli_glm": ["--sampler", "smc", "--moves", "20"]}
# Options every run of a task's executable takes: bernoulli_glm's design matrix.
TASK_ARGS = {"bernoulli_glm": ["--data-file",
                               os.path.join(ROOT, "examples", "data", "bernoulli_glm.json")]}


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


def gaussian_mixture_reference(x_o, n, rng):
    """The posterior is 1/2 N(x_o, I) + 1/2 N(x_o, 0.01 I) cut to [-10, 10]^2: a component drawn
    with probability 1/2, then its normal, kept when inside the box (the rejection weights each
    component by its mass there, as the posterior does)."""
    out = []
    while sum(len(o) for o in out) < n:
        sd = np.where(rng.uniform(size=n) < 0.5, 1.0, 0.1)[:, None]
        theta = x_o + sd * rng.normal(size=(n, 2))
        out.append(theta[np.all(np.abs(theta) <= 10, 1)])
    return np.concatenate(out)[:n]


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f)


def read_draws(path):
    with open(path) as f:
        lines = [line for line in f if not line.startswith("#")]
    header = lines[0].strip().split(",")
    return header, np.array([[float(v) for v in line.split(",")] for line in lines[1:]])


def symmetrise_slcp(path, rng):
    """SLCP's likelihood reads theta[2] and theta[3] only squared and its prior is symmetric, so
    its posterior has four modes of equal mass, mirror images of each other. Tempered SMC finds
    all four with uneven mass; flipping the two signs of each draw at random makes the masses
    exact and keeps each mode's shape."""
    header, draws = read_draws(path)
    columns = [header.index("theta.3"), header.index("theta.4")]
    for c in columns:
        draws[:, c] = np.abs(draws[:, c]) * rng.choice([-1.0, 1.0], len(draws))
    write_draws(path, draws[:, [header.index("theta.%d" % (k + 1)) for k in range(5)]])


def bernoulli_glm_reference(x_o, n, rng):
    """The Bernoulli GLM's posterior given its sufficient statistics x = X'y: the likelihood is
    exp(theta'x - sum_i log(1 + exp(X_i theta))), whatever the spikes behind x. sbibm samples it
    by Polya-Gamma Gibbs; here 100 random-walk Metropolis chains run side by side, with the
    Laplace approximation's covariance (scaled by 2.38^2 / 10) as the step, 2000 warmup steps,
    then every 25th of the next 2500 steps (sbibm's thinning)."""
    with open(os.path.join(ROOT, "examples", "data", "bernoulli_glm.json")) as f:
        X = np.array(json.load(f)["X"])
    M = 9
    D = np.eye(M) - np.diag(np.ones(M - 1), -1)
    F = D @ D + np.diag(np.sqrt(np.arange(M) / M))
    B = np.zeros((10, 10))
    B[0, 0] = 0.5
    B[1:, 1:] = F.T @ F

    def log_post(theta):  # theta: chains x 10
        psi = theta @ X.T
        return theta @ x_o - np.logaddexp(0, psi).sum(1) - 0.5 * np.einsum("ci,ij,cj->c", theta,
                                                                            B, theta)
    mode = np.zeros(10)
    for _ in range(50):  # Newton on the log posterior
        p = 1 / (1 + np.exp(-(X @ mode)))
        grad = X.T @ (0 - p) + x_o - B @ mode
        H = X.T @ (X * (p * (1 - p))[:, None]) + B
        mode = mode + np.linalg.solve(H, grad)
    L = np.linalg.cholesky(np.linalg.inv(H) * 2.38 ** 2 / 10)
    chains = n // 100
    theta = mode + rng.standard_normal((100, 10)) @ np.linalg.cholesky(np.linalg.inv(H)).T
    lp = log_post(theta)
    out = []
    for step in range(2000 + 25 * chains):
        proposal = theta + rng.standard_normal((100, 10)) @ L.T
        lp_new = log_post(proposal)
        accept = np.log(rng.uniform(size=100)) < lp_new - lp
        theta[accept], lp[accept] = proposal[accept], lp_new[accept]
        if step >= 2000 and (step - 2000) % 25 == 24:
            out.append(theta.copy())
    return np.concatenate(out)[:n]


def write_draws(path, draws):
    d = draws.shape[1]
    with open(path, "w") as f:
        f.write(",".join("theta.%d" % (k + 1) for k in range(d)) + "\n")
        for row in draws:
            f.write(",".join(repr(float(v)) for v in row) + "\n")


def sir_numpy(n, rng):
    """examples/sir.ssm in NumPy, vectorised over the draws: the same Runge-Kutta steps."""
    big_n = 1e6
    beta = rng.lognormal(math.log(0.4), 0.5, n)
    gamma = rng.lognormal(math.log(0.125), 0.2, n)

    def rate(y):
        inf = beta * y[0] * y[1] / big_n
        return np.stack([-inf, inf - gamma * y[1], gamma * y[1]])
    y = np.stack([np.full(n, big_n - 1), np.ones(n), np.zeros(n)])
    h, infected = 0.5, []
    for _ in range(10):
        for _ in range(32):  # 16 days in steps of 0.5
            k1 = rate(y)
            k2 = rate(y + h / 2 * k1)
            k3 = rate(y + h / 2 * k2)
            k4 = rate(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        infected.append(y[1] / big_n)
    return rng.binomial(1000, np.clip(np.stack(infected, 1), 0, 1))


SIMULATORS = (("two_moons", 1_000_000, two_moons_numpy), ("sir", 100_000, sir_numpy))


def throughput(build, work):
    """Draws per second of each simulator: ssmc on 1 and all cores, NumPy vectorised."""
    out = {}
    for task, n, numpy_simulator in SIMULATORS:
        src = os.path.join(ROOT, "examples", task + ".ssm")
        exe = os.path.join(work, task)
        run([os.path.join(build, "bin", "ssmc"), "build", src, "-o", exe], json_out=False)
        cores = os.cpu_count() or 1
        rates = {"ssmc 1 thread": [], "ssmc %d threads" % cores: [], "numpy": []}
        rng = np.random.default_rng(1)
        for rep in range(5):
            for threads, key in ((1, "ssmc 1 thread"), (cores, "ssmc %d threads" % cores)):
                j = run([exe, "simulate", "--n", str(n), "--threads", str(threads), "--seed",
                         str(rep + 1), "--json"])
                rates[key].append(n / j["elapsed_s"])
            start = time.time()
            numpy_simulator(n, rng)
            rates["numpy"].append(n / (time.time() - start))
        print("\nSimulation throughput, %s, %d draws (millions per second, median of 5)"
              % (task, n))
        numpy_rate = statistics.median(rates["numpy"])
        for key, values in rates.items():
            m = statistics.median(values)
            print("  %-18s %8.3f   x%.1f of NumPy" % (key, m / 1e6, m / numpy_rate))
        out[task] = {k: statistics.median(v) for k, v in rates.items()}
    return out


def npe_run(build, work, task, budget, pairs, observed_json, sim_json, ref_path):
    """NPE with a conditional DIF on the pairs: C2ST, fit and sampling times."""
    ssmc = os.path.join(build, "bin", "ssmc")
    saved = os.path.join(work, "%s_%d.npe" % (task, budget))
    context = os.path.join(work, "%s_xo_context.csv" % task)
    post = os.path.join(work, "%s_%d_npe.csv" % (task, budget))
    names = sim_json["observations"]
    values = [v for key in observed_json for v in observed_json[key]]
    with open(context, "w") as f:
        f.write(",".join(names) + "\n" + ",".join(repr(v) for v in values) + "\n")
    fit, t_fit = timed([ssmc, "density", "fit", "--data", pairs, "--model", "dif",
                        "--columns"] + sim_json["parameters"] + ["--context"] + names +
                       ["--save", saved, "--seed", "3"])
    _, t_sample = timed([ssmc, "density", "sample", "--load", saved, "--context", context,
                         "--n", "10000", "--seed", "5", "--out", post], json_out=False)
    with open(post) as f:  # the draws without the context's columns, which repeat x_o
        header = f.readline().strip().split(",")
        keep = [header.index(name) for name in sim_json["parameters"]]
        rows = [line.strip().split(",") for line in f]
    with open(post, "w") as f:
        f.write(",".join(sim_json["parameters"]) + "\n")
        f.writelines(",".join(row[k] for k in keep) + "\n" for row in rows)
    c = run([ssmc, "c2st", post, ref_path, "--json", "--threads", str(os.cpu_count() or 1)])
    return {"c2st": c["c2st"], "fit_s": t_fit, "sample_s": t_sample, "epochs": fit.get("epochs")}


def observation_and_reference(exe, work, task, seed, rng, extra):
    """One observation x_o (written as --observed takes it) and 10^4 reference draws given it."""
    tag = "%s_obs%d" % (task, seed)
    ref_path = os.path.join(work, tag + "_reference.csv")
    observed = os.path.join(work, tag + "_xo.json")
    if task == "two_moons":
        x_o = np.array([0.0, 0.0])  # the crescent's centre: a bimodal posterior
        write_draws(ref_path, two_moons_reference(x_o, 10000, rng))
        observed_json = {"x": x_o.tolist()}
    else:  # x_o simulated with the given seed
        one = os.path.join(work, tag + "_xo.csv")
        sim = run([exe, "simulate", "--n", "1", "--seed", str(seed), "--json", "--out", one] +
                  extra)
        with open(one) as f:
            row = dict(zip(f.readline().strip().split(","),
                           (float(v) for v in f.readline().split(","))))
        observed_json = {}
        for column in sim["observations"]:  # x[0], x[1], ...: by name, in order
            observed_json.setdefault(column.split("[")[0], []).append(row[column])
        if task == "gaussian_linear":
            x_o = np.array(observed_json["x"])
            write_draws(ref_path, rng.normal(x_o / 2, math.sqrt(0.05), (10000, len(x_o))))
        elif task == "bernoulli_glm":
            x_o = np.array(observed_json["x"])
            write_draws(ref_path, bernoulli_glm_reference(x_o, 10000, rng))
        elif task == "gaussian_mixture":
            x_o = np.array(observed_json["x"])
            write_draws(ref_path, gaussian_mixture_reference(x_o, 10000, rng))
        else:  # the exact likelihood, by tempered SMC: 10^4 nearly independent draws
            write_json(observed, observed_json)
            run([exe, "posterior", "--ratio", "exact", "--observed", observed, "--sampler", "smc",
                 "--draws", "10000", "--moves", "20", "--seed", "9", "--out", ref_path, "--json"] +
                extra)
            if task == "slcp":
                symmetrise_slcp(ref_path, rng)
    write_json(observed, observed_json)
    return observed, observed_json, ref_path


def task_run(build, work, task, budgets, rng, nre_args, nre_seeds, n_obs, npe=False):
    src = os.path.join(ROOT, "examples", task + ".ssm")
    exe = os.path.join(work, task)
    run([os.path.join(build, "bin", "ssmc"), "build", src, "-o", exe], json_out=False)
    extra = TASK_ARGS.get(task, [])
    # x_o from simulations with seeds 7, 8, ... (sbibm's figures are medians over 10
    # observations); two_moons has the one x_o = (0, 0).
    observations = [observation_and_reference(exe, work, task, 7 + k, rng, extra)
                    for k in range(1 if task == "two_moons" else n_obs)]
    _, observed_json, ref_path = observations[0]  # --npe's observation
    rows = []
    for i, budget in enumerate(budgets):
        pairs = os.path.join(work, "%s_%d.csv" % (task, budget))
        ratio = os.path.join(work, "%s_%d.ratio" % (task, budget))
        post = os.path.join(work, "%s_%d_post.csv" % (task, budget))
        sim_json, t_sim = timed([exe, "simulate", "--n", str(budget), "--seed", "11", "--out",
                                 pairs, "--json"] + extra)
        # One run per classifier seed (--nre-seeds): at small budgets the trained ratio, and so
        # the C2ST, varies with the initialisation; the row is the run with the median C2ST.
        # With several observations, each classifier's C2ST is the median over them (one
        # trained ratio serves every observation), and so is the mean error.
        runs = []
        for seed in nre_seeds:
            fit, t_fit = timed([exe, "nre", "--pairs", pairs, "--save", ratio, "--seed",
                                str(seed), "--json"] + nre_args + extra)
            per_obs = []
            for obs_path, _, obs_ref in observations:
                p, t_post = timed([exe, "posterior", "--ratio", ratio, "--observed", obs_path,
                                   "--draws", "10000", "--seed", "5", "--out", post, "--json"] +
                                  POSTERIOR_SAMPLER.get(task, AR_SAMPLER) + extra)
                c = run([os.path.join(build, "bin", "ssmc"), "c2st", post, obs_ref, "--json",
                         "--threads", str(os.cpu_count() or 1)])
                per_obs.append((c["c2st"], c["mean_error"]))
            c = {"c2st": statistics.median(v[0] for v in per_obs),
                 "mean_error": statistics.median(v[1] for v in per_obs),
                 "by_observation": [v[0] for v in per_obs]}
            runs.append((c["c2st"], seed, c, fit, t_fit, p, t_post))
        runs.sort(key=lambda r: r[0])
        _, seed, c, fit, t_fit, p, t_post = runs[(len(runs) - 1) // 2]
        sbi = SBI_NRE.get(task, (None,) * 3)[BUDGETS.index(budget)] if budget in BUDGETS else None
        rows.append({"budget": budget, "c2st": c["c2st"], "sbi_nre": sbi,
                     "c2st_by_observation": c["by_observation"],
                     "c2st_by_seed": {str(r[1]): r[0] for r in runs},
                     "mean_error": c["mean_error"], "simulate_s": t_sim, "nre_s": t_fit,
                     "epochs": fit["epochs"], "validation_loss": fit["validation_loss"],
                     "posterior_s": t_post, "acceptance": p["acceptance_rate"]})
        if npe:
            rows[-1]["npe"] = npe_run(build, work, task, budget, pairs, observed_json, sim_json,
                                      ref_path)
    print("\n%s: C2ST of nre %s + %s (10^4 draws) against the reference, sbi's NRE beside it"
          % (task, " ".join(nre_args), POSTERIOR_SAMPLER.get(task, AR_SAMPLER)[1]))
    print("  %8s %7s %8s %10s %8s %7s %9s %8s %10s" % (
        "budget", "c2st", "sbi NRE", "mean err", "sim s", "nre s", "epochs", "post s",
        "acceptance"))
    for r in rows:
        print("  %8d %7.3f %8s %10.3f %8.2f %7.1f %9d %8.2f %10.2g  %s" % (
            r["budget"], r["c2st"], "-" if r["sbi_nre"] is None else "%.2f" % r["sbi_nre"],
            r["mean_error"], r["simulate_s"], r["nre_s"], r["epochs"], r["posterior_s"],
            r["acceptance"], (" ".join("seed %s: %.3f" % kv for kv in r["c2st_by_seed"].items())
                              if len(r["c2st_by_seed"]) > 1 else "") +
            ("  observations %.3f-%.3f" % (min(r["c2st_by_observation"]),
                                           max(r["c2st_by_observation"]))
             if len(r["c2st_by_observation"]) > 1 else "")))
    if npe:
        print("  NPE (conditional DIF, 8 maps) on the same pairs:")
        print("  %8s %7s %8s %9s %8s" % ("budget", "c2st", "nre c2st", "fit s", "sample s"))
        for r in rows:
            print("  %8d %7.3f %8.3f %9.1f %8.2f" % (r["budget"], r["npe"]["c2st"], r["c2st"],
                                                    r["npe"]["fit_s"], r["npe"]["sample_s"]))
    return rows


def main():
    build = "build"
    budgets = list(BUDGETS)
    tasks = ["gaussian_linear", "two_moons"]
    keep = None
    npe = False
    nre_args = ["--variant", "b", "--hidden", "64,64,64"]
    nre_seeds = [3]
    n_obs = 1
    throughput_too = True
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
        elif a == "--nre-seeds":
            nre_seeds = [int(v) for v in args.pop(0).split(",")]
        elif a == "--observations":
            n_obs = int(args.pop(0))
        elif a == "--no-throughput":
            throughput_too = False
        elif a == "--npe":
            npe = True
        elif a == "--keep":
            keep = args.pop(0)
        else:
            build = a
    work = keep or tempfile.mkdtemp(prefix="ssmc-lfi-bench-")
    os.makedirs(work, exist_ok=True)
    print("load average before:", os.getloadavg())
    rng = np.random.default_rng(2024)
    results = {"throughput": throughput(build, work)} if throughput_too else {}
    for task in tasks:
        results[task] = task_run(build, work, task, budgets, rng, nre_args, nre_seeds, n_obs,
                                 npe)
    print("load average after:", os.getloadavg())
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    if not keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
