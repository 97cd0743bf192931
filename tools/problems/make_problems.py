#!/usr/bin/env python3
"""Regenerates data/problems/: the problems that populate the run registry
and test the structure proposer (issue 29; benches/induction uses them).

Fifteen families of small problems, each a CSV table (features, then the
label; integer labels are classes, float ones regression targets) or a text:

  digits         scikit-learn's 8x8 digits: all of them, and 500 rows
  iris, wine,    the small tables scikit-learn bundles (exported once;
  breast_cancer, diabetes's target standardised)
  diabetes
  teacher        labels of random teacher networks of known width and depth
  parity         the XOR of k of 16 random bits (k = 4, 6), 10% of labels flipped
  sine           y = sin(w x) + noise on [-pi, pi] (w = 1, 3)
  shakespeare    two 150k-character slices of tiny Shakespeare
  markov         text of random Markov chains (order 1 and 2)
  two_d          scikit-learn's two moons and two circles: 2 features, curved borders
  blobs          Gaussian clusters (10 features, 5 classes; 30 features, 3): linear borders
  hypercube      scikit-learn's make_classification (20 and 50 features, some informative)
  friedman       scikit-learn's Friedman #1 and #2 regressions, target standardised
  linear         a noisy linear regression (20 features, 5 informative), standardised

The last five were added after the first evaluations (2026-11-27), chosen
from scikit-learn's generators before any was trained.

Everything is seeded: the same files come out on every machine.

    python3 -m venv target/problems-venv
    target/problems-venv/bin/pip install -r tools/problems/requirements.txt
    target/problems-venv/bin/python tools/problems/make_problems.py data/problems
"""

import gzip
import json
import os
import sys

import numpy as np
from sklearn import datasets


def write_table(out, name, x, y, integer):
    path = os.path.join(out, name + ".csv.gz")
    lines = []
    for row, label in zip(x, y):
        cells = [f"{v:.6g}" for v in row]
        cells.append(str(int(label)) if integer else f"{label:.6g}")
        lines.append(",".join(cells))
    data = ("\n".join(lines) + "\n").encode()
    # mtime 0: the same bytes on every run.
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
        g.write(data)
    return os.path.basename(path)


def write_text(out, name, text):
    path = os.path.join(out, name + ".txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return os.path.basename(path)


def teacher(rng, rows, features, widths, classes):
    """Labels of a random ReLU network (He-initialised): argmax of its
    outputs, so the best student is at least as wide and deep."""
    x = rng.standard_normal((rows, features))
    h = x
    for w in widths:
        h = np.maximum(h @ (rng.standard_normal((h.shape[1], w)) * np.sqrt(2.0 / h.shape[1])), 0.0)
    logits = h @ rng.standard_normal((h.shape[1], classes))
    return x, logits.argmax(axis=1)


def parity(rng, rows, bits, k, noise):
    """The XOR of k chosen bits, each label flipped with probability
    `noise` (so the best held-out loss is the flip's entropy, not 0)."""
    x = rng.integers(0, 2, size=(rows, bits))
    chosen = rng.choice(bits, size=k, replace=False)
    y = (x[:, chosen].sum(axis=1) + (rng.random(rows) < noise)) % 2
    return x * 2 - 1, y  # features -1/1


def sine(rng, rows, omega, noise):
    x = rng.uniform(-np.pi, np.pi, size=(rows, 1))
    y = np.sin(omega * x[:, 0]) + noise * rng.standard_normal(rows)
    return x, y


def markov(rng, symbols, order, length):
    alphabet = "abcdefghijklmnopqrstuvwxyz ,.\n"[:symbols]
    # Sparse transitions: each context leads to a few likely symbols.
    table = {}
    out = list(rng.choice(list(alphabet), size=order))
    for _ in range(length - order):
        ctx = "".join(out[-order:])
        if ctx not in table:
            p = rng.dirichlet(np.full(symbols, 0.15))
            table[ctx] = p
        out.append(alphabet[rng.choice(symbols, p=table[ctx])])
    return "".join(out)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "data/problems"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.makedirs(out, exist_ok=True)
    problems = []

    def add(family, name, file, task, note):
        problems.append({"family": family, "name": name, "file": file, "task": task, "note": note})

    d = datasets.load_digits()
    add("digits", "digits", write_table(out, "digits", d.data, d.target, True), "classification",
        "scikit-learn's 8x8 digits, 1797 rows")
    idx = np.random.default_rng(1).permutation(len(d.target))[:500]
    add("digits", "digits_500", write_table(out, "digits_500", d.data[idx], d.target[idx], True),
        "classification", "500 of the digits")
    for loader, name in [(datasets.load_iris, "iris"), (datasets.load_wine, "wine"),
                         (datasets.load_breast_cancer, "breast_cancer")]:
        t = loader()
        # Standardised features (the loader also scales by the largest
        # magnitude; these sets' columns differ by orders of magnitude).
        x = (t.data - t.data.mean(0)) / t.data.std(0)
        add(name, name, write_table(out, name, x, t.target, True), "classification",
            f"scikit-learn's {name}, standardised")
    t = datasets.load_diabetes()
    y = (t.target - t.target.mean()) / t.target.std()
    x = (t.data - t.data.mean(0)) / t.data.std(0)
    add("diabetes", "diabetes", write_table(out, "diabetes", x, y, False), "regression",
        "scikit-learn's diabetes, features and target standardised")

    # Each problem its own seed: changing one leaves the others' bytes.
    rng = np.random.default_rng(29)
    x, y = teacher(rng, 2000, 16, [64], 4)
    add("teacher", "teacher_wide", write_table(out, "teacher_wide", x, y, True), "classification",
        "a 16-64-4 ReLU teacher's argmax")
    rng = np.random.default_rng(30)
    x, y = teacher(rng, 2000, 8, [32, 32, 32], 4)
    add("teacher", "teacher_deep", write_table(out, "teacher_deep", x, y, True), "classification",
        "an 8-32-32-32-4 ReLU teacher's argmax")
    rng = np.random.default_rng(31)
    x, y = parity(rng, 3000, 16, 4, 0.1)
    add("parity", "parity_k4", write_table(out, "parity_k4", x, y, True), "classification",
        "XOR of 4 of 16 random bits, 10% of labels flipped")
    rng = np.random.default_rng(32)
    x, y = parity(rng, 4000, 16, 6, 0.1)
    add("parity", "parity_k6", write_table(out, "parity_k6", x, y, True), "classification",
        "XOR of 6 of 16 random bits, 10% of labels flipped")
    rng = np.random.default_rng(33)
    x, y = sine(rng, 1000, 1.0, 0.05)
    add("sine", "sine_w1", write_table(out, "sine_w1", x, y, False), "regression", "sin(x) + 0.05 noise")
    rng = np.random.default_rng(34)
    x, y = sine(rng, 1000, 3.0, 0.05)
    add("sine", "sine_w3", write_table(out, "sine_w3", x, y, False), "regression", "sin(3x) + 0.05 noise")

    x, y = datasets.make_moons(1000, noise=0.2, random_state=37)
    add("two_d", "moons", write_table(out, "moons", x, y, True), "classification", "two moons, noise 0.2")
    x, y = datasets.make_circles(1000, noise=0.1, factor=0.5, random_state=38)
    add("two_d", "circles", write_table(out, "circles", x, y, True), "classification",
        "two circles, noise 0.1, factor 0.5")
    x, y = datasets.make_blobs(1500, n_features=10, centers=5, cluster_std=3.0, random_state=39)
    add("blobs", "blobs_5", write_table(out, "blobs_5", (x - x.mean(0)) / x.std(0), y, True), "classification",
        "5 Gaussian clusters in 10 dimensions, std 3, standardised")
    x, y = datasets.make_blobs(800, n_features=30, centers=3, cluster_std=6.0, random_state=40)
    add("blobs", "blobs_3", write_table(out, "blobs_3", (x - x.mean(0)) / x.std(0), y, True), "classification",
        "3 Gaussian clusters in 30 dimensions, std 6, standardised")
    x, y = datasets.make_classification(2000, n_features=20, n_informative=6, n_redundant=4, n_classes=3,
                                        n_clusters_per_class=2, flip_y=0.05, random_state=41)
    add("hypercube", "hypercube_20", write_table(out, "hypercube_20", x, y, True), "classification",
        "make_classification: 20 features, 6 informative, 3 classes of 2 clusters, 5% flipped")
    x, y = datasets.make_classification(1500, n_features=50, n_informative=10, n_redundant=10, n_classes=8,
                                        n_clusters_per_class=1, flip_y=0.02, random_state=42)
    add("hypercube", "hypercube_50", write_table(out, "hypercube_50", x, y, True), "classification",
        "make_classification: 50 features, 10 informative, 8 classes, 2% flipped")
    x, y = datasets.make_friedman1(1200, n_features=10, noise=1.0, random_state=43)
    add("friedman", "friedman1", write_table(out, "friedman1", x, (y - y.mean()) / y.std(), False), "regression",
        "Friedman #1 (10 features, 5 used), noise 1, target standardised")
    x, y = datasets.make_friedman2(1200, noise=10.0, random_state=44)
    x = (x - x.mean(0)) / x.std(0)
    add("friedman", "friedman2", write_table(out, "friedman2", x, (y - y.mean()) / y.std(), False), "regression",
        "Friedman #2 (4 features), noise 10, features and target standardised")
    x, y = datasets.make_regression(1000, n_features=20, n_informative=5, noise=20.0, random_state=45)
    add("linear", "linear_regression", write_table(out, "linear_regression", x, (y - y.mean()) / y.std(), False),
        "regression", "a linear target of 5 of 20 features plus noise, standardised")

    with open(os.path.join(root, "data", "tinyshakespeare.txt"), encoding="utf-8") as f:
        shakespeare = f.read()
    add("shakespeare", "shakespeare_a", write_text(out, "shakespeare_a", shakespeare[:150_000]), "text",
        "tiny Shakespeare's first 150k characters")
    add("shakespeare", "shakespeare_b", write_text(out, "shakespeare_b", shakespeare[600_000:750_000]), "text",
        "tiny Shakespeare's characters 600k-750k")
    add("markov", "markov_o1", write_text(out, "markov_o1", markov(np.random.default_rng(35), 20, 1, 150_000)), "text",
        "an order-1 Markov chain over 20 symbols")
    add("markov", "markov_o2", write_text(out, "markov_o2", markov(np.random.default_rng(36), 24, 2, 150_000)), "text",
        "an order-2 Markov chain over 24 symbols")

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"problems": problems}, f, indent=1)
        f.write("\n")
    print(f"{len(problems)} problems of {len({p['family'] for p in problems})} families in {out}")


if __name__ == "__main__":
    main()
