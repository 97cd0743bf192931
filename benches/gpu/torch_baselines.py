"""PyTorch baselines of the GPU bundle's benchmarks, same workloads, fp32:
MLP 784-512-512-10 batch 256 SGD train step (eager and
torch.compile(mode="reduce-overhead")), a 4096^3 GEMM (f32 with TF32 off,
as AICF's by default; f32 with TF32 allowed; and bf16), the elementwise chain x*y + x over 4096x4096, a
device-to-device copy, and causal attention over 8x8 heads of 1024x64; and
the train steps of `aicf train`'s example models with Adam (the digits MLP
64-128-10 and CNN at batch 32, the char LM of examples/char_lm at batch 16),
eager and captured in one CUDA graph. One JSON line per measurement."""
import json, time
import torch
import torch.nn as nn

dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def timed(fn, steps, warm=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / steps


def emit(**kw):
    kw["device"] = torch.cuda.get_device_name()
    print(json.dumps(kw), flush=True)


def mlp784_step():
    """A fresh MLP 784-512-512-10 with SGD and one batch of 256: its step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(256, 784, device=dev)
    y = torch.randint(0, 10, (256,), device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def mlp784():
    step = mlp784_step()
    emit(bench="torch_mlp784_sgd", mode="eager", ms=round(timed(step, 500), 4))
    compiled = torch.compile(step, mode="reduce-overhead")
    emit(bench="torch_mlp784_sgd", mode="reduce-overhead", ms=round(timed(compiled, 500, warm=30), 4))


def mlp784_graph():
    """The whole eager step captured by hand in one CUDA graph and replayed
    (a fresh model, before any torch.compile): PyTorch's kernels with no
    launch overhead, the floor of both modes."""
    step = mlp784_step()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    emit(bench="torch_mlp784_sgd", mode="cuda-graph", ms=round(timed(graph.replay, 500), 4))


def adam_step(model, loss_fn, *batch, capturable=False):
    """One Adam step of `model` on a fixed batch (`capturable`: so a CUDA
    graph can replay it)."""
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, capturable=capturable)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model, *batch)
        loss.backward()
        opt.step()
        return loss

    return step


def graphed(step):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


class Block(nn.Module):
    """A pre-norm transformer block as examples/char_lm's (causal
    attention, GELU MLP of 4x, dropout)."""

    def __init__(self, d, heads, p):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads, self.drop = heads, nn.Dropout(p)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        split = lambda y: y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(split(self.q(h)), split(self.k(h)), split(self.v(h)),
                                                             is_causal=True)
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.proj(torch.nn.functional.gelu(self.fc(self.ln2(x)))))


class CharLM(nn.Module):
    def __init__(self, vocab=65, context=64, d=64, heads=4, layers=2, p=0.1):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.Sequential(*(Block(d, heads, p) for _ in range(layers)))
        self.ln, self.head, self.drop = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False), nn.Dropout(p)

    def forward(self, idx):
        x = self.drop(self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device)))
        return self.head(self.ln(self.blocks(x)))


def example_models():
    """aicf train's example models, one Adam step each (run_* in gpu_bench)."""
    torch.manual_seed(0)
    ce = nn.CrossEntropyLoss()
    mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
    cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(128, 10)).to(dev)
    lm = CharLM().to(dev)
    labels = torch.randint(0, 10, (32,), device=dev)
    tokens = torch.randint(0, 65, (16, 64), device=dev)
    cases = [
        ("digits_mlp", mlp, lambda m, x, y: ce(m(x), y), (torch.rand(32, 64, device=dev), labels), 1000),
        ("digits_cnn", cnn, lambda m, x, y: ce(m(x), y), (torch.rand(32, 1, 8, 8, device=dev), labels), 500),
        ("char_lm", lm, lambda m, x, y: ce(m(x).view(-1, 65), y.view(-1)), (tokens, tokens), 200),
    ]
    for name, model, loss, batch, steps in cases:
        eager = adam_step(model, loss, *batch)
        emit(bench=f"torch_{name}_adam", mode="eager", ms=round(timed(eager, steps), 4))
        replay = graphed(adam_step(model, loss, *batch, capturable=True))
        emit(bench=f"torch_{name}_adam", mode="cuda-graph", ms=round(timed(replay, steps), 4))


def gemm():
    n = 4096
    for dtype, name in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        ms = timed(lambda: torch.matmul(a, b), 20, warm=5)
        emit(bench=f"torch_matmul4096_{name}", ms=round(ms, 4), tflop_per_s=round(2 * n**3 / ms / 1e9, 2))
        if dtype == torch.float32:
            # f32 on the tensor cores in TF32 (allow_tf32), then off again
            torch.backends.cuda.matmul.allow_tf32 = True
            ms = timed(lambda: torch.matmul(a, b), 20, warm=5)
            torch.backends.cuda.matmul.allow_tf32 = False
            emit(bench="torch_matmul4096_tf32", ms=round(ms, 4), tflop_per_s=round(2 * n**3 / ms / 1e9, 2))


def elementwise():
    n = 4096 * 4096
    x = torch.randn(n, device=dev)
    y = torch.randn(n, device=dev)
    out = torch.empty_like(x)
    ms = timed(lambda: torch.addcmul(x, x, y, out=out), 200)
    emit(bench="torch_elementwise", ms=round(ms, 4), gb_per_s=round(3 * 4 * n / ms / 1e6, 1))
    ms = timed(lambda: out.copy_(x), 200)
    emit(bench="torch_copy", ms=round(ms, 4), gb_per_s=round(2 * 4 * n / ms / 1e6, 1))


def attention():
    # fp32, causal, 8 x 8 heads of 1024 x 64: AICF's bench/attention
    q, k, v = (torch.randn(8, 8, 1024, 64, device=dev) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ms = timed(lambda: sdpa(q, k, v, is_causal=True), 20, warm=5)
    flops = 2 * 64 * 1024 * 1024 * 64
    emit(bench="torch_attention_f32_causal", ms=round(ms, 4), tflop_per_s=round(flops / ms / 1e9, 2))
    # bf16, causal, GPT-2 small's 8 x 12 heads of 1024 x 64 (flash)
    q, k, v = (torch.randn(8, 12, 1024, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
    ms = timed(lambda: sdpa(q, k, v, is_causal=True), 50, warm=5)
    flops = 2 * 96 * 1024 * 1024 * 64
    emit(bench="torch_attention_bf16_causal", ms=round(ms, 4), tflop_per_s=round(flops / ms / 1e9, 2))
    # forward and backward of sum(attention * g): AICF's attention_bf16_train
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    g = torch.randn_like(q)

    def train():
        (sdpa(q, k, v, is_causal=True) * g).sum().backward()

    ms = timed(train, 20, warm=5)
    emit(bench="torch_attention_bf16_causal_train", ms=round(ms, 4), tflop_per_s=round(3.5 * flops / ms / 1e9, 2))


if __name__ == "__main__":
    # One failing baseline (a PyTorch version's limits) leaves the others.
    for bench in [mlp784_graph, mlp784, example_models, gemm, elementwise, attention]:
        try:
            bench()
        except Exception as e:  # noqa: BLE001
            emit(bench=f"torch_{bench.__name__}", skipped=f"{type(e).__name__}: {e}".splitlines()[0])
