#!/usr/bin/env python3
"""Grows the char LM on tiny Shakespeare and compares it with the target
model trained from scratch (`make grow-lm`; Python standard library only).

    experiment.py [--aicf target/debug/aicf] [--out target/grow_lm]
                  [--seeds 3] [--steps 2400] [--lrs 1.5e-3,3e-3,6e-3]
                  [--device cuda --jobs 8] [--scheduled-only | --one-pass-only]

The target is examples/grow_lm/target.mlir: 4 pre-norm blocks of width 128,
4 heads, MLP 512, context 64, batch 16, no dropout. Runs, all Adam with a
constant learning rate, a held-out evaluation every 200 steps (256 windows
from the end of the text):

1. scratch, seed 0, `--steps` steps at each of `--lrs`: the learning rate
   with the lowest best held-out loss is the tuned one;
2. scratch at the tuned rate, seeds 1 .. N-1;
3. grown 2x (small2x.mlir: 2 blocks of width 64, 2 heads, grow2x.toml at
   step 2000, grow2x_late.toml at step 5000, grow2x_plateau.toml when the
   small model's held-out loss stops improving) and
   grown 4x (small4x.mlir: 1 block of width 32, 1 head, grow4x.toml), seeds
   0 .. N-1, and grown 4x in two 2x stages (small4x.mlir, grow_staged.toml:
   2 x 64 at step 1000, the target at step 2000). Each becomes the
   target's architecture at the step its policy names (`at`) in one
   function-preserving rewrite per stage. The small model trains
   at twice the tuned rate and the policy's `lr_factor` (0.25) brings the
   grown one to half the tuned rate. A grown run goes on for `--steps` steps
   after the growth, so it spends at least the scratch run's FLOPs;
4. the control: small2x.mlir alone, no growth, as many steps as the longest
   grown run, at the small models' rate;
5. the late growth and its scratch runs on seeds N .. --late-seeds - 1 (6
   by default): a row of its own over all those seeds. Its configuration
   was fixed on seeds 0 .. 2, so the added seeds say what a user can expect;
6. the stronger baseline: the target from scratch with the grown runs'
   rate drop (scratch_drop.toml: the rate halved at step 1600), on the same
   seeds, and the late growth measured against its best held-out loss;
7. the scheduled comparison (`--scheduled-only` runs just this): the
   baseline a practitioner would use, the target from scratch on a tuned
   schedule (warm-up 100 steps, then down to 0.1 x lr at the run's end):
   its rate tuned over `--lrs` on a cosine schedule, seed 0, then WSD
   (warm-up, stable, decay over the last fifth) at that rate; the better
   of the two on seeds 0 .. N-1, at `--steps` steps and at 1400. Against
   it the late 2x growth on a WSD schedule that starts again at the growth
   (grow2x_late_restart.toml): the small model at the full rate until step
   5000, the grown one 600, 1200 or 1800 steps more, the second half of
   them decaying. On a schedule each budget is a run of its own. With
   `--dropout`, the same with dropout 0.1 in every model
   (target-dropout.mlir and small2x-dropout.mlir: `cargo run -p
   aicf-compiler --example models -- char_lm context=64 batch=16
   dropout=0.1 layers=4 heads=4 dim=128`, and `layers=2 heads=2 dim=64`),
   its runs' directories ending in -dropout, its table in
   OUT/results-scheduled-dropout.md;
8. one pass over the text (`--one-pass-only` runs just this; OUT/results-one-pass.md):
   the target's budget is one pass, as in the published growth results,
   which never repeat their data (the small models, cheaper per character,
   read it up to twice before the growth, the 4x one 5 times). The target
   from scratch for 800 steps (892k
   training characters at 1024 a step are 871 steps) on a WSD schedule, its
   rate tuned on seed 0 over 2e-3 .. 6e-3; the 2x growth (small2x.mlir at
   6e-3, grow2x_late_restart.toml moved to step 1000, 1200, 1400 or 1600,
   then 200 steps of the target from 3e-3 on a WSD schedule of its own), the
   4x growth (small4x.mlir, grow4x_restart.toml at step 4000, then 200, 400
   or 600 steps), and the control, the small 2x model alone for 1000, 1200
   or 1600 steps; all on seeds 0 .. --late-seeds - 1, each run with its
   share of the cores (cores / --jobs threads). For each seed, a family's
   cost is that of its cheapest run that reaches the seed's scratch best.

For each seed, the goal is the from-scratch run's best held-out loss; the
table gives the training FLOPs (the compiled step's matrix products and
attention, as `metrics.jsonl` counts them) and the training seconds each
grown run needed to first reach it, as a ratio of the scratch run's, with
mean and spread over the seeds, and each run's held-out loss at half and at
all of the scratch run's FLOPs. Results go to OUT/results.md.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EVAL_EVERY = 200  # steps: windows per epoch / batch 16


DEVICE = "cpu"  # --device: where every run trains


def run(aicf, model, out, seed, lr, steps, policy=None, schedule=(), threads=None):
    metrics = os.path.join(out, "metrics.jsonl")
    if os.path.exists(os.path.join(out, "done")):
        return load(metrics)
    epochs = steps // EVAL_EVERY
    cmd = [aicf, "train", model, "--data", os.path.join(ROOT, "data/tinyshakespeare.txt"),
           "--windows-per-epoch", str(EVAL_EVERY * 16), "--epochs", str(epochs), "--lr", str(lr),
           "--seed", str(seed), "--out", out, "--no-progress", "--device", DEVICE]
    if policy:
        cmd += ["--adapt", policy]
    cmd += list(schedule)
    if threads:
        cmd += ["--threads", str(threads)]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    open(os.path.join(out, "done"), "w").close()
    return load(metrics)


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def grown_at(out):
    """The step of a run's last accepted growth (its decisions.jsonl)."""
    with open(os.path.join(out, "decisions.jsonl")) as f:
        steps = [d["step"] for d in map(json.loads, filter(str.strip, f)) if d["outcome"] == "accepted"]
    return steps[-1] if steps else "none"


def best(rows):
    return min(rows, key=lambda r: r["val_loss"])


def reach(rows, target):
    """FLOPs and training seconds until the held-out loss first reaches target."""
    seconds = 0.0
    for r in rows:
        seconds += r["seconds"]
        if r["val_loss"] <= target:
            return r["train_flops"], seconds, r["step"]
    return None


def at_flops(rows, flops):
    """The held-out loss of the last evaluation at or below `flops` training FLOPs."""
    last = None
    for r in rows:
        if r["train_flops"] <= flops * (1 + 1e-9):
            last = r["val_loss"]
    return last if last is not None else float("nan")


def spread(xs, fmt="{:.2f}"):
    if not xs:
        return "-"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return (fmt + " (" + fmt + " - " + fmt + ")").format(statistics.mean(xs), min(xs), max(xs))


def budgets(scratch, grown, steps):
    """Where growth pays, by the scratch run's budget. At a constant rate a
    scratch run of B steps is the first B steps of the longer one, so each
    budget's goal is the best held-out loss among them."""
    out = ["By the scratch budget (the goal: the scratch run's best held-out loss within its first B steps; "
           "FLOPs to reach it x the scratch run's):", "",
           "| scratch budget B (steps) | scratch best | " + " | ".join(f"{f if f.startswith('small') else 'grown ' + f}: seeds reaching, FLOPs (x scratch)"
                                                                       for f in grown) + " |",
           "|---|---|" + "---|" * len(grown)]
    for b in range(steps // 4, steps + 1, steps // 4):
        b = b - b % EVAL_EVERY
        goals = {s: best([r for r in rows if r["step"] <= b]) for s, rows in scratch.items()}
        cells = []
        for runs in grown.values():
            ratios = []
            for s, rows in runs.items():
                f0 = reach(scratch[s], goals[s]["val_loss"])[0]
                got = reach(rows, goals[s]["val_loss"])
                if got:
                    ratios.append(got[0] / f0)
            cells.append(f"{len(ratios)}/{len(runs)}, {spread(ratios)}")
        out.append(f"| {b} | {spread([g['val_loss'] for g in goals.values()], '{:.4f}')} | " + " | ".join(cells) + " |")
    return out


def schedule(kind, decay=None):
    """`aicf train`'s flags for a cosine or WSD schedule (warm-up 100 steps,
    down to 0.1 x lr; WSD's decay over its last `decay` steps)."""
    flags = ["--lr-schedule", kind, "--warmup-steps", "100", "--min-lr-factor", "0.1"]
    return tuple(flags + (["--decay-steps", str(decay)] if kind == "wsd" else []))


def end_row(runs, scratch_of):
    """A scheduled table row's cells: the run's FLOPs (x its scratch run's),
    its held-out loss at its end, and the seeds where it reaches the
    scratch run's best held-out loss."""
    budget, ends, reached = [], [], 0
    for s, rows in runs.items():
        goal = best(scratch_of[s])["val_loss"]
        budget.append(rows[-1]["train_flops"] / scratch_of[s][-1]["train_flops"])
        ends.append(rows[-1]["val_loss"])
        reached += reach(rows, goal) is not None
    return f"{spread(budget)} | {spread(ends, '{:.4f}')} | {reached}/{len(runs)}"


def scheduled(a, pool, lrs):
    """Part 7 of the docstring: growth against the target trained on a tuned
    schedule. On a schedule a run's loss at FLOPs F depends on the length
    the schedule was set for, so each budget is a run of its own (as in
    Kaddour et al. 2023, "No train no gain"): the scratch run at the scratch
    budget and at `short` steps, the grown run with 600, 1200 and 1800 steps
    after the growth."""
    suffix = "-dropout" if a.dropout else ""
    target, small = os.path.join(HERE, f"target{suffix}.mlir"), os.path.join(HERE, f"small2x{suffix}.mlir")
    short = 1400
    # A run's directory; the dropout models' runs are their own (a finished
    # run's directory is reused, so the two must never share one).
    out = lambda name: os.path.join(a.out, name + suffix)  # noqa: E731
    submit = lambda *args: pool.submit(run, a.aicf, *args)  # noqa: E731
    # The rate, tuned on the cosine schedule; then WSD at that rate (its
    # decay the last fifth): the baseline is the better of the two.
    tuning = {lr: submit(target, out(f"cos-scratch-lr{lr:g}-s0"), 0, lr, a.steps, None,
                         schedule("cosine"))
              for lr in lrs}
    tuning = {lr: f.result() for lr, f in tuning.items()}
    lr = min(lrs, key=lambda x: best(tuning[x])["val_loss"])
    wsd0 = submit(target, out(f"wsd-scratch-lr{lr:g}-s0"), 0, lr, a.steps, None,
                  schedule("wsd", a.steps // 5)).result()
    kind = "wsd" if best(wsd0)["val_loss"] < best(tuning[lr])["val_loss"] else "cosine"
    sched = lambda steps: schedule(kind, steps // 5)  # noqa: E731
    tag = "cos" if kind == "cosine" else "wsd"
    scratch = {0: tuning[lr] if kind == "cosine" else wsd0}
    scratch.update({s: submit(target, out(f"{tag}-scratch-lr{lr:g}-s{s}"), s, lr, a.steps, None,
                              sched(a.steps))
                    for s in range(1, a.seeds)})
    shorter = {s: submit(target, out(f"{tag}-scratch{short}-lr{lr:g}-s{s}"), s, lr, short, None,
                         sched(short))
               for s in range(a.seeds)}
    # The grown runs: the small model at the tuned rate until step 5000,
    # the grown one from half of it, WSD decaying over the second half of
    # the steps after the growth.
    policy = os.path.join(HERE, "grow2x_late_restart.toml")
    grown = {post: {s: submit(small, out(f"wsd-grown2x-late-{post}-s{s}"), s, lr, 5000 + post,
                              policy, schedule("wsd", post // 2))
                    for s in range(a.seeds)}
             for post in (600, 1200, 1800)}
    scratch = {s: f.result() if hasattr(f, "result") else f for s, f in scratch.items()}
    shorter = {s: f.result() for s, f in shorter.items()}
    grown = {p: {s: f.result() for s, f in runs.items()} for p, runs in grown.items()}
    first = []
    for s in range(a.seeds):
        goal = best(scratch[s])["val_loss"]
        hits = [got[0] for runs in grown.values() if (got := reach(runs[s], goal))]
        first.append(min(hits) / reach(scratch[s], goal)[0] if hits else None)
    got = [x for x in first if x is not None]
    lines = ["On a tuned schedule (each budget a run of its own; warm-up 100 steps, then down to 0.1 x lr at "
             "the run's end):", "",
             "Tuning (seed 0, best held-out loss): cosine " + ", ".join(
                 f"lr {x:g}: {best(tuning[x])['val_loss']:.4f}" for x in lrs) +
             f"; WSD (the last fifth decaying) at lr {lr:g}: {best(wsd0)['val_loss']:.4f}; the baseline: {kind} "
             f"at lr {lr:g}", "",
             "| run | FLOPs (x scratch) | held-out loss at its end | seeds reaching the scratch best |",
             "|---|---|---|---|",
             f"| scratch ({kind}, {a.steps} steps) | {end_row(scratch, scratch)} |",
             f"| scratch ({kind}, {short} steps) | {end_row(shorter, scratch)} |"]
    for post, runs in grown.items():
        lines.append(f"| grown 2x at step 5000, then {post} steps (WSD, the last {post // 2} decaying) | "
                     f"{end_row(runs, scratch)} |")
    lines += ["", f"Mean (min - max) over seeds 0-{a.seeds - 1}. The small model trains at lr {lr:g} until the "
              f"growth, the grown one from {lr / 2:g} (grow2x_late_restart.toml). FLOPs to first reach the scratch "
              f"best in any of the grown runs: {len(got)}/{a.seeds} seeds, {spread(got)} x the scratch run's."]
    return lines


# Part 8: the target's budget one pass over the text, as in the published
# growth results (none of them repeats its data). 892k training characters
# at 16 x 64 per step are 871 steps; 800 is the last multiple of the
# evaluation interval below it.
ONE_PASS_STEPS = 800
ONE_PASS_LRS = (2e-3, 3e-3, 4e-3, 6e-3)
ONE_PASS_SMALL_LR = 6e-3
ONE_PASS_GROW_AT = (1000, 1200, 1400, 1600)  # small-model steps; the grown model then trains 200 more
ONE_PASS_GROWN_STEPS = 200
ONE_PASS_ALONE = (1000, 1200, 1600)  # the control: the small model alone, this many steps
ONE_PASS_GROW4X_AT = 4000  # the 4x growth (small4x.mlir, 1 x 32) at this step ...
ONE_PASS_GROW4X_AFTER = (200, 400, 600)  # ... then this many steps of the target


def one_pass(a, pool):
    """Part 8 of the docstring: growth against the target trained from
    scratch for one pass over the training text, on a tuned WSD schedule.
    Every budget is a run of its own; for each seed the goal is its scratch
    run's best held-out loss, and a grown (or small) run's cost is that of
    the cheapest budget that reaches it."""
    target, small = os.path.join(HERE, "target.mlir"), os.path.join(HERE, "small2x.mlir")
    small4x = os.path.join(HERE, "small4x.mlir")
    # Runs at once share the cores: each gets its part, so that training
    # seconds compare (on a GPU every run uses the device).
    threads = max(1, (os.cpu_count() or 1) // max(1, a.jobs)) if DEVICE == "cpu" else None
    os.makedirs(os.path.join(a.out, "one-pass"), exist_ok=True)

    def submit(model, name, seed, lr, steps, policy=None, decay=None):
        return pool.submit(run, a.aicf, model, os.path.join(a.out, "one-pass", f"{name}-s{seed}"), seed, lr, steps,
                           policy, schedule("wsd", decay or steps // 5), threads)

    def policy(at, template="grow2x_late_restart"):
        # The template's growth moved to step `at`.
        with open(os.path.join(HERE, f"{template}.toml")) as f:
            text = f.read()
        if text.count("at = 5000") != 1:
            sys.exit(f"{template}.toml: expected one `at = 5000` to move")
        path = os.path.join(a.out, "one-pass", f"{template}_at{at}.toml")
        with open(path, "w") as f:
            f.write(text.replace("at = 5000", f"at = {at}"))
        return path

    steps = ONE_PASS_STEPS
    tuning = {lr: submit(target, f"scratch-lr{lr:g}", 0, lr, steps) for lr in ONE_PASS_LRS}
    tuning = {lr: f.result() for lr, f in tuning.items()}
    lr = min(ONE_PASS_LRS, key=lambda x: best(tuning[x])["val_loss"])
    seeds = range(max(a.seeds, a.late_seeds))
    scratch = {s: submit(target, f"scratch-lr{lr:g}", s, lr, steps) for s in seeds if s}
    # Each policy file is written once, before any run that reads it starts.
    policies = {at: policy(at) for at in ONE_PASS_GROW_AT}
    policy4x = policy(ONE_PASS_GROW4X_AT, "grow4x_restart")
    grown = {at: {s: submit(small, f"grown2x-at{at}", s, ONE_PASS_SMALL_LR, at + ONE_PASS_GROWN_STEPS, policies[at],
                            ONE_PASS_GROWN_STEPS // 2)
                  for s in seeds}
             for at in ONE_PASS_GROW_AT}
    grown4x = {post: {s: submit(small4x, f"grown4x-at{ONE_PASS_GROW4X_AT}-{post}", s, ONE_PASS_SMALL_LR,
                                ONE_PASS_GROW4X_AT + post, policy4x, post // 2)
                      for s in seeds}
               for post in ONE_PASS_GROW4X_AFTER}
    alone = {n: {s: submit(small, f"small2x-{n}", s, ONE_PASS_SMALL_LR, n) for s in seeds} for n in ONE_PASS_ALONE}
    scratch = {0: tuning[lr], **{s: f.result() for s, f in scratch.items()}}
    grown = {k: {s: f.result() for s, f in runs.items()} for k, runs in grown.items()}
    grown4x = {k: {s: f.result() for s, f in runs.items()} for k, runs in grown4x.items()}
    alone = {k: {s: f.result() for s, f in runs.items()} for k, runs in alone.items()}
    # A grown row counts only runs that grew where it says (a growth the
    # policy rolled back would leave the small model's curve in it).
    for name, at in ([(f"grown2x-at{at}", at) for at in ONE_PASS_GROW_AT]
                     + [(f"grown4x-at{ONE_PASS_GROW4X_AT}-{post}", ONE_PASS_GROW4X_AT) for post in ONE_PASS_GROW4X_AFTER]):
        for s in seeds:
            got = grown_at(os.path.join(a.out, "one-pass", f"{name}-s{s}"))
            if got != at:
                sys.exit(f"{name}-s{s}: its last accepted growth is at step {got}, not {at}")

    def cheapest(family):
        """Per seed, the FLOPs and training seconds (x the scratch run's) of
        the cheapest run of `family` that reaches the scratch best."""
        flops, secs = [], []
        for s in seeds:
            goal = best(scratch[s])["val_loss"]
            f0, t0, _ = reach(scratch[s], goal)
            hits = [got for runs in family.values() if (got := reach(runs[s], goal))]
            if hits:
                f, t, _ = min(hits)
                flops.append(f / f0)
                secs.append(t / t0)
        return flops, secs

    n = len(seeds)
    lines = ["One pass over the training text (each budget a run of its own, WSD: warm-up 100 steps, the last fifth "
             "decaying to 0.1 x lr):", "",
             "Tuning (seed 0, best held-out loss): " + ", ".join(
                 f"lr {x:g}: {best(tuning[x])['val_loss']:.4f}" for x in ONE_PASS_LRS) + f"; the baseline: lr {lr:g}",
             "",
             "| run | FLOPs (x scratch) | held-out loss at its end | seeds reaching the scratch best |",
             "|---|---|---|---|",
             f"| scratch (target, {steps} steps, lr {lr:g}) | {end_row(scratch, scratch)} |"]
    for at, runs in grown.items():
        lines.append(f"| grown 2x at step {at}, then {ONE_PASS_GROWN_STEPS} steps | {end_row(runs, scratch)} |")
    for post, runs in grown4x.items():
        lines.append(f"| grown 4x at step {ONE_PASS_GROW4X_AT}, then {post} steps | {end_row(runs, scratch)} |")
    for k, runs in alone.items():
        lines.append(f"| small 2x alone, {k} steps (no growth) | {end_row(runs, scratch)} |")
    gf, gs = cheapest(grown)
    ff, fs = cheapest(grown4x)
    af, as_ = cheapest(alone)
    lines += ["", f"Mean (min - max) over seeds 0-{n - 1}; the growth's configuration was chosen on seed 0. The small "
              f"models train at lr {ONE_PASS_SMALL_LR:g} until the growth, the grown one from "
              f"{ONE_PASS_SMALL_LR / 2:g} on a WSD schedule of its own (grow2x_late_restart.toml and "
              f"grow4x_restart.toml moved to the step: warm-up 100 steps, then the second half of the steps after the "
              f"growth decaying). {threads or 'default'} thread(s) per run, "
              f"{a.jobs} run(s) at once.", "",
              "The cheapest run (in FLOPs) that reaches each seed's scratch best (x the scratch run's):", "",
              "| | seeds reaching | FLOPs | training time |", "|---|---|---|---|",
              f"| grown 2x | {len(gf)}/{n} | {spread(gf)} | {spread(gs)} |",
              f"| grown 4x | {len(ff)}/{n} | {spread(ff)} | {spread(fs)} |",
              f"| small 2x alone | {len(af)}/{n} | {spread(af)} | {spread(as_)} |"]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aicf", default=os.path.join(ROOT, "target/debug/aicf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "target/grow_lm"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--lrs", default="1.5e-3,3e-3,6e-3")
    ap.add_argument("--cosine", type=int, metavar="WARMUP", default=None,
                    help="every run on a cosine schedule to 0.1 x lr, after WARMUP steps of linear warm-up")
    ap.add_argument("--late-seeds", type=int, default=6,
                    help="seeds of the late growth (and its scratch runs) in a row of its own (seeds past --seeds are added)")
    ap.add_argument("--device", default="cpu", help="where the runs train (aicf train --device)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (on a GPU, small runs share it well)")
    ap.add_argument("--scheduled-only", action="store_true",
                    help="only the comparison on a tuned cosine schedule (part 7; about an hour on 2 cores)")
    ap.add_argument("--one-pass-only", action="store_true",
                    help="only the comparison within one pass over the text (part 8; about 10 minutes on 2 cores)")
    ap.add_argument("--dropout", action="store_true",
                    help="with --scheduled-only: the models with dropout 0.1 (target-dropout.mlir, "
                         "small2x-dropout.mlir)")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    pool = ThreadPoolExecutor(max(1, a.jobs))
    if a.seeds < 1 or a.steps < EVAL_EVERY or a.steps % EVAL_EVERY:
        sys.exit(f"--seeds must be at least 1 and --steps a multiple of {EVAL_EVERY}")
    lrs = [float(x) for x in a.lrs.split(",")]
    if a.dropout and not a.scheduled_only:
        sys.exit("--dropout needs --scheduled-only")
    if a.one_pass_only:
        text = "\n".join(one_pass(a, pool))
        print(text)
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results-one-pass.md"), "w") as f:
            f.write(text + "\n")
        return
    if a.scheduled_only:
        text = "\n".join(scheduled(a, pool, lrs))
        print(text)
        with open(os.path.join(a.out, "results-scheduled-dropout.md" if a.dropout else "results-scheduled.md"), "w") as f:
            f.write(text + "\n")
        return
    sched = () if a.cosine is None else ("--lr-schedule", "cosine", "--warmup-steps", str(a.cosine))
    target = os.path.join(HERE, "target.mlir")

    tuning = {lr: pool.submit(run, a.aicf, target, os.path.join(a.out, f"scratch-lr{lr:g}-s0"), 0, lr, a.steps,
                              schedule=sched)
              for lr in lrs}
    tuning = {lr: f.result() for lr, f in tuning.items()}
    lr = min(lrs, key=lambda x: best(tuning[x])["val_loss"])
    scratch = {0: tuning[lr]}
    for s in range(1, a.seeds):
        scratch[s] = pool.submit(run, a.aicf, target, os.path.join(a.out, f"scratch-lr{lr:g}-s{s}"), s, lr, a.steps,
                                 schedule=sched)
    grown, grow_at, factor_after = {}, {}, {}
    policies = {"2x": "grow2x.toml", "2x late": "grow2x_late.toml", "2x on a plateau": "grow2x_plateau.toml",
                "4x": "grow4x.toml", "4x staged": "grow_staged.toml"}
    # A growth on a plateau has no step given: its run is as long as the late one's.
    PLATEAU_STEPS = 5000
    for factor, small in (("2x", "2x"), ("2x late", "2x"), ("2x on a plateau", "2x"), ("4x", "4x"),
                          ("4x staged", "4x")):
        model = os.path.join(HERE, f"small{small}.mlir")
        policy = os.path.join(HERE, policies[factor])
        with open(policy, "rb") as f:
            rules = [r for r in tomllib.load(f)["rule"] if r.get("when") != "instability"]
            # The step the model becomes the target (the last growth).
            fixed = [r["at"] for r in rules if r.get("when") == "steps" and "at" in r]
            grow_at[factor] = max(fixed) if len(fixed) == len(rules) else None
            # The rate after it: every growth's factor applies in turn.
            factor_after[factor] = math.prod(r.get("lr_factor", 1.0) for r in rules)
        steps = (grow_at[factor] or PLATEAU_STEPS) + a.steps
        tag = factor.replace(" ", "-")
        grown[factor] = {s: pool.submit(run, a.aicf, model, os.path.join(a.out, f"grown{tag}-s{s}"), s, 2 * lr, steps,
                                        policy, sched)
                         for s in range(a.seeds)}

    # The control: the small model alone, as long as the longest grown run.
    alone_steps = max(x for x in grow_at.values() if isinstance(x, int)) + a.steps
    alone = {s: pool.submit(run, a.aicf, os.path.join(HERE, "small2x.mlir"), os.path.join(a.out, f"small2x-alone-s{s}"),
                            s, 2 * lr, alone_steps, schedule=sched)
             for s in range(a.seeds)}
    # The late growth on more seeds: its configuration was fixed on seeds
    # 0 .. N-1, the others say what a user can expect from it.
    more = range(a.seeds, max(a.seeds, a.late_seeds))
    more_scratch = {s: pool.submit(run, a.aicf, target, os.path.join(a.out, f"scratch-lr{lr:g}-s{s}"), s, lr, a.steps,
                                   schedule=sched)
                    for s in more}
    more_late = {s: pool.submit(run, a.aicf, os.path.join(HERE, "small2x.mlir"),
                                os.path.join(a.out, f"grown2x-late-s{s}"), s, 2 * lr, grow_at["2x late"] + a.steps,
                                os.path.join(HERE, policies["2x late"]), sched)
                 for s in more}
    # The scratch run given the grown runs' rate drop, on the late seeds.
    dropped = {s: pool.submit(run, a.aicf, target, os.path.join(a.out, f"scratch-drop-lr{lr:g}-s{s}"), s, lr, a.steps,
                              os.path.join(HERE, "scratch_drop.toml"), sched)
               for s in range(max(a.seeds, a.late_seeds))}
    scratch = {s: f.result() if hasattr(f, "result") else f for s, f in scratch.items()}
    grown = {k: {s: f.result() for s, f in runs.items()} for k, runs in grown.items()}
    alone = {s: f.result() for s, f in alone.items()}
    all_scratch = {**scratch, **{s: f.result() for s, f in more_scratch.items()}}
    all_late = {**grown["2x late"], **{s: f.result() for s, f in more_late.items()}}
    dropped = {s: f.result() for s, f in dropped.items()}
    for factor in grown:
        if grow_at[factor] is None:
            # Where the growth happened, from each run's decision log.
            tag = factor.replace(" ", "-")
            grow_at[factor] = ", ".join(str(grown_at(os.path.join(a.out, f"grown{tag}-s{s}"))) for s in range(a.seeds))

    lines = [f"Tuning (seed 0, best held-out loss): " + ", ".join(
        f"lr {x:g}: {best(tuning[x])['val_loss']:.4f}" for x in lrs) + f"; tuned lr {lr:g}", ""]
    lines.append("| run | seeds reaching the scratch best | FLOPs to reach it (x scratch) | training time to reach it (x scratch) | best held-out loss | held-out loss at the scratch FLOPs | FLOPs to the grown run's best loss (x scratch) | held-out loss at half the scratch FLOPs |")
    lines.append("|---|---|---|---|---|---|---|---|")
    sb = [best(scratch[s])["val_loss"] for s in scratch]
    sf = [scratch[s][-1]["val_loss"] for s in scratch]
    half = [at_flops(scratch[s], scratch[s][-1]["train_flops"] / 2) for s in scratch]
    lines.append(f"| scratch (target, lr {lr:g}) | {len(scratch)}/{len(scratch)} | 1 | 1 | {spread(sb, '{:.4f}')} | "
                 f"{spread(sf, '{:.4f}')} | 1 | {spread(half, '{:.4f}')} |")
    labels = {f: f"grown {f} (at step{'' if isinstance(grow_at[f], int) else 's'} {grow_at[f]})" for f in grown}
    labels["small 2x alone"] = f"small 2x alone ({alone_steps} steps, no growth)"
    table = [(f, runs, scratch) for f, runs in grown.items()] + [("small 2x alone", alone, scratch)]
    if more:
        late_all = f"2x late, seeds 0-{max(more)}"
        labels[late_all] = f"grown 2x late, seeds 0-{max(more)} (against the scratch runs of the same seeds)"
        table.append((late_all, all_late, all_scratch))
    late_drop = f"2x late against the scratch run with the rate drop, seeds 0-{len(dropped) - 1}"
    labels[late_drop] = (f"grown 2x late, seeds 0-{len(dropped) - 1}, against the scratch run given the same rate drop "
                         f"(best {spread([best(r)['val_loss'] for r in dropped.values()], '{:.4f}')})")
    table.append((late_drop, all_late, dropped))
    for factor, runs, scratch_of in table:
        flops, secs, bests, finals, reached, own, halves = [], [], [], [], 0, [], []
        for s, rows in runs.items():
            goal = best(scratch_of[s])
            f0, t0, _ = reach(scratch_of[s], goal["val_loss"])
            got = reach(rows, goal["val_loss"])
            bests.append(best(rows)["val_loss"])
            finals.append(at_flops(rows, scratch_of[s][-1]["train_flops"]))
            halves.append(at_flops(rows, scratch_of[s][-1]["train_flops"] / 2))
            if got:
                reached += 1
                flops.append(got[0] / f0)
                secs.append(got[1] / t0)
            # Where growth paid: the FLOPs each run needed to reach the grown run's best.
            mine, theirs = reach(rows, best(rows)["val_loss"]), reach(scratch_of[s], best(rows)["val_loss"])
            if mine and theirs:
                own.append(mine[0] / theirs[0])
        lines.append(f"| {labels[factor]} | {reached}/{len(runs)} | {spread(flops)} | {spread(secs)} | "
                     f"{spread(bests, '{:.4f}')} | {spread(finals, '{:.4f}')} | {spread(own)} | {spread(halves, '{:.4f}')} |")
    rates = {f: 2 * lr * x for f, x in factor_after.items()}
    after_growth = (f"{next(iter(rates.values())):g}" if len(set(rates.values())) == 1
                    else ", ".join(f"{v:g} ({f})" for f, v in rates.items()))
    lines.append("")
    lines.append("Mean (min - max) over the seeds; each grown run against the scratch run of its seed. "
                 f"Scratch: {a.steps} steps of batch 16 x 64 characters at lr {lr:g}; grown: the growth step plus "
                 f"{a.steps} steps ({PLATEAU_STEPS + a.steps} in all on a plateau), lr {2 * lr:g} before the growth "
                 f"and {after_growth} after; the small model alone at lr {2 * lr:g}; held-out loss every "
                 f"{EVAL_EVERY} steps.")
    if a.cosine is None:
        lines += [""] + budgets(scratch, {**grown, "small 2x alone": alone}, a.steps)
        lines += [""] + scheduled(a, pool, lrs)
        lines += [""] + one_pass(a, pool)
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
