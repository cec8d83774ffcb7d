"""The affine regression of Argouarc'h (2024, ch. 3) for examples/affine_generative.ssm and
examples/affine_discriminative.ssm: y = x + N(0, 1), 50 labelled items with x ~ N(0, 1) (the
training distribution P_X^D), then the item to predict and 50 unlabelled items, all with x ~
N(7.5, 1) (the prior of the label to predict, Pi_X0): their x is left empty. The true x of the
unlabelled rows goes to affine_truth.csv, for the bench."""
import csv
import random

rng = random.Random(2024)
labelled = [(x, x + rng.gauss(0, 1)) for x in (rng.gauss(0, 1) for _ in range(50))]
unknown = [(x, x + rng.gauss(0, 1)) for x in (rng.gauss(7.5, 1) for _ in range(51))]
with open("affine.csv", "w", newline="") as out:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["x", "y"])
    for x, y in labelled:
        w.writerow([f"{x:.6f}", f"{y:.6f}"])
    for x, y in unknown:
        w.writerow(["", f"{y:.6f}"])
with open("affine_truth.csv", "w", newline="") as out:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["n", "x"])
    for k, (x, _) in enumerate(unknown):
        w.writerow([len(labelled) + k, f"{x:.6f}"])
