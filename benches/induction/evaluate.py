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

Stdlib only. Runs take about half an hour on 2 cores; --families narrows it.
The table goes to <out>/results.md.
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
COMMON = ["--epochs", "100000", "--seed", "0", "--lr", "3e-3", "--no-progress", "--gemm", "generated",
          "--threads", "2"]


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


def growth_policy(path, steps_per_epoch):
    window = max(10, steps_per_epoch)
    with open(path, "w") as f:
        f.write(f"""# Benchmark growth run: widen fc1 on plateaus of the training loss.
observe_every = 10
watch_steps = {window}
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


def registry_losses(db, budgets):
    """{(problem, structure, grown?): (loss, params, run id)} of a registry."""
    con = sqlite3.connect(db)
    out = {}
    for rid, problem, fingerprint, settings, status in con.execute(
            "SELECT id, problem, fingerprint, settings, status FROM runs ORDER BY id"):
        if status != "finished":
            continue
        p = json.loads(problem)["name"]
        f = json.loads(fingerprint)
        grown = json.loads(settings).get("policy") is not None
        curve = con.execute("SELECT train_flops, val_loss FROM curve WHERE run_id = ? ORDER BY epoch", (rid,)).fetchall()
        loss = loss_at(curve, budgets[p]) if p in budgets else None
        out[(p, f["structure"], grown)] = (loss, f["params"], rid)
    con.close()
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


def overall_best(truth, pool, k, base):
    """The structure of least mean regret (the proposer's log regret) over
    the problems of `pool`, whatever their descriptors."""
    regret = {}
    for name in pool:
        losses = {s: v[0] for s, v in space_losses(truth, name, k).items() if v[0] is not None}
        eps = 0.01 * base[name]
        best = min(losses.values())
        for s, v in losses.items():
            regret.setdefault(s, []).append(math.log((v + eps) / (best + eps)))
    return min(regret, key=lambda s: sum(regret[s]) / len(regret[s]))


def expected_best_of(losses, k):
    """E[min] of k structures drawn without replacement from `losses`."""
    xs = sorted(losses)
    n = len(xs)
    k = min(k, n)
    total = math.comb(n, k)
    return sum(x * math.comb(n - 1 - i, k - 1) for i, x in enumerate(xs)) / total


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


def delete_family(db, names):
    con = sqlite3.connect(db)
    ids = [rid for rid, problem in con.execute("SELECT id, problem FROM runs")
           if json.loads(problem)["name"] in names]
    for rid in ids:
        con.execute("DELETE FROM curve WHERE run_id = ?", (rid,))
        con.execute("DELETE FROM decisions WHERE run_id = ?", (rid,))
        con.execute("DELETE FROM runs WHERE id = ?", (rid,))
    con.commit()
    con.execute("VACUUM")
    con.close()
    return len(ids)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aicf", default=os.path.join(ROOT, "target", "debug", "aicf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "induction"))
    ap.add_argument("--problems", default=os.path.join(ROOT, "data", "problems"))
    ap.add_argument("--families", nargs="*", help="only these families (default: all)")
    ap.add_argument("--reuse", action="store_true", help="keep the registry of an earlier run; train what it lacks")
    ap.add_argument("--registry-only", action="store_true", help="fill the registry, evaluate nothing")
    args = ap.parse_args()
    aicf = os.path.abspath(args.aicf)
    out = os.path.abspath(args.out)
    with open(os.path.join(args.problems, "manifest.json")) as f:
        problems = json.load(f)["problems"]
    if args.families:
        problems = [p for p in problems if p["family"] in args.families]
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
    have = registry_losses(registry, budgets) if args.reuse and os.path.exists(registry) else {}
    for p in problems:
        data = os.path.join(args.problems, p["file"])
        k = kind(p["task"])
        extra = TEXT_ARGS if k == "text" else []
        jobs = [(s, False) for s in SPACE[k]] + ([("mlp 16", True)] if k == "table" else [])
        for s, grow in jobs:
            if (p["name"], s, grow) in have:
                continue
            tag = p["name"] + "_" + slug(s) + ("_grown" if grow else "")
            model = os.path.join(out, "models", tag + ".mlir")
            run([aicf, "propose", "--data", data, "--structure", s, "-o", model],
                os.path.join(out, "logs", tag + "_propose.log"))
            cmd = [aicf, "train", model, "--data", data, "--flops-budget", f"{budgets[p['name']]:.6e}",
                   "--runs-db", registry, "--out", os.path.join(out, "runs", tag)] + COMMON + extra
            if grow:
                batch = 16 if shapes[p["name"]]["rows"] < 320 else 32
                policy = os.path.join(out, "models", tag + ".toml")
                growth_policy(policy, int(0.8 * shapes[p["name"]]["rows"] // batch))
                cmd += ["--adapt", policy]
            t = time.time()
            run(cmd, os.path.join(out, "logs", tag + ".log"))
            print(f"  {tag}: {time.time() - t:.1f} s", flush=True)
    truth = registry_losses(registry, budgets)
    constant = baselines(registry)
    if args.registry_only:
        return 0

    # 2. Leave one family out: propose, then train the proposal.
    evaluation = os.path.join(out, "proposals", "runs.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(evaluation + suffix):
            os.remove(evaluation + suffix)
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
            run([aicf, "train", base + ".mlir", "--data", data, "--flops-budget", f"{budgets[name]:.6e}",
                 "--runs-db", evaluation, "--out", os.path.join(out, "runs", name + "_proposal")]
                + COMMON + (TEXT_ARGS if k == "text" else []) + grow, base + ".log")
            got = registry_losses(evaluation, budgets)
            proposed = got[(name, proposal["structure"], proposal["grow"])][0]
            space = space_losses(truth, name, k)
            pool = [q["name"] for q in problems if q["family"] != fam and kind(q["task"]) == k]
            overall = overall_best(truth, pool, k, constant)
            losses = {s: v[0] for s, v in space.items() if v[0] is not None}
            predicted = {q["structure"]: q["score"] for q in proposal["predictions"]}
            common = [s for s in losses if s in predicted]
            rho = spearman([predicted[s] for s in common], [losses[s] for s in common])
            most_params = max(space, key=lambda s: space[s][1])
            best = min(list(losses.values()) + [proposed])
            best_structure = min(losses, key=losses.get)
            rows.append({
                "family": fam, "problem": name, "task": p["task"], "budget": budgets[name],
                "removed": removed, "proposal": proposal["structure"] + (" grown" if proposal["grow"] else ""),
                "loss": proposed,
                "default": losses.get(DEFAULT[k]), "rs2": expected_best_of(list(losses.values()), 2),
                "rs4": expected_best_of(list(losses.values()), 4), "params": losses.get(most_params),
                "params_structure": most_params, "overall": losses.get(overall), "overall_structure": overall, "best": best, "best_structure": best_structure,
                "spearman": rho,
                "neighbours": [n["problem"] for n in proposal["neighbours"]],
            })
            r = rows[-1]
            print(f"{fam:<13} {name:<15} proposal {r['proposal']:<13} {r['loss']:.4f}  default {r['default']:.4f}"
                  f"  best {r['best']:.4f} ({best_structure})  rho {rho if rho is None else round(rho, 2)}",
                  flush=True)

    # 3. The table.
    def fmt(v, d=4):
        return "-" if v is None else f"{v:.{d}f}"
    lines = ["| family | problem | budget (FLOPs) | proposal | loss | default | random search k=2 (2x FLOPs) | "
             "random search k=4 (4x FLOPs) | most parameters | registry's overall best (no descriptors) | best known | "
             "within 5% | Spearman | drew on |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        within = r["loss"] <= 1.05 * r["best"]
        lines.append(
            f"| {r['family']} | {r['problem']} | {r['budget']:.2e} | {r['proposal']} | {fmt(r['loss'])} | "
            f"{fmt(r['default'])} | {fmt(r['rs2'])} | {fmt(r['rs4'])} | {fmt(r['params'])} ({r['params_structure']}) | "
            f"{fmt(r['overall'])} ({r['overall_structure']}) | {fmt(r['best'])} ({r['best_structure']}) | {'yes' if within else 'no'} | {fmt(r['spearman'], 2)} | "
            f"{', '.join(r['neighbours'])} |")
    lines += ["", "| family | proposal / default (geometric mean) | beats default | proposal / best known | "
              "within 5% of best | proposal / random search k=2 | proposal / overall best | mean Spearman |",
              "|---|---|---|---|---|---|---|---|"]
    beat = within_all = 0
    for fam in families:
        rs = [r for r in rows if r["family"] == fam]
        # Geometric means of loss ratios (a loss of exactly 0 counts as 1e-9).
        gm = lambda key: math.exp(sum(math.log(max(r["loss"], 1e-9) / max(r[key], 1e-9)) for r in rs) / len(rs))
        vs_default, vs_best, vs_rs2, vs_overall = gm("default"), gm("best"), gm("rs2"), gm("overall")
        rhos = [r["spearman"] for r in rs if r["spearman"] is not None]
        wins = vs_default < 1.0 and any(r["proposal"] != DEFAULT[kind(r["task"])] for r in rs)
        within = all(r["loss"] <= 1.05 * r["best"] for r in rs)
        beat += wins
        within_all += within
        lines.append(f"| {fam} | {vs_default:.3f} | {'yes' if wins else 'no'} | {vs_best:.3f} | "
                     f"{'yes' if within else 'no'} | {vs_rs2:.3f} | {vs_overall:.3f} | {fmt(sum(rhos) / len(rhos) if rhos else None, 2)} |")
    lines += ["", f"The proposal beats the default on {beat} of {len(families)} held-out families, and is within 5% "
              f"of the best known loss on every problem of {within_all} of them, with one training run at the budget "
              f"(random search k=2 spends two). {len(rows)} problems; {time.time() - started:.0f} s."]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
