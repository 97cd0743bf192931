#!/usr/bin/env python3
"""Compares a grown run with the final architecture trained from scratch.

    compare.py SCRATCH/metrics.jsonl GROWN/metrics.jsonl

Both files are `aicf train`'s per-epoch metrics (val_loss, train_flops:
6 FLOPs per weight element per training row, cumulative). The target is the
best held-out loss the from-scratch run reached; the table gives the
training FLOPs each run spent until its held-out loss first reached it.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def first_at_or_below(rows, target):
    for r in rows:
        if r["val_loss"] is not None and r["val_loss"] <= target:
            return r
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    scratch, grown = load(sys.argv[1]), load(sys.argv[2])
    best = min(scratch, key=lambda r: r["val_loss"])
    target = best["val_loss"]
    print(f"target: the from-scratch run's best held-out loss, {target:.4f} (epoch {best['epoch']})")
    print(f"{'run':<10} {'reached at':>12} {'training FLOPs':>16} {'final params':>13} {'final val loss':>15} {'total FLOPs':>12}")
    reached = {}
    for name, rows in (("scratch", scratch), ("grown", grown)):
        r = first_at_or_below(rows, target)
        reached[name] = r
        last = rows[-1]
        at = f"epoch {r['epoch']}" if r else "not reached"
        flops = f"{r['train_flops']:.3e}" if r else "-"
        print(f"{name:<10} {at:>12} {flops:>16} {last['params']:>13} {last['val_loss']:>15.4f} {last['train_flops']:>12.3e}")
    if reached["grown"] and reached["scratch"]:
        ratio = reached["grown"]["train_flops"] / reached["scratch"]["train_flops"]
        print(f"the grown model reached it with {ratio:.2f}x the from-scratch FLOPs")
    else:
        print("the grown model did not reach the from-scratch loss")


if __name__ == "__main__":
    main()
