"""Writes dynamo exports at opset 23, where PyTorch's exporter writes a
Llama-style block's RMS norm, rotary embedding and attention as the ops of
their own that opset 23 added (RMSNormalization, RotaryEmbedding,
Attention) rather than their decompositions, and their references:

- test/onnx/llama23.onnx: RMS norms, rotary position embeddings
  (`torch.onnx.ops.rotary_embedding`, written out for PyTorch's
  gradient) and causal grouped-query attention
  (`F.scaled_dot_product_attention(.., is_causal=True, enable_gqa=True)`:
  4 query heads over 2 key/value heads).
- test/onnx/masked23.onnx: attention under masks: a boolean one computed
  from the input (padding keys dropped, with the causal triangle) and a
  constant float one (ALiBi-like slopes), at a given scale.
- test/onnx/decoder23.onnx: a fresh `nn.TransformerDecoderLayer`, whose
  self- and cross-attention in_proj biases (zeros) the exporter merges
  into one initializer, read by a Split its optimizer wrote without a
  record of the module it is in.
- test/onnx/encoder23.onnx: a fresh 2-layer `nn.TransformerEncoder`, whose
  layers' equal weights the exporter merges, each also folded into its
  transpose (a `val_<n>` the MatMuls read as `[in, out]`).
- test/onnx/shared23.onnx, tied23.onnx: one Linear applied twice, and two
  Linears tied to one weight (`b.weight = a.weight`), each read as the
  exporter's one transposed fold (`val_<n>`) by two MatMuls.
- test/onnx/mha23.onnx: `nn.MultiheadAttention(kdim=8, vdim=8)`, whose
  separate q, k and v projection weights the exporter folds transposed.
- test/onnx/groupnorm23.onnx: a CNN with `nn.GroupNorm`, which PyTorch
  writes as GroupNormalization from opset 21 (at 18, as an
  InstanceNormalization and the affine Mul and Add).
- test/onnx/gemma23.onnx: Gemma's norm, `rms_norm(x) * (1 + weight)`,
  whose `1 + weight` the exporter's optimizer folds into an initializer
  (`add`): it trains in the weight's place, a fold the import names.

Each reference holds the input, labels, onnxruntime's output, PyTorch's
loss, and every parameter after one SGD step (lr 0.1) of the
cross-entropy in PyTorch. The norms' weights are drawn (a fresh model's
are all ones, which the exporter merges into one initializer).

    python tools/onnx/export_opset23.py test/onnx
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from export_dynamo import write

B, S, D, H, KV = 4, 6, 16, 4, 2
HD = D // H


def rotary(x, cos, sin, pos):
    """RoPE over the halves of each head: the ONNX op when exporting (it
    has no gradient in PyTorch), the same rotation written out when
    training."""
    if torch.onnx.is_in_onnx_export():
        return torch.onnx.ops.rotary_embedding(x, cos, sin, pos)
    c, s = cos[pos][:, None], sin[pos][:, None]  # B x 1 x S x HD/2
    x1, x2 = x.chunk(2, -1)
    return torch.cat([c * x1 - s * x2, s * x1 + c * x2], -1)


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, D)
        self.norm1 = nn.RMSNorm(D, eps=1e-6)
        self.q = nn.Linear(D, H * HD, bias=False)
        self.kv = nn.Linear(D, 2 * KV * HD, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.norm2 = nn.RMSNorm(D)
        self.head = nn.Linear(D, 5)
        for n in (self.norm1, self.norm2):
            nn.init.uniform_(n.weight, 0.5, 1.5)
        angles = torch.arange(S)[:, None] * (10000.0 ** (-torch.arange(0, HD, 2) / HD))[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):  # x: B x S x 8
        h = self.inp(x)
        a = self.norm1(h)
        q = self.q(a).view(B, S, H, HD).transpose(1, 2)
        k, v = self.kv(a).view(B, S, 2, KV, HD).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        pos = torch.arange(S).expand(B, S)
        q, k = rotary(q, self.cos, self.sin, pos), rotary(k, self.cos, self.sin, pos)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        h = h + self.o(y.transpose(1, 2).reshape(B, S, D))
        return self.head(self.norm2(h)[:, -1])


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, D)
        self.qkv = nn.Linear(D, 3 * D)
        self.head = nn.Linear(D, 5)
        slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])[:, None, None]
        distance = (torch.arange(S)[None, :] - torch.arange(S)[:, None]).float()
        self.register_buffer("alibi", slopes * distance, persistent=False)

    def forward(self, x):  # x: B x S x 8
        h = self.inp(x)
        q, k, v = self.qkv(h).view(B, S, 3, H, HD).permute(2, 0, 3, 1, 4)
        # Keys whose first feature is below -0.5 are padding; the first
        # key never is, so no query row is left without a key.
        keep = (x[:, :, 0] > -0.5) | (torch.arange(S) == 0)
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        mask = causal & keep[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
        y = y + F.scaled_dot_product_attention(q, k, v, attn_mask=self.alibi)
        return self.head(y.transpose(1, 2).reshape(B, S, D).mean(1))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, D)
        self.mem = nn.Linear(8, D)
        self.dec = nn.TransformerDecoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, 5)

    def forward(self, x):  # x: B x S x 8
        causal = nn.Transformer.generate_square_subsequent_mask(S)
        y = self.dec(self.inp(x), self.mem(x.flip(1)), tgt_mask=causal, tgt_is_causal=True)
        return self.head(y.mean(1))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, D)
        layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(D, 5)

    def forward(self, x):  # x: B x S x 8
        return self.head(self.enc(self.inp(x)).mean(1))


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.head = nn.Linear(8, 5)

    def forward(self, x):  # x: B x S x 8
        return self.head(torch.relu(self.lin(torch.relu(self.lin(x)))).mean(1))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8, bias=False)
        self.b = nn.Linear(8, 8, bias=False)
        self.b.weight = self.a.weight
        self.head = nn.Linear(8, 5)

    def forward(self, x):  # x: B x S x 8
        return self.head(torch.relu(self.b(torch.relu(self.a(x)))).mean(1))


class Mha(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, D)
        self.mha = nn.MultiheadAttention(D, 2, kdim=8, vdim=8, bias=False, batch_first=True)
        self.head = nn.Linear(D, 5)

    def forward(self, x):  # x: B x S x 8
        y, _ = self.mha(self.inp(x), x, x, need_weights=False)
        return self.head(y.mean(1))


class GroupNormCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 8, 3)
        self.norm = nn.GroupNorm(4, 8)
        nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        nn.init.uniform_(self.norm.bias, -0.5, 0.5)
        self.head = nn.Linear(8, 5)

    def forward(self, x):  # x: B x S x 8, read as 2 channels of 6 x 4
        h = torch.relu(self.norm(self.conv(x.reshape(B, 2, S, 4))))
        return self.head(h.mean((2, 3)))


class Gemma(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, D)
        self.norm = nn.Parameter(torch.zeros(D).uniform_(-0.5, 0.5))
        self.head = nn.Linear(D, 5)

    def forward(self, x):  # x: B x S x 8
        h = F.rms_norm(self.inp(x), (D,), eps=1e-6) * (1.0 + self.norm)
        return self.head(h.mean(1))


def main():
    out = sys.argv[1]
    g = torch.Generator().manual_seed(1)
    for name, model in [("llama23", Llama), ("masked23", Masked), ("decoder23", Decoder), ("encoder23", Encoder),
                        ("gemma23", Gemma), ("shared23", Shared), ("tied23", Tied),
                        ("mha23", Mha), ("groupnorm23", GroupNormCnn)]:
        torch.manual_seed(0)
        x = torch.randn(B, S, 8, generator=g)
        labels = torch.randint(0, 5, (B,), generator=g)
        write(model(), x, labels, name, 23, out)


if __name__ == "__main__":
    main()
