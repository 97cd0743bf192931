#!/usr/bin/env python3
"""Leave-one-family-out evaluation of `aicf propose` (issue 29).

    python3 benches/induction/evaluate.py [--aicf target/debug/aicf] [--out target/induction]

1. Populate a run registry: every problem of data/problems (manifest.json)
   trained with every structure of the proposer's space at the problem's
   budget (`aicf train --flops-budget`), and, for tables, one growth run
   (`--adapt`: mlp 16 widened on plateaus); all through `aicf train`, which
   records them.
2. For each family: a copy of the registry without that family's runs;
   `aicf propose --budget` for each of its problems from that copy; the
   proposal trained at the same budget.
3. For each problem: the proposal's held-out loss against the default
   structure's, random search's (the expected best of k structures drawn
   from the space, k = 2 and 4, each trained at the budget: k times the
   FLOPs), the structure with the most parameters, and the best known (the
   best of the whole space); and the rank correlation (Spearman) between
   the proposer's predicted ranks and the losses the structures reached.
4. Search to a target: training the proposer's ranked structures one after
   another until one is within 5% of the best known, against random search
   (structures drawn without replacement) to the same target; FLOPs in
   runs at the budget. The search is also made one `aicf propose --next`
   at a time (the registry holding the runs tried so far), and must
   propose the ranking's structures in its order.
5. The same searches with early stopping (`search_cost`): each candidate
   after the first trained to RUNG of the budget, on to the budget only if
   not behind the best run so far, read off the registry's curves (a run
   at a constant rate stopped early is the prefix of the registry's run);
   random search with the same rule, over every order.

Every run is trained with several seeds (--seeds for tables, 10 by
default; --text-seeds for text, 3) and a structure's loss is the mean over
them. The seed draws the held-out rows as well as the initial weights, so
the mean is a repeated random sub-sampling validation: on the small tables
one seed's held-out loss moves by 2-4x (30 held-out rows of iris), and the
best of many single runs is mostly the luckiest. Stdlib only. Runs take
about 45 minutes on 2 cores; --families narrows it; --reuse keeps the
runs of an earlier evaluation. The tables go to <out>/results.md, the
rows to <out>/results.json.
"""

import argparse
import itertools
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The proposer's space and defaults (aicf_compiler::train::propose).
SPACE = {
    "table": ["mlp 16", "mlp 64", "mlp 128", "mlp 256", "mlp 32-32", "mlp 128-128", "mlp 64-64-64"],
    "text": ["lm 1x32", "lm 1x64", "lm 2x32", "lm 2x64"],
}
DEFAULT = {"table": "mlp 128", "text": "lm 2x64"}
# The budget: epochs of the default structure over the training rows.
EPOCHS = {"table": 40.0, "text": 2.5}
# Text: shorter epochs, so the curve has points to read the budget off.
TEXT_ARGS = ["--windows-per-epoch", "800", "--eval-windows", "128"]
COMMON = ["--epochs", "100000", "--lr", "3e-3", "--no-progress", "--gemm", "generated", "--threads", "2"]
# Within this much of the best known loss counts as reaching it.
TARGET = 1.05
# A search with early stopping trains each candidate after the first to
# this fraction of the budget (successive halving's first rung), and on to
# the budget only if it is not behind (see `search_cost`).
RUNG = 0.25


def kind(task):
    return "text" if task == "text" else "table"


def run(cmd, log):
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        with open(log) as f:
            tail = f.read()[-2000:]
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{tail}")


def slug(s):
    return s.replace(" ", "_").replace("-", "_")


def steps_per_epoch(rows, batch):
    """As the proposer counts them (propose.rs, growth_policy): the trainer
    runs the last, short batch too; at least 5."""
    return max(5, math.ceil(0.8 * rows / batch))


def growth_policy(path, window):
    """The benchmark's growth run: the policy `aicf propose` writes for a
    grown `mlp 16` (the same keys and window), so that the runs the proposer
    scores are the runs its proposals make."""
    with open(path, "w") as f:
        f.write(f"""# Benchmark growth run: widen fc1 on plateaus of the training loss.
observe_every = 10
watch_steps = {window}
spike_factor = 4.0
[[rule]]
when = "plateau"
window = {window}
threshold = 0.1
min_gap = {2 * window}
action = {{ op = "widen", layer = "fc1", factor = 2.0, max_width = 256, rule = "zero-out" }}
[[rule]]
when = "instability"
action = {{ rollback = {{ lr_factor = 0.5 }} }}
""")


def loss_at(curve, budget):
    """The best held-out loss up to the end of the epoch that spends
    `budget` (aicf_compiler::train::propose::loss_at)."""
    best, reached = None, False
    for flops, val in curve:
        if val is not None and math.isfinite(val):
            best = val if best is None else min(best, val)
        if flops >= budget:
            reached = True
            break
    if not reached and curve and curve[-1][0] >= 0.9 * budget:
        reached = True
    return best if reached else None


def gap_at(curve, budget):
    """(held-out - training) / held-out at the epoch of the best held-out
    loss up to the budget, or None where the run stopped short of it or
    that epoch's training loss is not a number
    (aicf_compiler::train::propose::fit_at); `curve` holds (FLOPs,
    held-out, training) triples."""
    best = loss_at([(f, v) for f, v, _ in curve], budget)
    if best is None:
        return None
    train = next(t for _, v, t in curve if v == best)
    if train is None or not math.isfinite(train):
        return None
    return (best - train) / max(abs(best), 1e-12)


def spent_at(curve, budget):
    """The FLOPs a run has spent when it stops at the end of the epoch
    that spends `budget`: the run's curve is the prefix of a longer run's
    (a constant rate), so a run stopped there is that prefix."""
    for flops, _ in curve:
        if flops >= budget:
            return flops
    return curve[-1][0] if curve else budget


def registry_runs(db, budgets):
    """{(problem, structure, grown?, seed): (loss, params, run id, loss at
    the rung, FLOPs spent at the rung / budget, relative gap between the
    held-out and training losses at the best epoch)} of a registry."""
    con = sqlite3.connect(db)
    out = {}
    for rid, problem, fingerprint, settings, status, seed in con.execute(
            "SELECT id, problem, fingerprint, settings, status, seed FROM runs ORDER BY id"):
        if status != "finished":
            continue
        p = json.loads(problem)["name"]
        f = json.loads(fingerprint)
        grown = json.loads(settings).get("policy") is not None
        fit = con.execute("SELECT train_flops, val_loss, train_loss FROM curve WHERE run_id = ? ORDER BY epoch",
                          (rid,)).fetchall()
        curve = [(f, v) for f, v, _ in fit]
        loss = loss_at(curve, budgets[p]) if p in budgets else None
        rung = loss_at(curve, RUNG * budgets[p]) if p in budgets else None
        spent = spent_at(curve, RUNG * budgets[p]) / budgets[p] if p in budgets else None
        gap = gap_at(fit, budgets[p]) if p in budgets else None
        out[(p, f["structure"], grown, seed)] = (loss, f["params"], rid, rung, spent, gap)
    con.close()
    return out


def registry_losses(db, budgets, seeds_of):
    """{(problem, structure, grown?): (mean loss over the problem's seeds,
    params, the seeds' losses, mean loss at the rung, budgets spent at the
    rung, the mean relative gap of `registry_runs`)}; the mean is None
    unless every seed reached the budget."""
    runs = registry_runs(db, budgets)
    keys = {k[:3] for k in runs}
    out = {}
    for key in keys:
        seeds = seeds_of(key[0])
        got = [runs.get(key + (s,)) for s in seeds]
        losses = [g[0] for g in got if g is not None]
        params = next((g[1] for g in got if g is not None), None)
        if params is None:
            continue  # runs of other seeds only
        complete = len(losses) == len(seeds) and None not in losses
        mean = sum(losses) / len(losses) if complete else None
        rung = [g[3] for g in got if g is not None]
        rung = sum(rung) / len(rung) if complete and None not in rung else None
        spent = max((g[4] for g in got if g is not None), default=None)
        gaps = [g[5] for g in got if g is not None and g[5] is not None]
        gap = sum(gaps) / len(gaps) if gaps else None
        out[key] = (mean, params, losses, rung, spent, gap)
    return out


def baselines(db):
    """{problem: the constant predictor's loss} of a registry."""
    con = sqlite3.connect(db)
    out = {json.loads(p)["name"]: json.loads(p)["baseline_loss"] for (p,) in con.execute("SELECT problem FROM runs")}
    con.close()
    return out


def space_losses(truth, name, k):
    """{structure: (loss, params, run)} of a problem: every structure of
    the space, and the growth runs (`mlp 16 grown`)."""
    space = {s: truth[(name, s, False)] for s in SPACE[k] if (name, s, False) in truth}
    space.update({f"{s} grown": truth[(name, s, True)] for s in SPACE[k] if (name, s, True) in truth})
    return space


def overall_order(truth, pool, k, base):
    """The structures by mean regret (the proposer's log regret) over the
    problems of `pool`, whatever their descriptors: least first."""
    regret = {}
    for name in pool:
        losses = {s: v[0] for s, v in space_losses(truth, name, k).items() if v[0] is not None}
        eps = 0.01 * base[name]
        best = min(losses.values())
        for s, v in losses.items():
            regret.setdefault(s, []).append(math.log((v + eps) / (best + eps)))
    return sorted(regret, key=lambda s: sum(regret[s]) / len(regret[s]))


def expected_best_of(losses, k):
    """E[min] of k structures drawn without replacement from `losses`."""
    xs = sorted(losses)
    n = len(xs)
    k = min(k, n)
    total = math.comb(n, k)
    return sum(x * math.comb(n - 1 - i, k - 1) for i, x in enumerate(xs)) / total


def search_order(ranked, losses, gaps, params):
    """The order `aicf propose --next` searches in: after each structure
    tried, the best tried so far (by loss; the first by name among equals)
    decides: held out above its training loss (a positive gap), the
    untried structures of at most its parameters come first, else those
    of more; each group in the ranking's order (propose.rs,
    `search_direction`)."""
    order = [ranked[0]]
    while len(order) < len(ranked):
        done = [s for s in order if losses.get(s) is not None and gaps.get(s) is not None]
        rest = [s for s in ranked if s not in order]
        if done:
            best = min(sorted(done), key=lambda s: losses[s])
            over = gaps[best] > 0
            rest = ([s for s in rest if (params[s] <= params[best]) == over]
                    + [s for s in rest if (params[s] <= params[best]) != over])
        order.append(rest[0])
    return order


def runs_to_target(order, losses, target):
    """Runs of a search training `order` one after another until a loss is
    at most `target` (all of them, and one more, when none is)."""
    for i, s in enumerate(order):
        if losses[s] is not None and losses[s] <= target:
            return i + 1
    return len(order) + 1


def random_runs_to_target(losses, target):
    """Expected runs of random search (structures drawn without
    replacement) until a loss is at most `target`: (n + 1) / (hits + 1)."""
    hits = sum(1 for v in losses if v <= target)
    return (len(losses) + 1) / (hits + 1) if hits else len(losses) + 1


def search_cost(order, final, rung, spent, target, predict=None):
    """Budgets spent by a search with early stopping, training `order` one
    after another until a loss is at most `target`. The first candidate
    trains to the budget and becomes the incumbent. Each later one trains
    to the rung (`spent[s]` of a budget) and goes on to the budget only if
    it is not behind: its loss at the rung no worse than the incumbent's
    at the rung, or, with `predict`, its final loss predicted from the
    rung (`predict(s, loss at the rung)`, the registry's curves) no worse
    than the incumbent's final loss. A candidate that ends better becomes
    the incumbent. When the order runs out, the stopped candidates resume
    from the rung, best at the rung first (their checkpoints: the rest of
    a budget each); when none reaches the target, one budget more, as
    `runs_to_target` counts it."""
    cost, incumbent, stopped = 0.0, None, []
    for s in order:
        if incumbent is not None:
            cost += spent[s]
            behind = (predict(s, rung[s]) > incumbent[0]) if predict else rung[s] > incumbent[1]
            if behind:
                stopped.append(s)
                continue
            cost += 1.0 - spent[s]
        else:
            cost += 1.0
        if final[s] <= target:
            return cost
        if incumbent is None or final[s] < incumbent[0]:
            incumbent = (final[s], rung[s])
    for s in sorted(stopped, key=lambda s: rung[s]):
        cost += 1.0 - spent[s]
        if final[s] <= target:
            return cost
    return cost + 1.0


def random_search_cost(final, rung, spent, target, predict=None):
    """Expected budgets of random search (structures in a random order)
    with the same early stopping: the mean of `search_cost` over every
    order (at most 8! of them)."""
    names = sorted(final)
    orders = list(itertools.permutations(names))
    return sum(search_cost(o, final, rung, spent, target, predict) for o in orders) / len(orders)


def curve_ratios(truth, pool, k, base):
    """{structure: mean over the problems of `pool` of log((final + eps) /
    (loss at the rung + eps))}: how much a structure's held-out loss still
    falls after the rung, from the registry's curves (eps: 1% of the
    constant predictor's loss, as the proposer's regret)."""
    out = {}
    for name in pool:
        eps = 0.01 * base[name]
        for s, v in space_losses(truth, name, k).items():
            if v[0] is not None and v[3] is not None:
                out.setdefault(s, []).append(math.log((v[0] + eps) / (v[3] + eps)))
    return {s: sum(v) / len(v) for s, v in out.items()}


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                r[order[t]] = (i + j) / 2.0
            i = j + 1
        return r
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va > 0 and vb > 0 else None


def delete_family(db, names, keep=None):
    """Deletes the runs of the problems `names` from registry `db`, except
    those `keep(problem name, structure label)` keeps."""
    con = sqlite3.connect(db)
    ids = []
    for rid, problem, fingerprint, settings in con.execute("SELECT id, problem, fingerprint, settings FROM runs"):
        name = json.loads(problem)["name"]
        label = json.loads(fingerprint)["structure"] + (" grown" if json.loads(settings).get("policy") else "")
        if name in names and not (keep and keep(name, label)):
            ids.append(rid)
    for rid in ids:
        con.execute("DELETE FROM curve WHERE run_id = ?", (rid,))
        con.execute("DELETE FROM decisions WHERE run_id = ?", (rid,))
        con.execute("DELETE FROM runs WHERE id = ?", (rid,))
    con.commit()
    con.execute("VACUUM")
    con.close()
    return len(ids)


def next_search(aicf, registry, members, name, data, budget, losses, target, work):
    """The search to the target as a user makes it: `aicf propose --next`,
    train what it proposes (here: its runs in the registry), ask again. The
    registry at each step is the full one without the held-out family's
    runs, except this problem's runs of the structures tried so far.
    Returns the structures in the order proposed."""
    tried = []
    while True:
        db = os.path.join(work, "next.sqlite")
        shutil.copy(registry, db)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        delete_family(db, members, keep=lambda p, label: p == name and label in tried)
        info = os.path.join(work, "next.json")
        cmd = [aicf, "propose", "--next", "--data", data, "--budget", f"{budget:.6e}", "--runs-db", db,
               "-o", os.path.join(work, "next.mlir"), "--json", info]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            if "--next: every candidate" in r.stderr:
                return tried
            raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stderr}")
        with open(info) as f:
            j = json.load(f)
        label = j["structure"] + (" grown" if j["grow"] else "")
        if label in tried:
            raise SystemExit(f"{name}: aicf propose --next proposed {label} again")
        tried.append(label)
        if losses.get(label) is not None and losses[label] <= target:
            return tried


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aicf", default=os.path.join(ROOT, "target", "debug", "aicf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "induction"))
    ap.add_argument("--problems", default=os.path.join(ROOT, "data", "problems"))
    ap.add_argument("--families", nargs="*", help="only these families (default: all)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the registry and the proposals' runs of an earlier run; train what they lack")
    ap.add_argument("--registry-only", action="store_true", help="fill the registry, evaluate nothing")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per table run (a structure's loss is their mean)")
    ap.add_argument("--text-seeds", type=int, default=3, help="seeds per text run")
    args = ap.parse_args()
    aicf = os.path.abspath(args.aicf)
    out = os.path.abspath(args.out)
    with open(os.path.join(args.problems, "manifest.json")) as f:
        problems = json.load(f)["problems"]
    if args.families:
        problems = [p for p in problems if p["family"] in args.families]
    task_of = {p["name"]: kind(p["task"]) for p in problems}

    def seeds_of(name):
        return list(range(args.text_seeds if task_of.get(name) == "text" else args.seeds))

    os.makedirs(out, exist_ok=True)
    registry = os.path.join(out, "registry.sqlite")
    if not args.reuse:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(registry + suffix):
                os.remove(registry + suffix)
    for sub in ("models", "runs", "logs", "lofo", "proposals"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    started = time.time()

    # 1. The registry.
    budgets, shapes = {}, {}
    for p in problems:
        data = os.path.join(args.problems, p["file"])
        k = kind(p["task"])
        info = os.path.join(out, "models", p["name"] + ".json")
        run([aicf, "propose", "--data", data, "--structure", DEFAULT[k], "-o",
             os.path.join(out, "models", p["name"] + "_default.mlir"), "--json", info],
            os.path.join(out, "logs", p["name"] + "_describe.log"))
        with open(info) as f:
            j = json.load(f)
        shapes[p["name"]] = j["shape"]
        budgets[p["name"]] = EPOCHS[k] * 0.8 * j["shape"]["rows"] * j["default_flops_per_example"]
    have = registry_runs(registry, budgets) if args.reuse and os.path.exists(registry) else {}
    for p in problems:
        data = os.path.join(args.problems, p["file"])
        k = kind(p["task"])
        extra = TEXT_ARGS if k == "text" else []
        jobs = [(s, False) for s in SPACE[k]] + ([("mlp 16", True)] if k == "table" else [])
        for (s, grow), seed in itertools.product(jobs, seeds_of(p["name"])):
            if (p["name"], s, grow, seed) in have:
                continue
            structure = p["name"] + "_" + slug(s) + ("_grown" if grow else "")
            tag = f"{structure}_s{seed}"
            model = os.path.join(out, "models", structure + ".mlir")
            if not os.path.exists(model):
                run([aicf, "propose", "--data", data, "--structure", s, "-o", model],
                    os.path.join(out, "logs", structure + "_propose.log"))
            cmd = [aicf, "train", model, "--data", data, "--flops-budget", f"{budgets[p['name']]:.6e}",
                   "--runs-db", registry, "--out", os.path.join(out, "runs", tag), "--seed", str(seed)] + COMMON + extra
            if grow:
                batch = 16 if shapes[p["name"]]["rows"] < 320 else 32
                policy = os.path.join(out, "models", structure + ".toml")
                growth_policy(policy, steps_per_epoch(shapes[p["name"]]["rows"], batch))
                cmd += ["--adapt", policy]
            t = time.time()
            run(cmd, os.path.join(out, "logs", tag + ".log"))
            print(f"  {tag}: {time.time() - t:.1f} s", flush=True)
    truth = registry_losses(registry, budgets, seeds_of)
    constant = baselines(registry)
    if args.registry_only:
        return 0

    # 2. Leave one family out: propose, then train the proposal.
    evaluation = os.path.join(out, "proposals", "runs.sqlite")
    if not args.reuse:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(evaluation + suffix):
                os.remove(evaluation + suffix)
    proposed_have = registry_runs(evaluation, budgets) if args.reuse and os.path.exists(evaluation) else {}
    families = []
    for p in problems:
        if p["family"] not in families:
            families.append(p["family"])
    rows = []
    for fam in families:
        members = [p for p in problems if p["family"] == fam]
        lofo = os.path.join(out, "lofo", fam + ".sqlite")
        shutil.copy(registry, lofo)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(lofo + suffix):
                os.remove(lofo + suffix)
        removed = delete_family(lofo, {p["name"] for p in members})
        for p in members:
            name, k = p["name"], kind(p["task"])
            data = os.path.join(args.problems, p["file"])
            base = os.path.join(out, "proposals", name)
            run([aicf, "propose", "--data", data, "--budget", f"{budgets[name]:.6e}", "--runs-db", lofo,
                 "-o", base + ".mlir", "--policy", base + ".toml", "--json", base + ".json"], base + "_propose.log")
            with open(base + ".json") as f:
                proposal = json.load(f)
            grow = ["--adapt", base + ".toml"] if proposal["grow"] else []
            for seed in seeds_of(name):
                if (name, proposal["structure"], proposal["grow"], seed) in proposed_have:
                    continue
                run([aicf, "train", base + ".mlir", "--data", data, "--flops-budget", f"{budgets[name]:.6e}",
                     "--runs-db", evaluation, "--out", os.path.join(out, "runs", f"{name}_proposal_s{seed}"),
                     "--seed", str(seed)] + COMMON + (TEXT_ARGS if k == "text" else []) + grow, f"{base}_s{seed}.log")
            got = registry_losses(evaluation, budgets, seeds_of)
            proposed, _, proposed_seeds, proposed_rung, proposed_spent, _ = got[
                (name, proposal["structure"], proposal["grow"])]
            if proposed is None:
                raise SystemExit(f"{name}: a proposal's run stopped short of the budget ({proposed_seeds})")
            space = space_losses(truth, name, k)
            pool = [q["name"] for q in problems if q["family"] != fam and kind(q["task"]) == k]
            by_regret = overall_order(truth, pool, k, constant)
            overall = by_regret[0]
            losses = {s: v[0] for s, v in space.items() if v[0] is not None}
            predicted = {q["structure"]: q["score"] for q in proposal["predictions"]}
            common = [s for s in losses if s in predicted]
            rho = spearman([predicted[s] for s in common], [losses[s] for s in common])
            most_params = max(space, key=lambda s: space[s][1])
            best = min(list(losses.values()) + [proposed])
            best_structure = min(losses, key=losses.get)
            # Search to the target along the proposer's ranking: its first
            # structure is the proposal as trained; the others are trained as
            # the registry's runs were (the same commands and seeds).
            target = TARGET * best
            first = proposal["structure"] + (" grown" if proposal["grow"] else "")
            ranked = [q["structure"] for q in proposal["predictions"]]
            ranked = [first] + [s for s in ranked if s != first] + sorted(s for s in losses if s not in ranked)
            seq = dict(losses)
            seq[first] = proposed
            # After the first, the order also follows how the best structure
            # tried so far fitted (`search_order`), as `--next` does.
            static = runs_to_target(ranked, seq, target)
            ranked = search_order(ranked, seq, {s: space[s][5] for s in losses}, {s: space[s][1] for s in losses})
            guided = runs_to_target(ranked, seq, target)
            # The same search one `aicf propose --next` at a time: it must
            # follow that order.
            stepped = next_search(aicf, registry, {q["name"] for q in members}, name, data, budgets[name], seq,
                                  target, os.path.join(out, "proposals"))
            if stepped != ranked[:len(stepped)] or (len(stepped) < guided <= len(ranked)):
                raise SystemExit(f"{name}: aicf propose --next searched {stepped}, the search order is {ranked}")
            rand = random_runs_to_target(list(losses.values()), target)
            # The same search in the registry's order without descriptors,
            # and largest first (parameter count alone).
            plain = runs_to_target(by_regret + sorted(s for s in losses if s not in by_regret), losses, target)
            largest = runs_to_target(sorted(losses, key=lambda s: (-space[s][1], s)), losses, target)
            # The same searches with early stopping at the rung: against the
            # incumbent's loss at the rung, and against its final loss with
            # each candidate's final predicted from the rung by the curves of
            # the registry's other families; random search with the same rule.
            rungs = {s: space[s][3] for s in losses}
            spents = {s: space[s][4] for s in losses}
            seq_rung, seq_spent = dict(rungs), dict(spents)
            seq_rung[first], seq_spent[first] = proposed_rung, proposed_spent
            ratios = curve_ratios(truth, pool, k, constant)
            eps = 0.01 * constant[name]

            def predict(s, at_rung):
                return (at_rung + eps) * math.exp(ratios.get(s, 0.0)) - eps
            searches = {
                "es": search_cost(ranked, seq, seq_rung, seq_spent, target),
                "es_random": random_search_cost(losses, rungs, spents, target),
                "lc": search_cost(ranked, seq, seq_rung, seq_spent, target, predict),
                "lc_random": random_search_cost(losses, rungs, spents, target, predict),
            }
            rows.append({
                "family": fam, "problem": name, "task": p["task"], "budget": budgets[name],
                "removed": removed, "proposal": proposal["structure"] + (" grown" if proposal["grow"] else ""),
                "loss": proposed,
                "default": losses.get(DEFAULT[k]), "rs2": expected_best_of(list(losses.values()), 2),
                "rs4": expected_best_of(list(losses.values()), 4), "params": losses.get(most_params),
                "params_structure": most_params, "overall": losses.get(overall), "overall_structure": overall, "best": best, "best_structure": best_structure,
                "spearman": rho, "seeds": proposed_seeds, "guided": guided, "static": static, "random": rand,
                "plain": plain, "largest": largest, **searches,
                "neighbours": [n["problem"] for n in proposal["neighbours"]],
            })
            r = rows[-1]
            print(f"{fam:<13} {name:<15} proposal {r['proposal']:<13} {r['loss']:.4f}  default {r['default']:.4f}"
                  f"  best {r['best']:.4f} ({best_structure})  rho {rho if rho is None else round(rho, 2)}",
                  flush=True)

    # 3. The table.
    def fmt(v, d=4):
        return "-" if v is None else f"{v:.{d}f}"
    n_seeds = f"{args.seeds} seeds for tables, {args.text_seeds} for text"
    lines = [f"Every loss is the mean held-out loss over seeds ({n_seeds}) at the budget.", "",
             "| family | problem | budget (FLOPs) | proposal | loss (seeds' range) | default | random search k=2 (2x FLOPs) | "
             "random search k=4 (4x FLOPs) | most parameters | registry's overall best (no descriptors) | best known | "
             "within 5% | runs to within 5%: proposer's order / random search | Spearman | drew on |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        within = r["loss"] <= TARGET * r["best"]
        spread = f"{min(r['seeds']):.4f}-{max(r['seeds']):.4f}"
        lines.append(
            f"| {r['family']} | {r['problem']} | {r['budget']:.2e} | {r['proposal']} | {fmt(r['loss'])} ({spread}) | "
            f"{fmt(r['default'])} | {fmt(r['rs2'])} | {fmt(r['rs4'])} | {fmt(r['params'])} ({r['params_structure']}) | "
            f"{fmt(r['overall'])} ({r['overall_structure']}) | {fmt(r['best'])} ({r['best_structure']}) | "
            f"{'yes' if within else 'no'} | {r['guided']} / {r['random']:.2f} | {fmt(r['spearman'], 2)} | "
            f"{', '.join(r['neighbours'])} |")
    lines += ["", "| family | proposal / default (geometric mean) | beats default | proposal / best known | "
              "within 5% of best | proposal / random search k=2 | proposal / overall best | "
              "FLOPs to within 5%: proposer's order / random search | mean Spearman |",
              "|---|---|---|---|---|---|---|---|---|"]
    beat = within_all = halved = 0
    for fam in families:
        rs = [r for r in rows if r["family"] == fam]
        # Geometric means of loss ratios (a loss of exactly 0 counts as 1e-9).
        gm = lambda key: math.exp(sum(math.log(max(r["loss"], 1e-9) / max(r[key], 1e-9)) for r in rs) / len(rs))
        vs_default, vs_best, vs_rs2, vs_overall = gm("default"), gm("best"), gm("rs2"), gm("overall")
        rhos = [r["spearman"] for r in rs if r["spearman"] is not None]
        wins = vs_default < 1.0 and any(r["proposal"] != DEFAULT[kind(r["task"])] for r in rs)
        within = all(r["loss"] <= TARGET * r["best"] for r in rs)
        # Every run is one budget of its problem: FLOPs in budgets.
        search = sum(r["guided"] * r["budget"] for r in rs) / sum(r["random"] * r["budget"] for r in rs)
        beat += wins
        within_all += within
        halved += search <= 0.5
        lines.append(f"| {fam} | {vs_default:.3f} | {'yes' if wins else 'no'} | {vs_best:.3f} | "
                     f"{'yes' if within else 'no'} | {vs_rs2:.3f} | {vs_overall:.3f} | {search:.2f} | "
                     f"{fmt(sum(rhos) / len(rhos) if rhos else None, 2)} |")
    # Over all problems, each problem's runs counted in its own budgets (the
    # text problems' budgets are 100x the tables': FLOPs summed would be the
    # text problems alone).
    guided_runs = sum(r["guided"] for r in rows)
    static_runs = sum(r["static"] for r in rows)
    random_runs = sum(r["random"] for r in rows)
    plain_runs = sum(r["plain"] for r in rows)
    largest_runs = sum(r["largest"] for r in rows)
    lines += ["", f"The proposal beats the default on {beat} of {len(families)} held-out families, and is within 5% "
              f"of the best known loss on every problem of {within_all} of them with one training run at the budget "
              f"(random search k=2 spends two). Searching in the proposer's order reaches within 5% of the best "
              f"known with {guided_runs} runs at the budget over the {len(rows)} problems, random search with "
              f"{random_runs:.1f} expected ({guided_runs / random_runs:.2f}x; in the ranking's order alone, without reading "
              f"how the best structure tried so far fitted, {static_runs} runs, {static_runs / random_runs:.2f}x); "
              f"with at most half of random search's "
              f"FLOPs on {halved} of {len(families)} families. The same search in the order of the registry's mean "
              f"regret without descriptors takes {plain_runs} runs ({plain_runs / random_runs:.2f}x), largest "
              f"first (parameter count alone) {largest_runs} ({largest_runs / random_runs:.2f}x). Each search was "
              f"also made as a user makes it, one `aicf propose --next` at a time with the runs tried so far in the "
              f"registry, and proposed the structures in that order. "
              f"{n_seeds}; {time.time() - started:.0f} s."]
    # The searches with early stopping, in budgets of each problem.
    lines += ["", f"Searches with early stopping (each candidate after the first trained to {RUNG:g} of the budget, "
              "then on only if not behind the incumbent; `search_cost`), in budgets to within 5% of the best known:",
              "", "| family | proposer's order, every run to the budget | random search, every run to the budget | "
              "proposer's order, stopped on the rung's loss | random search, the same stopping | "
              "proposer's order, stopped on the final predicted from the registry's curves | random search, the same "
              "stopping |", "|---|---|---|---|---|---|---|"]
    for fam in families + [None]:
        rs = [r for r in rows if fam is None or r["family"] == fam]
        total = {key: sum(r[key] for r in rs) for key in ("guided", "random", "es", "es_random", "lc", "lc_random")}
        lines.append(f"| {fam or '**all**'} | {total['guided']:.2f} | {total['random']:.2f} | {total['es']:.2f} | "
                     f"{total['es_random']:.2f} | {total['lc']:.2f} | {total['lc_random']:.2f} |")
    total = {key: sum(r[key] for r in rows) for key in ("random", "es", "es_random", "lc", "lc_random")}
    lines += ["", f"With early stopping on the rung's loss the proposer's order spends {total['es']:.1f} budgets, "
              f"{total['es'] / total['random']:.2f}x of random search with every run to the budget and "
              f"{total['es'] / total['es_random']:.2f}x of random search with the same stopping; stopping on the "
              f"predicted final loss, {total['lc']:.1f} ({total['lc'] / total['random']:.2f}x and "
              f"{total['lc'] / total['lc_random']:.2f}x)."]
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
