#!/usr/bin/env python3
"""The growth step and the rate after it, swept, with the choice made on
some seeds and reported on others (Python standard library only).

    sweep.py [--aicf target/release/aicf] [--out target/grow_lm_sweep]
             [--device cuda] [--jobs 8] [--at 4000,5000,6000,7000]
             [--factors 0.25] [--seeds 6] [--select 3]

Every run is experiment.py's: the target trained from scratch for 2400
steps at the tuned rate 1.5e-3 (experiment.py's tuning on seed 0), and
small2x.mlir at twice that rate grown by grow2x_late.toml's rewrite at step
`at` with the rate times `lr_factor` after it, then 2400 steps more
(`--post`). Each
(at, lr_factor) is a configuration; the one with the lowest mean FLOPs
ratio on seeds 0 .. select-1 is the choice, and its ratio on the other
seeds is the estimate a user can expect (choosing on the seeds you report
flatters the result). Results go to OUT/results.md.
"""
import argparse
import os
import re
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import experiment as ex  # noqa: E402

LR = 1.5e-3
STEPS = 2400


def policy(out, at, factor):
    """grow2x_late.toml with the growth at `at` and the rate times `factor` after it."""
    with open(os.path.join(HERE, "grow2x_late.toml")) as f:
        text = f.read()
    text, n = re.subn(r"(?m)^at = \d+", f"at = {at}", text)
    text, m = re.subn(r"(?m)^lr_factor = [0-9.]+", f"lr_factor = {factor}", text)
    if n != 1 or m != 1:
        sys.exit("grow2x_late.toml no longer has one `at` and one `lr_factor` line")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"grow-at{at}-f{factor:g}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def ratio(grown, scratch):
    """FLOPs of the grown run to reach the scratch run's best held-out loss, as a fraction of the scratch run's."""
    goal = ex.best(scratch)["val_loss"]
    f0 = ex.reach(scratch, goal)[0]
    got = ex.reach(grown, goal)
    return got[0] / f0 if got else None


def summary(ratios):
    got = [r for r in ratios if r is not None]
    text = f"{len(got)}/{len(ratios)}"
    if got:
        text += f", {ex.spread(got)}"
    # Seeds that never reach the goal are counted, not averaged: the mean is over those that do.
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aicf", default=os.path.join(ex.ROOT, "target/release/aicf"))
    ap.add_argument("--out", default=os.path.join(ex.ROOT, "target/grow_lm_sweep"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--at", default="4000,5000,6000,7000")
    ap.add_argument("--factors", default="0.25")
    ap.add_argument("--extra", default="", help="more at:factor pairs, comma-separated (5000:0.5,7000:0.5)")
    ap.add_argument("--post", type=int, default=STEPS, help="steps after the growth")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--select", type=int, default=3)
    a = ap.parse_args()
    ex.DEVICE = a.device
    configs = [(int(g), float(f)) for g in a.at.split(",") for f in a.factors.split(",")]
    configs += [(int(p.split(":")[0]), float(p.split(":")[1])) for p in a.extra.split(",") if p]
    pool = ThreadPoolExecutor(max(1, a.jobs))
    target, small = os.path.join(HERE, "target.mlir"), os.path.join(HERE, "small2x.mlir")
    scratch = {s: pool.submit(ex.run, a.aicf, target, os.path.join(a.out, f"scratch-s{s}"), s, LR, STEPS)
               for s in range(a.seeds)}
    # Longest runs first, so the pool ends together.
    grown = {}
    for g, f in sorted(configs, key=lambda c: -c[0]):
        pol = policy(os.path.join(a.out, "policies"), g, f)
        for s in range(a.seeds):
            tag = f"at{g}-f{f:g}" + ("" if a.post == STEPS else f"-p{a.post}")
            grown[(g, f, s)] = pool.submit(ex.run, a.aicf, small, os.path.join(a.out, f"{tag}-s{s}"), s, 2 * LR,
                                           g + a.post, pol)
    scratch = {s: x.result() for s, x in scratch.items()}
    grown = {k: x.result() for k, x in grown.items()}

    sel, rest = range(a.select), range(a.select, a.seeds)
    table = {c: [ratio(grown[(*c, s)], scratch[s]) for s in range(a.seeds)] for c in configs}

    def mean_of(rs):
        got = [r for r in rs if r is not None]
        return statistics.mean(got) if len(got) == len(rs) and got else float("inf")

    choice = min(configs, key=lambda c: mean_of([table[c][s] for s in sel]))
    lines = [f"Scratch: target.mlir, {STEPS} steps at lr {LR:g}, best held-out loss "
             f"{ex.spread([ex.best(scratch[s])['val_loss'] for s in range(a.seeds)], '{:.4f}')} over seeds 0-{a.seeds - 1}. "
             f"Grown: small2x.mlir at lr {2 * LR:g}, grow2x_late.toml's rewrite at step `at`, the rate times `lr_factor` "
             f"after it, {a.post} steps more. Device: {a.device}.", "",
             f"| at | lr_factor | FLOPs to the scratch best (x scratch), seeds 0-{a.select - 1} | "
             f"seeds {a.select}-{a.seeds - 1} | all seeds | best held-out loss |",
             "|---|---|---|---|---|---|"]
    for c in configs:
        rs = table[c]
        bests = [ex.best(grown[(*c, s)])["val_loss"] for s in range(a.seeds)]
        mark = " (chosen)" if c == choice else ""
        lines.append(f"| {c[0]}{mark} | {c[1]:g} | {summary([rs[s] for s in sel])} | {summary([rs[s] for s in rest])} | "
                     f"{summary(rs)} | {ex.spread(bests, '{:.4f}')} |")
    lines += ["", "Each cell: seeds reaching the scratch best, then the mean (min - max) FLOPs ratio of those that do. "
              f"The chosen configuration has the lowest mean on seeds 0-{a.select - 1} (every one reaching); "
              f"seeds {a.select}-{a.seeds - 1} were not used to choose it."]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "results.md" if a.post == STEPS else f"results-p{a.post}.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
