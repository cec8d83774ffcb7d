"""The Hudson Bay hares and lynx for examples/hare_lynx_sde.ssm, from
shared/data/hudson_bay_hare_lynx_1900_1920.csv (thousands of pelts a year, 1900-1920; Howard's
notes). The model's SDE steps a tenth of a year, so the file has a row per tenth (t = 0..200,
`year` 1900.0, 1900.1, ...) whose pelts are missing (NA) except at whole years: the latent
abundances in between are imputed by the smoothers (data augmentation; the density estimates of
one-year transitions of this strongly nonlinear drift are too heavy-tailed to use)."""
import csv
import sys

default = "../../../shared/data/hudson_bay_hare_lynx_1900_1920.csv"
source = sys.argv[1] if len(sys.argv) > 1 else default
steps = 10  # per year
with open(source) as f:
    rows = list(csv.DictReader(f))
with open("hare_lynx_tenths.csv", "w", newline="") as out:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["t", "year", "hare", "lynx"])
    for k in range((len(rows) - 1) * steps + 1):
        year = f"{int(rows[0]['year']) + k / steps:.1f}"
        if k % steps == 0:
            r = rows[k // steps]
            w.writerow([k, year, r["hare"], r["lynx"]])
        else:
            w.writerow([k, year, "NA", "NA"])
