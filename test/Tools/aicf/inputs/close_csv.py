"""Two CSV files of numbers agree within a relative tolerance (each row, each
value): `python3 close_csv.py A B [TOL]` (default 1e-5 of the largest
magnitude). Prints the largest difference; exits 1 where they differ."""
import csv
import sys


def rows(path):
    with open(path, newline="") as f:
        return [[float(v) for v in row] for row in csv.reader(f) if row]


a, b = rows(sys.argv[1]), rows(sys.argv[2])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)):
    print(f"shapes differ: {len(a)} and {len(b)} rows")
    sys.exit(1)
scale = max([1.0] + [abs(v) for row in b for v in row])
worst = max([0.0] + [abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]) / scale
print(f"{len(a)} rows agree within {tol:g}" if worst <= tol else f"rows differ by {worst:.3e} of the largest magnitude")
sys.exit(0 if worst <= tol else 1)
