"""Writes two dynamo exports whose parameters the importer once trained
unlike PyTorch, and their references:

- test/onnx/dynamo_opset17.onnx: a small attention classifier exported with
  `dynamo=True, opset_version=17`. The exporter builds at opset 18 and
  converts down, which drops its records of which values are parameters
  (the nodes' FX and module metadata, the inputs' kinds): the attention's
  constant scale (a one-value `val_<n>`) trained as a learned scale, and
  the learned position table, folded with its `arange`, stayed constant.
- test/onnx/tied_dynamo.onnx: a layer that reads a weight transposed,
  `F.linear(z, enc.weight.t())` (a tied autoencoder's decoder), which the
  exporter folds into an initializer of its own (`t`): it trained apart
  from `enc.weight`.
- test/onnx/lstm_dynamo17.onnx: a bidirectional LSTM classifier exported at
  opset 17: its weights, reordered into ONNX's gates, are `val_<n>` folded
  from `weight_ih_l0` and the others, which once stayed constant (only the
  head trained). Its reference holds the output after the step too.

Each reference holds the input, labels, onnxruntime's output, PyTorch's
loss, and every parameter after one SGD step (lr 0.1) of the
cross-entropy in PyTorch.

    python tools/onnx/export_dynamo_lost.py test/onnx
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from export_dynamo import write


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Linear(8, 16)
        self.pos = nn.Embedding(6, 16)
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, x):  # x: B x 6 x 8
        h = self.tok(x) + self.pos(torch.arange(6))
        q, k, v = self.q(h), self.k(h), self.v(h)
        a = (q @ k.transpose(1, 2) / 4.0).softmax(-1)
        return self.head((a @ v)[:, 0])


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(12, 8)
        self.dec_bias = nn.Parameter(torch.zeros(12))
        self.head = nn.Linear(12, 5)

    def forward(self, x):  # x: B x 12
        z = torch.tanh(self.enc(x))
        return self.head(F.linear(z, self.enc.weight.t(), self.dec_bias))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, batch_first=True, bidirectional=True)
        self.head = nn.Linear(12, 5)

    def forward(self, x):  # x: B x 6 x 8
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 6, 8, generator=g)
    labels = torch.randint(0, 5, (4,), generator=g)
    write(Attention(), x, labels, "dynamo_opset17", 17, out)
    torch.manual_seed(0)
    x = torch.randn(4, 12, generator=g)
    labels = torch.randint(0, 5, (4,), generator=g)
    write(Tied(), x, labels, "tied_dynamo", 18, out)
    torch.manual_seed(0)
    x = torch.randn(4, 6, 8, generator=g)
    labels = torch.randint(0, 5, (4,), generator=g)
    write(Recurrent(), x, labels, "lstm_dynamo17", 17, out, output_after=True)


if __name__ == "__main__":
    main()
