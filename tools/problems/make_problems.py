#!/usr/bin/env python3
"""Regenerates data/problems/: the problems that populate the run registry
and test the structure proposer (issue 29; benches/induction uses them).

Ten families of small problems, each a CSV table (features, then the label;
integer labels are classes, float ones regression targets) or a text:

  digits         scikit-learn's 8x8 digits: all of them, and 500 rows
  iris, wine,    the small tables scikit-learn bundles (exported once;
  breast_cancer, diabetes's target standardised)
  diabetes
  teacher        labels of random teacher networks of known width and depth
  parity         the XOR of k of 16 random bits (k = 4, 6), 10% of labels flipped
  sine           y = sin(w x) + noise on [-pi, pi] (w = 1, 3)
  shakespeare    two 150k-character slices of tiny Shakespeare
  markov         text of random Markov chains (order 1 and 2)

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
