"""Exports the ONNX fixtures of AICF's importer tests from PyTorch, with
random weights (seeded), and what the tests compare against:

  <name>.onnx             the model (batch dimension symbolic)
  <name>.inputs.npz ...   written as <name>.io.safetensors:
      input0 ...          a batch of inputs
      labels              integer labels for the cross-entropy step
      ort.output0         onnxruntime's forward output on that batch
      torch.output0       PyTorch's forward output
      torch.loss          the mean cross-entropy
      grad.<param>        PyTorch autograd's gradient of the loss with
                          respect to every parameter, by its ONNX
                          initializer name

    python tools/onnx/export_models.py OUT_DIR [NAME ...]

It needs torch, onnx, onnxruntime and safetensors (make onnx-fixtures
makes a venv with them); the committed fixtures let `make test` run
without any of them.
"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.numpy import save_file


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SmallCnn(nn.Module):
    """conv + GELU + max-pool + strided conv + ReLU + global average pool + linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.gelu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // h) ** 0.5)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    """A 2-layer GPT-style character model (nanoGPT's structure, small)."""

    def __init__(self, vocab=65, d=32, heads=4, layers=2, context=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.context = context

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


MODELS = {
    # name: (module, example input, labels shape and classes)
    "mlp": (Mlp, lambda g: torch.randn(8, 64, generator=g), ((8,), 10)),
    "cnn": (SmallCnn, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "gpt": (Gpt, lambda g: torch.randint(0, 65, (4, 16), generator=g), ((4, 16), 65)),
}


def export(name, out):
    make, example, (label_shape, classes) = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    # Perturb every parameter: the exporter merges initializers with equal
    # values (fresh LayerNorms are all ones), which would share them.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape))
    g = torch.Generator().manual_seed(1)
    x = example(g)
    labels = torch.randint(0, classes, label_shape, generator=g)
    path = os.path.join(out, f"{name}.onnx")
    torch.onnx.export(
        model, (x,), path, input_names=["input0"], output_names=["output0"],
        dynamic_axes={"input0": {0: "batch"}, "output0": {0: "batch"}}, opset_version=17, dynamo=False,
    )
    onnx.checker.check_model(onnx.load(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = x.numpy() if x.dtype != torch.int64 else x.numpy()
    ort_out = sess.run(None, {"input0": feed})[0]
    model.zero_grad()
    y = model(x)
    loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), labels.reshape(-1))
    loss.backward()
    arrays = {
        "input0": x.numpy().astype(np.int32 if x.dtype == torch.int64 else np.float32),
        "labels": labels.numpy().astype(np.int32),
        "ort.output0": ort_out.astype(np.float32),
        "torch.output0": y.detach().numpy().astype(np.float32),
        "torch.loss": np.array(loss.item(), dtype=np.float32),
    }
    # Gradients by initializer: a parameter under its own name, or one the
    # exporter stored transposed under a name of its own (a MatMul's
    # right-hand side, `onnx::MatMul_N`), found by its values.
    params = dict(model.named_parameters())
    for t in onnx.load(path).graph.initializer:
        value = onnx.numpy_helper.to_array(t)
        if t.name in params:
            arrays[f"grad.{t.name}"] = params[t.name].grad.numpy().astype(np.float32)
            continue
        for p in params.values():
            if p.dim() == 2 and tuple(p.shape[::-1]) == value.shape and np.array_equal(p.detach().numpy().T, value):
                arrays[f"grad.{t.name}"] = np.ascontiguousarray(p.grad.numpy().T).astype(np.float32)
                break
    save_file(arrays, os.path.join(out, f"{name}.io.safetensors"))
    print(f"{path}: {os.path.getsize(path)} bytes, {sum(k.startswith('grad.') for k in arrays)} gradients, "
          f"max |torch - ort| {np.abs(arrays['torch.output0'] - ort_out).max():.2e}")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        export(name, out)


if __name__ == "__main__":
    main()
