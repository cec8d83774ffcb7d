"""Words as sequences of characters, for examples/char_hmm.ssm, from shared/data/words_en.txt
(SCOWL, Kevin Atkinson, via Debian's wamerican; free to use, copy and modify with its copyright
notice). 1000 training words and 300 held-out ones, drawn without replacement under a fixed seed,
in long format: one row per character, the word as the `series`, `t` its position, `c` the
character's index (a..z = 0..25, and 26 for the end of the word, which ends every series), and
`letter` the character itself ('$' for the end), a column the models do not read."""
import csv
import random
import sys

source = sys.argv[1] if len(sys.argv) > 1 else "../../../shared/data/words_en.txt"
with open(source) as f:
    words = [line.strip() for line in f if line.strip()]
chosen = random.Random(20261127).sample(words, 1300)
for name, part in (("words_train.csv", chosen[:1000]), ("words_test.csv", chosen[1000:])):
    with open(name, "w", newline="") as out:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["series", "t", "c", "letter"])
        for word in part:
            for t, ch in enumerate(word + "$"):
                w.writerow([word, t, 26 if ch == "$" else ord(ch) - ord("a"), ch])
