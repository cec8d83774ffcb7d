#!/usr/bin/env python3
"""The density estimation benchmark (bench/README.md, "Discretely Indexed Flows"): `ssmc density`
on the targets of Argouarc'h (2024, ch. 4), each model fitted over SEEDS seeds, medians printed.

  bench/run_density_bench.py [BUILD_DIR] [--only image,toys,digits] [--seeds 3] [--keep DIR]

1. image: the photograph ../shared/data/camera_128.pgm read as a density on [0, 1]^2 (a pixel with
   probability proportional to its intensity, then a uniform point in it); 30000 training points,
   20000 test points. DIF (K = 32 location-scale maps, weights 2-64-64-32), the classifier-based
   energy model of the thesis's 2.1.4 (a 3 x 128 SiLU classifier against the data's Gaussian,
   the thesis's 3 x 512 narrowed for time; figure 2.4; its samplers' C2ST against the test
   points), RealNVP and MAF
   (8 layers, 64-64 networks), a full-covariance GMM of 49 components by EM (the thesis's 343
   parameters, counting 7 per component; 293 free parameters as ssmc counts them). Test mean log-likelihood and parameter counts; the true density's own test
   log-likelihood (piecewise constant, known exactly) is the ceiling. Each model's density is
   drawn as a PGM image beside the target (with --keep).
2. toys: Orbits (7 modes on a ring of radius 2.5, covariance 0.04 I), TwoCircles, two moons:
   RealNVP of 4 layers, and of 5 (the size of the cascade), against the same flow with a DIF of
   K = 2 between its 2nd and 3rd layers (realnvp,dif,realnvp: the thesis's figure 4.12) and the
   energy model (3 x 32, figure 2.3, with its samplers' C2ST), test log-likelihood and the mass
   the fitted density puts between the modes (over 4 sd of the noise from every mode, ring or
   arc).
3. digits: the 8x8 digits dequantised and logit-transformed (lambda = 1e-6): a full-covariance
   Gaussian against a location-scale DIF, and a MAF against a DIF cascaded with the same MAF
   (Table 4.2 at this scale), test log-likelihood in nats per image of the logit space.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import density_targets as targets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
if not os.path.isdir(DATA):
    DATA = os.path.join(ROOT, "..", "shared", "data")


def ssmc(build, *args):
    out = subprocess.run([os.path.join(build, "bin", "ssmc"), "density", *args],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else out.stdout


def fit_and_test(build, work, name, train, test, model_args, seed):
    saved = os.path.join(work, "%s_%d.pt" % (name, seed))
    if "gmm" not in model_args:
        model_args = model_args + ["--precision", "single"]  # the networks in float32
    start = time.time()
    fit = ssmc(build, "fit", "--data", train, "--save", saved, "--seed", str(seed), *model_args)
    seconds = time.time() - start
    lp = ssmc(build, "logpdf", "--load", saved, "--at", test, "--json")
    return {"test": lp["mean_logpdf"], "se": lp["se"], "params": fit["parameters"],
            "epochs": fit["epochs"], "seconds": seconds, "saved": saved}


def table(title, rows, extra=()):
    print("\n" + title)
    head = ["model", "parameters", "test log p (median)", "min", "max", "fit s"] + \
        [e[0] for e in extra]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, runs in rows:
        tests = [r["test"] for r in runs]
        cells = [name, str(runs[0]["params"]), "%.4f" % statistics.median(tests),
                 "%.4f" % min(tests), "%.4f" % max(tests),
                 "%.1f" % statistics.median(r["seconds"] for r in runs)]
        cells += [e[1](runs) for e in extra]
        print("| " + " | ".join(cells) + " |")


def image_bench(build, work, seeds, keep):
    pgm = os.path.join(DATA, "camera_128.pgm")
    train, test = os.path.join(work, "image_train.csv"), os.path.join(work, "image_test.csv")
    import random
    targets.write(train, ["x", "y"], targets.image_points(pgm, 30000, random.Random(1), 1.0))
    test_points = targets.image_points(pgm, 20000, random.Random(2), 1.0)
    targets.write(test, ["x", "y"], test_points)
    ceiling = targets.image_log_prob(pgm, test_points, 1.0)
    models = [
        ("dif K=32", ["--model", "dif", "--components", "32", "--hidden", "64,64",
                      "--epochs", "60", "--lr", "3e-3"]),
        ("realnvp 8", ["--model", "realnvp", "--layers", "8", "--hidden", "64,64",
                       "--epochs", "60", "--lr", "3e-3"]),
        ("maf 8", ["--model", "maf", "--layers", "8", "--hidden", "64,64",
                   "--epochs", "60", "--lr", "3e-3"]),
        ("gmm K=49", ["--model", "gmm", "--components", "49"]),
        ("energy 3x128", ["--model", "energy", "--hidden", "128,128,128", "--epochs", "60",
                          "--lr", "1e-3"]),
    ]
    rows = []
    for name, args in models:
        rows.append((name, [fit_and_test(build, work, name.split()[0], train, test, args, s)
                            for s in range(1, seeds + 1)]))
    table("image (camera_128.pgm on [0, 1]^2; the true density's test log p: %.4f)" % ceiling,
          rows)
    energy_samplers(build, work, rows[-1][1][0]["saved"], test, "image")
    if keep:
        grid = os.path.join(work, "grid.csv")
        targets.grid(128, 0.0, 1.0, grid)
        for name, runs in rows:
            lp = os.path.join(work, "lp.csv")
            ssmc(build, "logpdf", "--load", runs[0]["saved"], "--at", grid, "--out", lp)
            targets.pgm(lp, 128, os.path.join(keep, "image_%s.pgm" % name.split()[0]))
        shutil.copy(pgm, os.path.join(keep, "image_target.pgm"))


def toy_bench(build, work, seeds, keep):
    import random
    for toy in ("orbits", "twocircles", "moons"):
        train, test = os.path.join(work, toy + "_train.csv"), os.path.join(work, toy + "_test.csv")
        targets.write(train, ["x", "y"], getattr(targets, toy)(10000, random.Random(1)))
        targets.write(test, ["x", "y"], getattr(targets, toy)(10000, random.Random(2)))
        common = ["--hidden", "64,64", "--epochs", "100", "--lr", "3e-3"]
        models = [("realnvp 4", ["--model", "realnvp", "--layers", "4"] + common),
                  ("realnvp 5", ["--model", "realnvp", "--layers", "5"] + common),
                  ("realnvp 2 + dif K=2 + realnvp 2",
                   ["--model", "realnvp,dif,realnvp", "--layers", "2", "--components", "2",
                    "--no-init"] + common),
                  ("energy 3x32", ["--model", "energy", "--hidden", "32,32,32", "--epochs",
                                   "300", "--patience", "50", "--lr", "3e-3"])]
        lo, hi = (-3.5, 3.5) if toy != "moons" else (-1.5, 2.5)
        grid = os.path.join(work, "grid.csv")
        targets.grid(200, lo, hi, grid)
        rows = []
        for name, args in models:
            runs = []
            for s in range(1, seeds + 1):
                r = fit_and_test(build, work, toy + name.split()[0] + str(len(args)), train, test,
                                 args, s)
                lp = os.path.join(work, "lp.csv")
                ssmc(build, "logpdf", "--load", r["saved"], "--at", grid, "--out", lp)
                r["between"] = targets.mass_between(lp, 200, lo, hi, toy)[0]
                if keep and s == 1:
                    slug = ("energy" if name.startswith("energy") else
                            "dif" if "dif" in name else name.replace("realnvp ", "flow"))
                    targets.pgm(lp, 200, os.path.join(keep, "%s_%s.pgm" % (toy, slug)))
                runs.append(r)
            rows.append((name, runs))
        extra = [("mass between modes (median)",
                  lambda runs: "%.4f" % statistics.median(r["between"] for r in runs))]
        table(toy, rows, extra)
        energy_samplers(build, work, rows[-1][1][0]["saved"], test, toy)


def energy_samplers(build, work, saved, test, name):
    """The energy model's samplers (Argouarc'h 2024, figure 2.3): 10^4 draws by each, their
    acceptance (sir: the pool's effective size) and the C2ST against 10^4 test points."""
    print("\n%s: the energy model's samplers, 10^4 draws each, C2ST against the test points"
          % name)
    for sampler in ("ar", "imh", "sir"):
        draws = os.path.join(work, "%s_%s_draws.csv" % (name, sampler))
        start = time.time()
        out = subprocess.run([os.path.join(build, "bin", "ssmc"), "density", "sample", "--load",
                              saved, "--sampler", sampler, "--n", "10000", "--seed", "3",
                              "--out", draws], check=True, capture_output=True, text=True)
        seconds = time.time() - start
        c = subprocess.run([os.path.join(build, "bin", "ssmc"), "c2st", draws, test, "--json",
                            "--max-draws", "10000", "--threads", str(os.cpu_count() or 1)],
                           check=True, capture_output=True, text=True)
        print("  %-4s c2st %.3f   %s   %.1f s" % (sampler, json.loads(c.stdout)["c2st"],
                                                  out.stderr.strip().split(": ", 1)[-1], seconds))


def digits_bench(build, work, seeds, keep):
    import random
    train, test = os.path.join(work, "digits_train.csv"), os.path.join(work, "digits_test.csv")
    targets.digits(os.path.join(DATA, "digits_8x8.csv"), random.Random(1), train, test)
    common = ["--epochs", "300", "--lr", "1e-3", "--batch-size", "128", "--patience", "30"]
    models = [
        ("gaussian (full covariance)", ["--model", "gmm", "--components", "1"]),
        ("dif K=10", ["--model", "dif", "--components", "10", "--hidden", "128"] + common),
        ("maf 5", ["--model", "maf", "--layers", "5", "--hidden", "256"] + common),
        ("dif K=10 + maf 5", ["--model", "dif,maf", "--components", "10", "--layers", "5",
                              "--hidden", "256"] + common),
    ]
    rows = []
    for name, args in models:
        rows.append((name, [fit_and_test(build, work, "digits" + str(len(rows)), train, test,
                                         args, s) for s in range(1, seeds + 1)]))
    table("digits (8x8, dequantised, logit space; nats per image)", rows)


def main(argv):
    build = os.path.join(ROOT, "build")
    only, seeds, keep = ["image", "toys", "digits"], 3, None
    args = list(argv[1:])
    while args:
        a = args.pop(0)
        if a == "--only":
            only = args.pop(0).split(",")
        elif a == "--seeds":
            seeds = int(args.pop(0))
        elif a == "--keep":
            keep = os.path.abspath(args.pop(0))
            os.makedirs(keep, exist_ok=True)
        else:
            build = os.path.abspath(a)
    work = tempfile.mkdtemp(prefix="ssmc-density-bench.")
    try:
        print("load average before: %s" % open("/proc/loadavg").read().split()[0])
        for part in only:
            {"image": image_bench, "toys": toy_bench, "digits": digits_bench}[part](
                build, work, seeds, keep)
        print("\nload average after: %s" % open("/proc/loadavg").read().split()[0])
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main(sys.argv)
