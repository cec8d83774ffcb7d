"""Binarised 8x8 digits for examples/digits_vae.ssm, from shared/data/digits_8x8.csv (UCI
"Optical Recognition of Handwritten Digits", Alpaydin & Kaynak, via scikit-learn; CC BY 4.0).
A pixel is 1 when its intensity (0..16) is at least 8. The first 1500 digits are the training
items (digits_train.csv), the other 297 the held-out ones (digits_test.csv); columns x[0]..x[63],
row-major, then the digit's label as a column the model does not read."""
import csv
import sys

source = sys.argv[1] if len(sys.argv) > 1 else "../../../shared/data/digits_8x8.csv"
with open(source) as f:
    rows = list(csv.DictReader(f))
header = [f"x[{k}]" for k in range(64)] + ["label"]
for name, part in (("digits_train.csv", rows[:1500]), ("digits_test.csv", rows[1500:])):
    with open(name, "w", newline="") as out:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(header)
        for r in part:
            w.writerow([1 if int(r[f"p{k}"]) >= 8 else 0 for k in range(64)] + [r["label"]])
