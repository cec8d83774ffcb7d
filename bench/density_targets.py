#!/usr/bin/env python3
"""Targets for the density benchmark (run_density_bench.py), written as CSV, and densities drawn as
images. Standard library only.

  density_targets.py image PGM N SEED OUT.csv   points from a grayscale image read as a density:
                                                a pixel with probability proportional to its
                                                intensity, then a uniform point in it (x right,
                                                y up, the image spanning [0, 1] x [0, 1])
  density_targets.py orbits N SEED OUT.csv      7 modes on a ring of radius 2.5, covariance 0.04 I
  density_targets.py twocircles N SEED OUT.csv  two concentric circles (radii 1 and 2, noise 0.05)
  density_targets.py moons N SEED OUT.csv       two interleaved half-circles (noise 0.05)
  density_targets.py digits CSV SEED TRAIN.csv TEST.csv
                                                the 8x8 digits dequantised (+ U(0,1), / 17) and
                                                logit-transformed (lambda = 1e-6, as RealNVP and
                                                the thesis do), 80/20 split
  density_targets.py grid SIZE LO HI OUT.csv    a SIZE x SIZE grid of cell centres over
                                                [LO, HI]^2 (row-major from the top)
  density_targets.py pgm LOGPDF.csv SIZE OUT.pgm  exp(logpdf) on that grid as an image
  density_targets.py png IN.pgm OUT.png         a PGM as a PNG (to view it in a browser)
  density_targets.py mass LOGPDF.csv SIZE LO HI MODE
                                                the grid's total mass and the mass that lies
                                                between a target's modes, over 4 sd from every
                                                mode (MODE: orbits or moons)
"""
import csv
import math
import random
import sys


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow(["%.9g" % v for v in r])


def read_pgm(path):
    data = open(path, "rb").read()
    fields, pos = [], 0
    while len(fields) < 4:  # magic, width, height, maxval; '#' comments
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    assert fields[0] == b"P5", "a binary PGM (P5) is expected"
    w, h = int(fields[1]), int(fields[2])
    pixels = data[pos + 1:pos + 1 + w * h]
    return w, h, pixels


def image_points(pgm, n, rng, extent=4.0):
    w, h, pixels = read_pgm(pgm)
    cumulative, total = [], 0
    for p in pixels:
        total += p
        cumulative.append(total)
    import bisect
    rows = []
    for _ in range(n):
        k = bisect.bisect_right(cumulative, rng.random() * total)
        r, c = divmod(k, w)
        rows.append(((c + rng.random()) * extent / w, (h - 1 - r + rng.random()) * extent / h))
    return rows


def image_log_prob(pgm, points, extent=4.0):
    """The mean log-density of the points under the image's own density (piecewise constant)."""
    w, h, pixels = read_pgm(pgm)
    total = sum(pixels)
    cell = (extent / w) * (extent / h)
    acc = 0.0
    for x, y in points:
        c = min(w - 1, int(x * w / extent))
        r = h - 1 - min(h - 1, int(y * h / extent))
        acc += math.log(pixels[r * w + c] / total / cell)
    return acc / len(points)


def orbits(n, rng):
    rows = []
    for _ in range(n):
        k = rng.randrange(7)
        a = 2 * math.pi * k / 7
        rows.append((2.5 * math.cos(a) + 0.2 * rng.gauss(0, 1),
                     2.5 * math.sin(a) + 0.2 * rng.gauss(0, 1)))
    return rows


def twocircles(n, rng):
    rows = []
    for _ in range(n):
        r = 1.0 if rng.random() < 0.5 else 2.0
        a = rng.random() * 2 * math.pi
        rows.append((r * math.cos(a) + 0.05 * rng.gauss(0, 1),
                     r * math.sin(a) + 0.05 * rng.gauss(0, 1)))
    return rows


def moons(n, rng):
    rows = []
    for _ in range(n):
        a = rng.random() * math.pi
        if rng.random() < 0.5:
            x, y = math.cos(a), math.sin(a)
        else:
            x, y = 1 - math.cos(a), 0.5 - math.sin(a)
        rows.append((x + 0.05 * rng.gauss(0, 1), y + 0.05 * rng.gauss(0, 1)))
    return rows


def digits(path, rng, train_path, test_path):
    lam = 1e-6
    with open(path) as f:
        reader = csv.reader(f)
        header = next(reader)
        cols = [i for i, name in enumerate(header) if name.startswith("p")]
        items = [[float(r[i]) for i in cols] for r in reader]
    rng.shuffle(items)
    out = []
    for item in items:
        row = []
        for v in item:
            u = (v + rng.random()) / 17.0
            u = lam + (1 - 2 * lam) * u
            row.append(math.log(u / (1 - u)))
        out.append(row)
    cut = int(0.8 * len(out))
    names = [header[i] for i in cols]
    write(train_path, names, out[:cut])
    write(test_path, names, out[cut:])


def cell_centre(k, size, lo, hi):
    r, c = divmod(k, size)
    h = (hi - lo) / size
    return lo + (c + 0.5) * h, lo + (size - 1 - r + 0.5) * h


def grid(size, lo, hi, path):
    write(path, ["x", "y"], [cell_centre(k, size, lo, hi) for k in range(size * size)])


def read_logpdf(path):
    with open(path) as f:
        reader = csv.reader(f)
        next(reader)
        return [float(r[0]) for r in reader]


def pgm(logpdf_path, size, out):
    p = [math.exp(v) for v in read_logpdf(logpdf_path)]
    top = max(p)
    with open(out, "wb") as f:
        f.write(b"P5\n%d %d\n255\n" % (size, size))
        f.write(bytes(min(255, int(255 * v / top)) for v in p))


def png(pgm_path, out):
    import struct
    import zlib
    w, h, pixels = read_pgm(pgm_path)
    rows = b"".join(b"\x00" + pixels[r * w:(r + 1) * w] for r in range(h))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    with open(out, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(chunk(b"IEND", b""))


def mass_between(logpdf_path, size, lo, hi, mode):
    p = [math.exp(v) for v in read_logpdf(logpdf_path)]
    cell = ((hi - lo) / size) ** 2
    between = total = 0.0
    for k, v in enumerate(p):
        x, y = cell_centre(k, size, lo, hi)
        if mode == "orbits":
            d = min(math.hypot(x - 2.5 * math.cos(2 * math.pi * j / 7),
                               y - 2.5 * math.sin(2 * math.pi * j / 7)) for j in range(7))
            far = d > 4 * 0.2
        elif mode == "twocircles":  # distance to either circle
            r = math.hypot(x, y)
            far = min(abs(r - 1), abs(r - 2)) > 4 * 0.05
        else:  # moons: distance to either arc
            def arc(cx, cy, sign):
                a = math.atan2(sign * (y - cy), x - cx)
                a = min(max(a, 0.0), math.pi)
                return math.hypot(x - cx - math.cos(a), y - cy - sign * math.sin(a))
            far = min(arc(0, 0, 1), arc(1, 0.5, -1)) > 4 * 0.05
        total += v * cell
        between += v * cell if far else 0.0
    return between, total


def main(argv):
    what = argv[1]
    if what == "image":
        rows = image_points(argv[2], int(argv[3]), random.Random(int(argv[4])), 1.0)
        write(argv[5], ["x", "y"], rows)
    elif what in ("orbits", "twocircles", "moons"):
        rows = globals()[what](int(argv[2]), random.Random(int(argv[3])))
        write(argv[4], ["x", "y"], rows)
    elif what == "digits":
        digits(argv[2], random.Random(int(argv[3])), argv[4], argv[5])
    elif what == "grid":
        grid(int(argv[2]), float(argv[3]), float(argv[4]), argv[5])
    elif what == "pgm":
        pgm(argv[2], int(argv[3]), argv[4])
    elif what == "png":
        png(argv[2], argv[3])
    elif what == "mass":
        print("%.6f %.6f" % mass_between(argv[2], int(argv[3]), float(argv[4]), float(argv[5]),
                                         argv[6]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
