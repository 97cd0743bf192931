# torchvision CNNs trained by AICF (imported from ONNX) against PyTorch eager,
# side by side on this machine: one Adam train step (lr 1e-3, cross-entropy)
# of batch 16 at 3 x 32 x 32, 10 classes, 2 threads. The video ResNets
# (3-D convolutions: r3d_18, mc3_18, r2plus1d_18) run only when named in
# --models, on batches of 4 clips of 4 frames at 32 x 32.
#
# Run in a venv with torch, torchvision and onnx (`make onnx-venv`), after
# `cargo build --release -p aicf-tools`:
#   target/onnx-venv/bin/python benches/onnx_vision/bench.py [--rounds 3] [--direct] [--compile] [--models resnet18,...] [--out DIR]
#
# Each model is exported once (TorchScript exporter, opset 17, batch norm kept
# in training mode) to DIR (default target/onnx-vision). Every round times
# each model in PyTorch eager (median of 10 steps after 3 warm-up steps), then
# `aicf bench` on its export (median of 10 steps), and with --direct also
# `aicf bench --conv direct` (convolutions as one direct kernel each, the
# lowering before convolutions ran as products over their window rows), and
# with --compile also PyTorch under `torch.compile` (the model and the
# optimizer step compiled once per model, before the first round; each round
# times 10 steps after 3 warm-up steps). The table gives each system's median
# over the rounds and AICF / PyTorch (the faster of eager and compiled).
import argparse, os, platform, re, statistics, subprocess, sys, time, warnings

import torch, torch.nn.functional as F, torchvision.models as tvm

MODELS = {
    "resnet18": lambda: tvm.resnet18(num_classes=10),
    "mobilenet_v3_small": lambda: tvm.mobilenet_v3_small(num_classes=10),
    "shufflenet_v2_x0_5": lambda: tvm.shufflenet_v2_x0_5(num_classes=10),
    # Without stochastic depth, which exports as random draws the importer
    # does not take.
    "efficientnet_b0": lambda: tvm.efficientnet_b0(num_classes=10, stochastic_depth_prob=0.0),
    "regnet_y_400mf": lambda: tvm.regnet_y_400mf(num_classes=10),
    "convnext_tiny": lambda: tvm.convnext_tiny(num_classes=10, stochastic_depth_prob=0.0),
}
VIDEO = {
    "r3d_18": lambda: tvm.video.r3d_18(num_classes=10),
    "mc3_18": lambda: tvm.video.mc3_18(num_classes=10),
    "r2plus1d_18": lambda: tvm.video.r2plus1d_18(num_classes=10),
}
BATCH, SHAPE, THREADS = 16, (3, 32, 32), 2


def batch_shape(name):
    """The batch and one example's shape: a clip of 4 frames for the video models."""
    return (4, (3, 4, 32, 32)) if name in VIDEO else (BATCH, SHAPE)


def make(name):
    return (MODELS | VIDEO)[name]()


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def export(name, path):
    if os.path.exists(path):
        return
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    m = make(name).train()
    batch, shape = batch_shape(name)
    torch.onnx.export(m, (torch.randn((batch,) + shape),), path, dynamo=False, opset_version=17,
                      training=torch.onnx.TrainingMode.PRESERVE, input_names=["input0"],
                      output_names=["output0"], dynamic_axes={"input0": {0: "batch"}, "output0": {0: "batch"}})


def torch_step(name, compiled):
    """One Adam train step of `name` in PyTorch: eager, or with the model
    and the optimizer step under torch.compile (compiled on first use)."""
    torch.manual_seed(0)
    m = make(name).train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    batch, shape = batch_shape(name)
    x, y = torch.randn((batch,) + shape, generator=g), torch.randint(0, 10, (batch,), generator=g)
    model = torch.compile(m) if compiled else m
    update = torch.compile(opt.step) if compiled else opt.step

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        update()

    return step


def torch_step_ms(step):
    times = []
    for _ in range(13):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times[3:])


def aicf_step_ms(aicf, name, path, out, conv):
    cmd = [aicf, "bench", path, "--batch", str(batch_shape(name)[0]), "--optimizer", "adam", "--steps", "10",
           "--threads", str(THREADS), "--conv", conv, "--out", out]
    run = subprocess.run(cmd, capture_output=True, text=True)
    found = re.search(r"median ([0-9.]+) ms", run.stdout + run.stderr)
    if run.returncode != 0 or not found:
        sys.exit(f"{' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")
    return float(found.group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--direct", action="store_true", help="also time --conv direct")
    p.add_argument("--compile", action="store_true", help="also time PyTorch under torch.compile")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--out", default="target/onnx-vision")
    p.add_argument("--aicf", default="target/release/aicf")
    a = p.parse_args()
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS and n not in VIDEO]
    if unknown:
        sys.exit(f"unknown models {unknown}; known: {', '.join(MODELS | VIDEO)}")
    if not os.access(a.aicf, os.X_OK):
        sys.exit(f"{a.aicf} is not built: cargo build --release -p aicf-tools")
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(THREADS)
    convs = ["gemm", "direct"] if a.direct else ["gemm"]
    torches = ["torch", "compile"] if a.compile else ["torch"]
    systems = torches + convs
    times = {(n, s): [] for n in names for s in systems}
    for n in names:
        export(n, os.path.join(a.out, f"{n}.onnx"))
    steps = {(n, t): torch_step(n, t == "compile") for n in names for t in torches}
    for (n, t), step in steps.items():
        if t == "compile":
            started = time.perf_counter()
            step()
            print(f"torch.compile: {n} compiled and stepped once in {time.perf_counter() - started:.0f} s", flush=True)
    for r in range(a.rounds):
        for n in names:
            for t in torches:
                times[(n, t)].append(torch_step_ms(steps[(n, t)]))
            for c in convs:
                times[(n, c)].append(
                    aicf_step_ms(a.aicf, n, os.path.join(a.out, f"{n}.onnx"), os.path.join(a.out, "bench"), c))
            row = ", ".join(f"{s} {times[(n, s)][-1]:.1f}" for s in systems)
            print(f"round {r + 1}: {n}: {row} ms", flush=True)
    print(f"\n{cpu_name()}, {os.cpu_count()} cores, {THREADS} threads; torch {torch.__version__}; "
          f"batch {BATCH} at {'x'.join(map(str, SHAPE))} (video: 4 clips at 3x4x32x32), Adam; "
          f"median ms per train step over {a.rounds} rounds\n")
    head = "| model | PyTorch eager |" + (" torch.compile |" if a.compile else "") + " AICF |"
    head += (" AICF --conv direct |" if a.direct else "") + " AICF / PyTorch |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for n in names:
        med = {s: statistics.median(times[(n, s)]) for s in systems}
        compiled = f" {med['compile']:.1f} |" if a.compile else ""
        direct = f" {med['direct']:.1f} |" if a.direct else ""
        best = min(med[t] for t in torches)
        print(f"| {n} | {med['torch']:.1f} |{compiled} {med['gemm']:.1f} |{direct} {med['gemm'] / best:.2f}x |")


if __name__ == "__main__":
    main()
