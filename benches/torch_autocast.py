#!/usr/bin/env python3
"""PyTorch CPU mixed-precision baselines for `PRECISION=bf16 benches/compare`:
the workloads of ../shared/bench/common_spec.txt (MLP 784-512-512-10 batch 256
SGD, the transformer block d 256 batch 8 seq 128 Adam) trained under
`torch.autocast("cpu", dtype=torch.bfloat16)` (parameters, gradients and the
optimizer stay f32, as AICF's `--precision bf16`), eager and torch.compile.
Same models, inputs and timing as ../shared/bench/bench_torch.py (median of
3 x N steps after a warm-up), in the calling process's thread setting.

    python torch_autocast.py --threads 2 [--modes eager,compile] [--quick]

Prints one JSON line per workload and mode.
"""
import json
import statistics
import sys
import time


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    threads = int(arg("--threads", "2"))
    modes = arg("--modes", "eager,compile").split(",")
    quick = "--quick" in sys.argv
    torch.set_num_threads(threads)

    def mlp(dims):
        layers = []
        for i in range(len(dims) - 1):
            layers.append(nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    class Block(nn.Module):
        def __init__(s, D=256, H=4, Fh=1024, V=256, T=128):
            super().__init__()
            s.D, s.H = D, H
            s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            s.qkv, s.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
            s.fc1, s.fc2, s.head = nn.Linear(D, Fh), nn.Linear(Fh, D), nn.Linear(D, V)
            s.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

        def forward(s, x):
            B, T, D = x.shape
            H = s.H
            q, k, v = s.qkv(s.ln1(x)).split(D, dim=-1)
            q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (D // H) ** 0.5)
            att = att.masked_fill(~s.mask[:T, :T], float("-inf"))
            a = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
            x = x + s.o(a)
            x = x + s.fc2(F.gelu(s.fc1(s.ln2(x)), approximate="tanh"))
            return s.head(x)

    def bench(name, make, x, y, opt_name, warm, steps):
        for mode in modes:
            torch.manual_seed(0)
            model = make()
            opt = (torch.optim.SGD(model.parameters(), lr=0.1) if opt_name == "sgd"
                   else torch.optim.Adam(model.parameters(), lr=1e-3))

            def step(x, y):
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = model(x)
                    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
                loss.backward()
                opt.step()
                return loss

            fn = step
            if mode == "compile":
                torch._dynamo.reset()
                fn = torch.compile(step)
            try:
                for _ in range(warm):
                    fn(x, y)
                times = []
                for _ in range(1 if quick else 3):
                    for _ in range(steps):
                        t = time.perf_counter()
                        fn(x, y)
                        times.append(time.perf_counter() - t)
                print(json.dumps(dict(system="torch", workload=name, mode=f"{mode} autocast-bf16", threads=threads,
                                      torch=torch.__version__, ms_median=round(statistics.median(times) * 1e3, 4),
                                      final_loss=float(fn(x, y)))), flush=True)
            except Exception as e:  # a mode that fails is reported, not fatal
                print(json.dumps(dict(system="torch", workload=name, mode=f"{mode} autocast-bf16", threads=threads,
                                      error=repr(e)[:500])), flush=True)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 784, generator=g)
    y = torch.randint(0, 10, (256,), generator=g)
    bench("mlp784_b256_train_sgd", lambda: mlp([784, 512, 512, 10]), x, y, "sgd", 20, 50 if quick else 200)
    xt = torch.randn(8, 128, 256, generator=g)
    yt = torch.randint(0, 256, (8, 128), generator=g)
    bench("transformer_train_adam", lambda: Block(), xt, yt, "adam", 5, 20 if quick else 60)


if __name__ == "__main__":
    main()
