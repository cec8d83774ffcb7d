#!/usr/bin/env python3
"""Models of English words as sequences of characters (bench/README.md, the section "Items that
are sequences"): the 1000 training and 300 held-out words of examples/data/words_*.csv.

  bench/run_words_bench.py [BUILD_DIR] [--repeats 3]

- examples/char_mixture.ssm: a mixture of 3 categoricals (a class per word) by exact EM, and
- examples/char_hmm.ssm: a 5-state HMM by exact EM (Baum-Welch), the held-out words' exact
  log-likelihood by the forward algorithm;
- examples/char_lm.ssm: an LSTM language model (`rnn_lm`, 64 units) trained by `vi` (maximum
  likelihood: no latent) for 5 to 40 epochs of mini-batches of 100 words, the training and the
  held-out words' log p: the network overtakes the HMM, then learns its training words by heart;
- examples/word_vae.ssm: the VAE over words (an LSTM encoder, the LSTM language model reading the
  code as its decoder) trained 20 epochs, with and without KL annealing (--kl-warmup): its
  held-out ELBO, KL term and IWAE bound (100 draws), the collapse of Kim, Wiseman & Rush (2018,
  section 5) and Bowman et al. (2016).
Nats per word (a word is 9 characters with its end, on average); medians over REPEATS seeds.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "examples", "data")
TRAIN, TEST = os.path.join(DATA, "words_train.csv"), os.path.join(DATA, "words_test.csv")


def run_json(argv):
    return json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)


def main():
    args = sys.argv[1:]
    build = args.pop(0) if args and not args[0].startswith("--") else os.path.join(ROOT, "build")
    repeats = 3
    if args[:1] == ["--repeats"] and len(args) == 2:
        repeats = int(args[1])
    elif args:
        sys.exit(f"usage: {__doc__}")
    ssmc = os.path.join(build, "bin", "ssmc")
    work = tempfile.mkdtemp(prefix="ssmc-words-")
    try:
        exes = {}
        for name in ("char_mixture", "char_hmm", "char_lm", "word_vae"):
            exes[name] = os.path.join(work, name)
            subprocess.run([ssmc, "build", os.path.join(ROOT, "examples", name + ".ssm"), "-o",
                            exes[name]], check=True, capture_output=True)
        print(f"{'model':<34} {'train':>8} {'held-out':>9} {'KL':>7} {'IWAE':>8} {'time s':>7}")
        for name, label in (("char_mixture", "char_mixture (3 classes, exact EM)"),
                            ("char_hmm", "char_hmm (5 states, exact EM)")):
            saved = os.path.join(work, name + ".json")
            fit = run_json([exes[name], "optimize", "--method", "em", "--data", TRAIN, "--json",
                            "--save", saved])
            held = run_json([exes[name], "filter", "--data", TEST, "--params", saved, "--json"])
            print(f"{label:<34} {fit['log_likelihood'] / 1000:8.2f} "
                  f"{held['log_likelihood'] / 300:9.2f} {'':>7} {'':>8} {fit['elapsed_s']:7.1f}")
        common = ["--data", TRAIN, "--test", TEST, "--batch-size", "100",
                  "--net-learning-rate", "0.01", "--json"]
        for epochs in (5, 10, 20, 40):
            rows = [run_json([exes["char_lm"], "vi", "--iterations", str(10 * epochs), "--seed",
                              str(seed)] + common) for seed in range(1, repeats + 1)]
            med = lambda f: statistics.median(f(j) for j in rows)
            print(f"{f'char_lm, {epochs} epochs':<34} {med(lambda j: j['elbo']):8.2f} "
                  f"{med(lambda j: j['test']['elbo']):9.2f} {'':>7} {'':>8} "
                  f"{med(lambda j: j['train_s']):7.1f}")
        for label, extra in (("word_vae, 20 epochs", []),
                             ("word_vae, 20 epochs, KL warm-up 15", ["--kl-warmup", "150"])):
            rows = [run_json([exes["word_vae"], "vi", "--iterations", "200", "--eval-samples",
                              "100", "--seed", str(seed)] + common + extra)
                    for seed in range(1, repeats + 1)]
            med = lambda f: statistics.median(f(j) for j in rows)
            print(f"{label:<34} {med(lambda j: j['elbo']):8.2f} "
                  f"{med(lambda j: j['test']['elbo']):9.2f} {med(lambda j: j['test']['kl']):7.3f} "
                  f"{med(lambda j: j['test']['iwae']):8.2f} {med(lambda j: j['train_s']):7.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
