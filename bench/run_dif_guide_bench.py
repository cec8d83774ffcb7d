#!/usr/bin/env python3
"""Discretely Indexed Flows as variational guides (bench/README.md, the section of that name):
`vi` (4 draws per item per step) on two plate models whose posteriors no Gaussian holds, with the mean-field Gaussian guide,
an amortized Gaussian (an MLP encoder, as a VAE's) and `guide z[n] ~ dif(x[n], components = K)`
for several K, against the exact log p(x) by quadrature; REPEATS data sets each, medians printed.

  bench/run_dif_guide_bench.py [BUILD_DIR] [--repeats 2] [--items 100] [--iterations 1500]
                               [--components 2,4,8]

- squared: z ~ N(0, 1), x | z ~ N(z^2, 0.5^2): two modes at +-sqrt(x) (1-D quadrature);
- ring: z ~ N(0, I_2), x | z ~ N(|z|^2, 0.3^2): the posterior a ring of radius about sqrt(x)
  (2-D quadrature).
Per run: the gap log p(x) - ELBO and log p(x) - IWAE (per item, nats; the gap of the ELBO is
the KL from the guide to the posterior), and the training time (the JSON's train_s).
"""
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = {
    "squared": ("""
model squared{suffix} {{
  param sigma : real(0, inf) = 0.5;
  latent z[n] ~ normal(0, 1);
  obs    x[n] ~ normal(z[n] * z[n], sigma);
  {guide}
}}
""", 0.5),
    "ring": ("""
model ring{suffix} {{
  param sigma : real(0, inf) = 0.3;
  latent z[n] : vector[2] ~ normal(0, 1);
  obs    x[n] ~ normal(z[n][0] * z[n][0] + z[n][1] * z[n][1], sigma);
  {guide}
}}
""", 0.3),
}


def exact_log_p(name, x, sigma):
    """log p(x) per item by quadrature of N(z; 0, I) N(x; |z|^2, sigma^2) over z."""
    if name == "squared":
        z = np.linspace(-8, 8, 16001)
        h = z[1] - z[0]
        r2 = (z * z)[None, :]
        log_f = -0.5 * z[None, :] ** 2 - 0.5 * ((x[:, None] - r2) / sigma) ** 2
        norm = np.log(2 * np.pi * sigma)
    else:
        g = np.linspace(-6, 6, 601)
        h = (g[1] - g[0]) ** 2
        a, b = np.meshgrid(g, g)
        r2 = (a * a + b * b).ravel()[None, :]
        log_f = -0.5 * r2 - 0.5 * ((x[:, None] - r2) / sigma) ** 2
        norm = np.log((2 * np.pi) ** 1.5 * sigma)
    m = log_f.max(axis=1, keepdims=True)
    return (m[:, 0] + np.log(np.exp(log_f - m).sum(axis=1) * h)) - norm


def build(ssmc, work, name, suffix, guide):
    source = os.path.join(work, f"{name}{suffix}.ssm")
    with open(source, "w") as f:
        f.write(MODELS[name][0].format(suffix=suffix, guide=guide))
    exe = os.path.join(work, f"{name}{suffix}")
    subprocess.run([ssmc, "build", source, "-o", exe], check=True, capture_output=True)
    return exe


def main():
    args = sys.argv[1:]
    build_dir = args[0] if args and not args[0].startswith("--") else os.path.join(ROOT, "build")
    option = lambda name, default: int(args[args.index(name) + 1]) if name in args else default
    repeats, items, iterations = (option("--repeats", 2), option("--items", 100),
                                  option("--iterations", 1500))
    sizes = ([int(k) for k in args[args.index("--components") + 1].split(",")]
             if "--components" in args else [2, 4, 8])
    ssmc = os.path.join(build_dir, "bin", "ssmc")
    work = tempfile.mkdtemp(prefix="ssmc-dif-guide-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # also after an error
    families = [("meanfield", "", ["--method", "meanfield"]),
                ("amortized", "", ["--method", "amortized", "--hidden", "64"])]
    families += [(f"dif K={k}", f"guide z[n] ~ dif(x[n], components = {k});", []) for k in sizes]
    print(f"{items} items, {iterations} iterations (cosine schedule), {repeats} data sets; "
          "medians; gaps per item in nats")
    print(f"{'model':8} {'guide':10} {'ELBO gap':>9} {'IWAE gap':>9} {'train s':>8}")
    for name, (_, sigma) in MODELS.items():
        plain = build(ssmc, work, name, "_plain", "")
        for label, guide, extra in families:
            exe = build(ssmc, work, name, "_" + label.replace(" ", "").replace("=", ""), guide) \
                if guide else plain
            gaps, iwae_gaps, seconds = [], [], []
            for r in range(repeats):
                data = os.path.join(work, f"{name}_{r}.csv")
                if not os.path.exists(data):
                    subprocess.run([plain, "simulate", "--T", str(items), "--seed", str(100 + r),
                                    "--out", data], check=True, capture_output=True)
                x = np.genfromtxt(data, delimiter=",", names=True)["x"]
                log_p = exact_log_p(name, x, sigma).mean()
                out = subprocess.run([exe, "vi", "--data", data, "--fix", "sigma", "--json",
                                      "--iterations", str(iterations), "--schedule", "cosine",
                                      "--net-learning-rate", "0.01", "--samples", "4",
                                      "--seed", str(r + 1)] + extra,
                                     check=True, capture_output=True, text=True)
                j = json.loads(out.stdout)
                gaps.append(log_p - j["elbo"])
                iwae_gaps.append(log_p - j["iwae"])
                seconds.append(j["train_s"] if "train_s" in j else j["elapsed_s"])
            print(f"{name:8} {label:10} {statistics.median(gaps):9.4f} "
                  f"{statistics.median(iwae_gaps):9.4f} {statistics.median(seconds):8.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
