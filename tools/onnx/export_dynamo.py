"""Writes test/onnx/dynamo_folded.onnx and its reference: a model exported
by PyTorch's dynamo exporter at a static batch, whose folder leaves what
the importer must read from the exporter's records, not from names: RoPE
tables computed in forward and folded to initializers named by their last
op (`unsqueeze_1`: constants), a class token folded into its copies over
the batch (`repeat`: one parameter, broadcast), a buffer with an upper-case
name (`Proj`: a constant), a scalar parameter (a temperature: trained).
The reference holds the input, labels, onnxruntime's output, and every
parameter after one SGD step (lr 0.1) of the cross-entropy in PyTorch.

    python tools/onnx/export_dynamo.py test/onnx
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.numpy import save_file


class Folded(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.cls = nn.Parameter(torch.randn(1, 1, 16) * 0.5)
        self.qk = nn.Linear(16, 32, bias=False)
        self.register_buffer("Proj", torch.randn(16, 16) * 0.25)
        self.t = nn.Parameter(torch.tensor(1.5))
        self.head = nn.Linear(16, 5)

    def forward(self, x):  # x: B x 6 x 8
        h = self.inp(x)
        h = torch.cat([self.cls.repeat(h.shape[0], 1, 1), h], 1)  # B x 7 x 16
        pos = torch.arange(7, dtype=torch.float32)
        inv = 1.0 / (100.0 ** (torch.arange(0, 16, 2, dtype=torch.float32) / 16))
        ang = torch.cat([pos[:, None] * inv[None], pos[:, None] * inv[None]], -1)  # 7 x 16
        cos, sin = ang.cos()[None], ang.sin()[None]
        q, k = self.qk(h).chunk(2, -1)
        rot = lambda v: torch.cat([-v[..., 8:], v[..., :8]], -1)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        a = torch.einsum("btd,bsd->bts", q, k).mul(0.25).softmax(-1)
        o = torch.einsum("bts,bsd->btd", a, h) @ self.Proj
        return self.head(o[:, 0]) * self.t


def write(model, x, labels, name, opset, out, output_after=False):
    """Exports `model` at a static batch (`x`) with the dynamo exporter to
    `<out>/<name>.onnx`, and its reference `<name>.io.safetensors`; with
    `output_after`, its output after the SGD step too (`torch.output_after`:
    for parameters the export holds in another layout, an RNN's gates)."""
    path = os.path.join(out, f"{name}.onnx")
    torch.onnx.export(model, (x,), path, input_names=["input0"], output_names=["output0"], opset_version=opset,
                      dynamo=True)
    # One file: the weights inside (the exporter may write them beside it).
    m = onnx.load(path)
    onnx.save(m, path, save_as_external_data=False)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    ort_out = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input0": x.numpy()})[0]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    opt.step()
    arrays = {
        "input0": x.numpy(),
        "labels": labels.numpy().astype(np.int32),
        "ort.output0": ort_out.astype(np.float32),
        "torch.loss": np.array(loss.item(), dtype=np.float32),
    }
    arrays.update({f"after.{n}": p.detach().numpy().astype(np.float32) for n, p in model.named_parameters()})
    if output_after:
        with torch.no_grad():
            arrays["torch.output_after"] = model(x).numpy().astype(np.float32)
    save_file(arrays, os.path.join(out, f"{name}.io.safetensors"))
    print(f"{path}: {os.path.getsize(path)} bytes; initializers {[t.name for t in m.graph.initializer]}")


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = Folded()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 6, 8, generator=g)
    labels = torch.randint(0, 5, (4,), generator=g)
    write(model, x, labels, "dynamo_folded", 18, out)


if __name__ == "__main__":
    main()
