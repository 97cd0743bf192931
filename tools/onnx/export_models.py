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
      grad64.<param>      the same gradient computed in float64 (stored
                          as f32): the exact gradient to f32 precision.
                          PyTorch's own f32 gradients of MobileNetV2's
                          early layers are up to 3e-2 (of a parameter's
                          largest) from it; the tests compare against
                          grad64 where a fixture has it.

    python tools/onnx/export_models.py OUT_DIR [NAME ...]
    python tools/onnx/export_models.py --reference64 OUT_DIR [NAME ...]

`--reference64` adds grad64 to fixtures already in OUT_DIR without
exporting again (the model is rebuilt from its seeds; its f32 loss must
be the fixture's to the bit).

It needs torch, onnx, onnxruntime and safetensors (make onnx-fixtures
makes a venv with them); the committed fixtures let `make test` run
without any of them.
"""
import copy
import math
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.numpy import load_file, save_file


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


class PaddedCnn(nn.Module):
    """The padding layers: reflection, zeros on two sides only, a constant
    (F.pad), replication, and crops (negative pads); and a flip."""

    def __init__(self):
        super().__init__()
        self.reflect = nn.ReflectionPad2d(1)
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.zeros = nn.ZeroPad2d((0, 1, 0, 1))
        self.replicate = nn.ReplicationPad2d(2)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=2)
        self.head = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        x = F.relu(self.conv1(self.reflect(x)))  # 8 x 8
        x = F.pad(self.zeros(x), (1, 1, 1, 1), value=0.25)  # 11 x 11
        x = F.pad(self.replicate(x), (-1, 0, 0, -1))  # 15 x 15 cropped to 14 x 14
        # A flip exports as a Slice with step -1 of a computed tensor.
        x = x + 0.5 * torch.flip(x, [3])
        return self.head(F.relu(self.conv2(x)).flatten(1))


class ResizedCnn(nn.Module):
    """Interpolations the whole-factor path does not take: bilinear with
    align_corners=True, bicubic, nearest to a fractional size, and a
    downsampling bilinear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(12, 4, 3, stride=2, padding=1)
        self.head = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))  # 8 x 8
        a = F.interpolate(x, size=(11, 11), mode="bilinear", align_corners=True)
        b = F.interpolate(x, size=(11, 11), mode="bicubic", align_corners=False)
        c = F.interpolate(x, size=(11, 11), mode="nearest")
        x = self.conv2(torch.cat([a, b, c], 1))  # 6 x 6
        x = F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False, recompute_scale_factor=False)
        x = F.interpolate(x, size=(6, 6), mode="bilinear", align_corners=True)
        return self.head(F.relu(x).flatten(1))


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


class SmallResNet18(nn.Module):
    """torchvision's ResNet-18 (its BasicBlock, 2-2-2-2 stages, the same
    stem, strides and downsampling) at 1/8 of its widths. `digits=True`
    takes 1 x 8 x 8 images through a 3 x 3 stem without the max-pool (the
    CIFAR variant's stem)."""

    def __init__(self, width=8, classes=10, digits=False):
        super().__init__()
        from torchvision.models.resnet import BasicBlock

        if digits:
            self.conv1 = nn.Conv2d(1, width, 3, 1, 1, bias=False)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        layers, inplanes = [], width
        for i, planes in enumerate([width, 2 * width, 4 * width, 8 * width]):
            stride = 1 if i == 0 else 2
            down = None
            if stride != 1 or inplanes != planes:
                down = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
            layers.append(nn.Sequential(BasicBlock(inplanes, planes, stride, down), BasicBlock(planes, planes)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class HfGpt2(nn.Module):
    """Hugging Face transformers' GPT2LMHeadModel from a tiny config (2
    layers, width 32, 4 heads, context 16, vocabulary 65; no dropout):
    `Conv1D` layers (flattened rows, weights stored [in, out]), `gelu_new`
    written out, a fused c_attn, `lm_head` tied to `wte`, the attention
    mask transformers 5 builds (an all-ones `attention_mask` is given: the
    TorchScript export of the default fails on `aten::diff`)."""

    def __init__(self):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=65, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
        self.m = GPT2LMHeadModel(config)

    def forward(self, idx):
        return self.m(input_ids=idx, attention_mask=torch.ones_like(idx), use_cache=False).logits


class PooledCnn(nn.Module):
    """Pooling and transposed convolutions past the plain cases: a grouped
    ConvTranspose2d with output_padding, a dilated MaxPool2d, an AvgPool2d
    with ceil_mode and its padding not counted; then along a line, Conv1d,
    MaxPool1d with ceil_mode, AvgPool1d without its padding counted and
    ConvTranspose1d."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.pool = nn.MaxPool2d(2, stride=2, dilation=2, padding=1)
        self.avg = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        self.line = nn.Conv1d(4, 4, 3, padding=1)
        self.line_pool = nn.MaxPool1d(2, stride=2, ceil_mode=True)
        self.line_avg = nn.AvgPool1d(2, stride=2, padding=1, count_include_pad=False)
        self.line_up = nn.ConvTranspose1d(4, 2, 3, stride=2)
        self.head = nn.Linear(2 * 15, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))  # 8 x 8
        x = F.relu(self.up(x))  # 16 x 16
        x = self.avg(self.pool(x))  # 8 x 8, then 5 x 5 (the last window past the input)
        x = F.relu(self.line(x.flatten(2)))  # 25
        x = self.line_avg(self.line_pool(x))  # 13 (the last window past the input), then 7
        return self.head(self.line_up(x).flatten(1))  # 15


class Video3d(nn.Module):
    """A small 3-D CNN (a clip of 4 frames): Conv3d with BatchNorm3d,
    MaxPool3d with ceil_mode, a grouped strided Conv3d, ConvTranspose3d,
    AvgPool3d without its padding counted, AdaptiveAvgPool3d(1)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv3d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm3d(4)
        self.pool = nn.MaxPool3d((2, 3, 3), stride=2, ceil_mode=True)
        self.conv2 = nn.Conv3d(4, 8, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), groups=2)
        self.up = nn.ConvTranspose3d(8, 4, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), output_padding=(0, 1, 1))
        self.avg = nn.AvgPool3d((2, 3, 3), stride=(1, 2, 2), padding=1, count_include_pad=False)
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))  # 4 x 8 x 8 -> 2 x 4 x 4 (ceil: 2 x 4 x 4)
        x = F.relu(self.conv2(x))  # 1 x 2 x 2
        x = F.relu(self.up(x))  # 2 x 4 x 4
        x = self.avg(x)  # 3 x 2 x 2
        return self.head(F.adaptive_avg_pool3d(x, 1).flatten(1))


class PreluCumsum(nn.Module):
    """PReLU with a learned slope per channel and one shared, and running
    sums (cumsum) along the last axis and along the channels."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.act1 = nn.PReLU(4)
        self.line = nn.Linear(8, 8)
        self.act2 = nn.PReLU(init=0.1)
        self.head = nn.Linear(4 * 8, 10)

    def forward(self, x):
        x = self.act1(self.conv1(x)).mean(2)  # 4 x 8
        x = self.act2(self.line(x))
        x = torch.cumsum(x, dim=2) * 0.25 + torch.cumsum(x, dim=1) * 0.5
        return self.head(x.flatten(1))


class EinsumTile(nn.Module):
    """Attention written with torch.einsum (the exporter keeps Einsum
    nodes), a learned token tiled over the batch (Tensor.repeat: Tile),
    and a head as an einsum of the weight."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)
        self.token = nn.Parameter(torch.randn(1, 1, 16) * 0.5)
        self.head = nn.Parameter(torch.randn(10, 16) * 0.25)

    def forward(self, x):  # x: B x 1 x 8 x 8, read as 8 rows of 8
        x = self.embed(x.flatten(1, 2))  # B x 8 x 16
        x = torch.cat([self.token.repeat(x.shape[0], 1, 1), x], 1)  # B x 9 x 16
        q, k, v = self.q(x), self.k(x), self.v(x)
        a = torch.einsum("btd,bsd->bts", q, k).mul(0.25).softmax(-1)
        o = torch.einsum("bts,bsd->btd", a, v)
        pooled = torch.einsum("btd->bd", o) / 9.0
        return torch.einsum("bd,cd->bc", pooled, self.head)


class SinCosRound(nn.Module):
    """Sine and cosine of activations (a periodic feature map), a
    sinusoidal position table computed in forward (Sin/Cos of a Range), and
    a rounding beside a path that carries the gradient."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.head = nn.Linear(8 * 16, 10)

    def forward(self, x):  # x: B x 1 x 8 x 8, 8 rows of 8
        h = self.inp(x.flatten(1, 2))  # B x 8 x 16
        h = torch.sin(h) + torch.cos(0.5 * h)
        pos = torch.arange(8, dtype=torch.float32).unsqueeze(1) * torch.arange(1, 17, dtype=torch.float32) * 0.1
        h = h + torch.sin(pos) * 0.5 + torch.cos(pos) * 0.25
        h = h + torch.round(h * 4.0) * 0.05 + torch.floor(h) * 0.01 - torch.ceil(h) * 0.01
        return self.head(h.flatten(1))


class SteFmod(nn.Module):
    """Quantization-aware training's straight-through estimators (`q +
    (q.round() - q).detach()`, and a floor's), which the export records
    without their `detach`, and torch.fmod / torch.remainder of
    activations."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 16)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.inp(x.flatten(1)) * 4.0
        q = h + (torch.round(h) - h).detach()
        f = h + (torch.floor(h) - h).detach()
        h = (q + f) * 0.125
        return self.head(torch.cat([torch.fmod(h, 0.7), torch.remainder(h, 0.7)], 1))


class PeInForward(nn.Module):
    """The classic sinusoidal position table written slice by slice in
    forward (`pe[:, 0::2] = sin(..)`: ScatterND into zeros of the input's
    shape, its places and values computed from Range, Exp and Reciprocal
    of constants, which the importer folds)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.head = nn.Linear(64, 10)

    def forward(self, x):  # B x 1 x 8 x 8: 8 positions of 8 features
        h = x.flatten(1, 2)
        t, d = h.shape[1], h.shape[2]
        pe = torch.zeros(t, d)
        pos = torch.arange(0, t, dtype=torch.float).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        return self.head(torch.relu(self.inp(h + pe)).flatten(1))


class GatherPool(nn.Module):
    """torch.gather of activations at indices the model computes (each
    example's strongest position, an ArgMax) and at a constant permutation
    (GatherElements), and advanced indexing `h[arange(B), idx]` (the
    dynamo exporter's GatherND; TorchScript's Gather of a flattened view):
    the gradient reaches only the gathered elements. A learned vector
    added after the head's biased Linear (a logit adjustment: the GEMM's
    epilogue once replaced the bias with it)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.head = nn.Linear(32, 10)
        self.shift = nn.Parameter(torch.zeros(10))

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(2)  # B x 8 x 64
        b = h.shape[0]
        idx = h.mean(1).argmax(-1)  # B
        top = torch.gather(h, 2, idx[:, None, None].expand(b, 8, 1)).squeeze(2)
        sel = h.transpose(1, 2)[torch.arange(b), idx]
        shuffled = torch.gather(top * sel, 1, torch.tensor([3, 1, 0, 2, 7, 5, 4, 6]).expand(b, 8))
        return self.head(torch.cat([top, sel, shuffled, h.amax(2)], 1)) + self.shift


class MoeGnn(nn.Module):
    """A graph network's message passing (`scatter_add` of messages along
    constant edges: ScatterElements; `index_add`: the dynamo exporter's
    ScatterND) and a mixture of experts' top-2 gate (`topk`, a softmax of
    the two, `zeros.scatter(1, idx, w)`: TopK and ScatterElements of
    computed places and values), trained end to end."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.msg = nn.Linear(8, 8)
        self.gate = nn.Linear(64, 4)
        self.experts = nn.ModuleList(nn.Linear(64, 10) for _ in range(4))
        # A ring of 8 nodes and a few chords: messages src -> dst.
        self.register_buffer("src", torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 5]))
        self.register_buffer("dst", torch.tensor([1, 2, 3, 4, 5, 6, 7, 0, 4, 6, 1]))

    def forward(self, x):  # B x 1 x 8 x 8: 8 nodes of 8 features
        h = torch.relu(self.inp(x.flatten(1, 2)))  # B x 8 x 8
        m = self.msg(h[:, self.src])  # B x E x 8
        index = self.dst[None, :, None].expand(h.shape[0], -1, 8)
        agg = torch.zeros_like(h).scatter_add(1, index, m)
        # (Of distinct places: TorchScript's export of an index_add that
        # names a place twice keeps one of the two, unlike PyTorch.)
        agg = agg.index_add(1, self.dst[:8], m[:, :8] * 0.5)
        z = (h + agg).flatten(1)  # B x 64
        logits = self.gate(z)
        top, idx = logits.topk(2, dim=1)
        gates = torch.zeros_like(logits).scatter(1, idx, top.softmax(1))
        outs = torch.stack([e(z) for e in self.experts], 1)  # B x 4 x 10
        return (gates.unsqueeze(2) * outs).sum(1)


class CosineHead(nn.Module):
    """A cosine classifier (`F.normalize` of the features and of the class
    weights, scaled) with weight norm's `g * v / |v|` before it and a
    scale parametrized by its log (`exp`): parameters a layer reads only
    through a computation from them (they imported as constants)."""

    def __init__(self):
        super().__init__()
        self.v = nn.Parameter(torch.randn(16, 64) * 0.1)
        self.g = nn.Parameter(torch.ones(16, 1))
        self.log_scale = nn.Parameter(torch.full((1, 10), 2.0))
        self.W = nn.Parameter(torch.randn(10, 16))

    def forward(self, x):
        w = self.g * self.v / self.v.norm(dim=1, keepdim=True)
        f = F.normalize(torch.relu(x.flatten(1) @ w.t()), dim=-1)
        return self.log_scale.exp() * (f @ F.normalize(self.W, dim=-1).t())


class AnglesShuffle(nn.Module):
    """Angles of feature pairs (`torch.atan2`: Atan of a quotient, its
    quadrant by Where), a sub-pixel upsampling (`PixelShuffle`:
    DepthToSpace in CRD mode) and a standard deviation over channels
    (TorchScript's `std` counts its elements with a ReduceProd of the
    shape)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.pair = nn.Linear(64, 32)
        self.head = nn.Linear(2 * 256 + 16, 10)

    def forward(self, x):
        h = self.shuffle(torch.relu(self.conv(x)))  # B x 2 x 16 x 16
        p = self.pair(x.flatten(1))
        angle = torch.atan2(p[:, :16], p[:, 16:] - 0.1)
        return self.head(torch.cat([h.flatten(1), angle], 1) * 1.0 + 0.0) + h.std(dim=(2, 3)).sum(1, keepdim=True)


class GroupNorms(nn.Module):
    """Two GroupNorms of one width, exported fresh by the dynamo exporter:
    it reshapes each weight and bias to [C, 1, 1] and folds them, and its
    optimizer keeps one initializer of equal values, so the two layers
    read one weight (and one bias), which trained tied."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.gn1 = nn.GroupNorm(2, 8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.gn2 = nn.GroupNorm(4, 8)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        h = torch.relu(self.gn1(self.c1(x)))
        h = torch.relu(self.gn2(self.c2(h)))
        return self.head(h.mean((2, 3)))


class GroupNormsTied(GroupNorms):
    """GroupNorms whose weight the model ties itself (`gn2.weight =
    gn1.weight`): one parameter both layers read, which the import keeps
    one (the exporter's merge of the equal biases comes apart)."""

    def __init__(self):
        super().__init__()
        self.gn2.weight = self.gn1.weight


class CapitalNormBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(16, 16)
        # Hugging Face's attribute name: the export's metadata spells it
        # `layernorm`, lower case, which read as no parameter of the module.
        self.LayerNorm = nn.LayerNorm(16)

    def forward(self, x):
        return self.LayerNorm(x + F.gelu(self.dense(x)))


class CapitalLayerNorms(nn.Module):
    """Two fresh LayerNorms named as Hugging Face's (`LayerNorm`, capital
    letters), exported by the dynamo exporter, which merges their equal
    ones and zeros: each comes apart again (they trained tied, as the
    capitals were not matched to the metadata's lower-case names)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 16)
        self.blocks = nn.ModuleList([CapitalNormBlock(), CapitalNormBlock()])
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h = self.proj(x.flatten(1))
        for b in self.blocks:
            h = b(h)
        return self.head(h)


class NormsNoAffine(nn.Module):
    """Normalizations without learnable weights (`GroupNorm(affine=False)`,
    `LayerNorm(elementwise_affine=False)`): the dynamo exporter writes
    their scales and biases as constant ones and zeros it names
    `val_<n>`, which imported as parameters and trained (off PyTorch's
    run from the second step)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8, affine=False)
        self.ln = nn.LayerNorm(16, elementwise_affine=False)
        self.l = nn.Linear(8 * 8 * 8, 16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h = torch.relu(self.gn(self.c(x)))
        return self.head(torch.relu(self.ln(self.l(h.flatten(1)))))


class RnnAttention(nn.Module):
    """An LSTM, a bidirectional GRU and PyTorch's MultiheadAttention over a
    sequence (batch first in, sequence first inside): the importer's
    unrolled steps and the exporter's attention reshapes hold the batch in
    an axis other than the first, which fixed the model's batch (a smaller
    last batch could not run)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.gru = nn.GRU(16, 8, batch_first=True, bidirectional=True)
        self.attn = nn.MultiheadAttention(16, 4)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h, _ = self.lstm(x)
        h, _ = self.gru(h)
        s = h.transpose(0, 1)
        a, _ = self.attn(s, s, s, need_weights=False)
        return self.head(a.mean(0))


class GroupNormSingle(nn.Module):
    """One fresh affine GroupNorm from the dynamo exporter: its weight and
    bias, reshaped to [C, 1, 1] and folded, are `val_<n>` initializers of
    ones and zeros read once; they are the module's and train (taken for
    the exporter's constants of a GroupNorm without weights, they did
    not)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(torch.relu(self.gn(self.c(x))).mean((2, 3)))


def mobilenet():
    import torchvision

    return torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10, dropout=0.0)


MODELS = {
    # name: (module, example input, labels shape and classes)
    "mlp": (Mlp, lambda g: torch.randn(8, 64, generator=g), ((8,), 10)),
    # nn.Sequential: its parameters are named `0.weight`, `2.weight`.
    "sequential": (lambda: nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10)),
                   lambda g: torch.randn(8, 64, generator=g), ((8,), 10)),
    "cnn": (SmallCnn, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "gpt": (Gpt, lambda g: torch.randint(0, 65, (4, 16), generator=g), ((4, 16), 65)),
    "resnet18": (SmallResNet18, lambda g: torch.randn(4, 3, 32, 32, generator=g), ((4,), 10)),
    # 64 x 64 and 8 images: at 32 x 32 and 4 the last batch norms normalise
    # over 4 values, and even PyTorch's f32 gradients are 2e-3 (median)
    # from its f64 ones; here 1e-5.
    "mobilenetv2": (mobilenet, lambda g: torch.randn(8, 3, 64, 64, generator=g), ((8,), 10)),
    "resnet_digits": (lambda: SmallResNet18(width=8, digits=True), lambda g: torch.randn(8, 1, 8, 8, generator=g),
                      ((8,), 10)),
    "pads": (PaddedCnn, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "resize": (ResizedCnn, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "pools": (PooledCnn, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "video3d": (Video3d, lambda g: torch.randn(4, 1, 4, 8, 8, generator=g), ((4,), 10)),
    "prelu_cumsum": (PreluCumsum, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "einsum_tile": (EinsumTile, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "sin_cos_round": (SinCosRound, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "ste_fmod": (SteFmod, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "pe_in_forward": (PeInForward, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "gather_pool": (GatherPool, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "gather_pool_dynamo": (GatherPool, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "moe_gnn": (MoeGnn, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "moe_gnn_dynamo": (MoeGnn, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "angles_shuffle": (AnglesShuffle, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "groupnorms_dynamo": (GroupNorms, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "groupnorms_tied_dynamo": (GroupNormsTied, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "norms_noaffine_dynamo": (NormsNoAffine, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "groupnorm_single_dynamo": (GroupNormSingle, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "layernorms_capital_dynamo": (CapitalLayerNorms, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "rnn_attention": (RnnAttention, lambda g: torch.randn(8, 6, 8, generator=g), ((8,), 10)),
    "cosine_head": (CosineHead, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    "cosine_head_dynamo_noopt": (CosineHead, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    # (Optimized: its normalized weights folded, for the importer's note.)
    "cosine_head_dynamo": (CosineHead, lambda g: torch.randn(4, 1, 8, 8, generator=g), ((4,), 10)),
    # Needs transformers (not in requirements.txt's pins for the others).
    "hf_gpt2": (HfGpt2, lambda g: torch.randint(0, 65, (4, 16), generator=g), ((4, 16), 65)),
}


# Fixtures exported as initialized, their equal parameters equal.
FRESH = {"groupnorms_dynamo", "groupnorms_tied_dynamo", "groupnorm_single_dynamo", "layernorms_capital_dynamo"}

# Fixtures whose layers read weights computed from parameters.
COMPUTED_WEIGHTS = {"cosine_head"}


def build(name):
    """The model (evaluation mode), its batch and labels, from the seeds."""
    make, example, (label_shape, classes) = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    # Perturb every parameter: the exporter merges initializers with equal
    # values (fresh LayerNorms are all ones), which would share them.
    with torch.no_grad():
        for p in model.parameters():
            # (A fresh model's equal parameters stay equal where the
            # fixture is about them.)
            if name not in FRESH:
                p.add_(0.05 * torch.randn(p.shape))
        # Running statistics as a trained model has them.
        for bname, b in model.named_buffers():
            if bname.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape))
            elif bname.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape))
    g = torch.Generator().manual_seed(1)
    x = example(g)
    labels = torch.randint(0, classes, label_shape, generator=g)
    return model, x, labels


def train_grads(model, x, labels, dtype):
    """The training-mode loss and every parameter's gradient, computed in
    `dtype` on a copy (the model is left as it is)."""
    m = copy.deepcopy(model).to(dtype).train()
    m.zero_grad()
    xx = x.to(dtype) if x.is_floating_point() else x
    y = m(xx)
    loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), labels.reshape(-1))
    loss.backward()
    return loss.item(), {n: p.grad for n, p in m.named_parameters()}


def by_initializer(path, params, grads, prefix):
    """Gradients by initializer: a parameter under its own name, or one the
    exporter stored transposed under a name of its own (a MatMul's
    right-hand side, `onnx::MatMul_N`), found by its values."""
    arrays = {}
    initializers = onnx.load(path).graph.initializer
    for t in initializers:
        value = onnx.numpy_helper.to_array(t)
        if t.name in params:
            arrays[f"{prefix}.{t.name}"] = grads[t.name].double().numpy().astype(np.float32)
            # The equal parameters of its shape the exporter merged into it
            # (a fresh model's LayerNorms): each one's gradient under its
            # own name, which the importer gives its copy.
            for pname, p in params.items():
                if (pname != t.name and tuple(p.shape) == value.shape
                        and not any(other.name == pname for other in initializers)
                        and np.array_equal(p.detach().numpy(), value)):
                    arrays[f"{prefix}.{pname}"] = grads[pname].double().numpy().astype(np.float32)
            continue
        # One initializer the exporter kept for several equal parameters it
        # had reshaped (a fresh model's GroupNorm weights): each parameter's
        # gradient under its own name, which the importer gives its copy.
        equal = [pname for pname, p in params.items()
                 if p.numel() == value.size and tuple(p.shape) != value.shape
                 and not any(other.name == pname for other in initializers)
                 and np.array_equal(p.detach().numpy().reshape(value.shape), value)]
        if len(equal) > 1:
            for pname in equal:
                arrays[f"{prefix}.{pname}"] = grads[pname].double().numpy().reshape(value.shape).astype(np.float32)
            continue
        for pname, p in params.items():
            if p.dim() == 2 and tuple(p.shape[::-1]) == value.shape and np.array_equal(p.detach().numpy().T, value):
                # A tied output layer's copy of a weight the graph also
                # holds under its own name: one parameter, one gradient
                # (the importer reads the copy as that weight).
                if any(other.name == pname for other in initializers):
                    break
                arrays[f"{prefix}.{t.name}"] = np.ascontiguousarray(grads[pname].double().numpy().T).astype(np.float32)
                break
            # A parameter stored reshaped under a name of its own (PReLU's
            # slope [C] as `onnx::PRelu_N` [C, 1, 1]), found by its values.
            if (p.numel() == value.size and tuple(p.shape) != value.shape
                    and not any(other.name == pname for other in initializers)
                    and np.array_equal(p.detach().numpy().reshape(value.shape), value)):
                arrays[f"{prefix}.{t.name}"] = grads[pname].double().numpy().reshape(value.shape).astype(np.float32)
                break
    return arrays


def reference64(name, out):
    """Adds grad64 to fixture `name` in `out`."""
    model, x, labels = build(name)
    io_path = os.path.join(out, f"{name}.io.safetensors")
    arrays = dict(load_file(io_path))
    loss32, _ = train_grads(model, x, labels, torch.float32)
    if np.float32(loss32) != arrays["torch.loss"]:
        sys.exit(f"{name}: the rebuilt model's loss {loss32} is not the fixture's {arrays['torch.loss']}")
    _, grads = train_grads(model, x, labels, torch.float64)
    arrays.update(by_initializer(os.path.join(out, f"{name}.onnx"), dict(model.named_parameters()), grads, "grad64"))
    save_file(arrays, io_path)
    print(f"{io_path}: {sum(k.startswith('grad64.') for k in arrays)} float64 gradients")


def export(name, out):
    model, x, labels = build(name)
    path = os.path.join(out, f"{name}.onnx")
    if name.endswith(("_dynamo", "_dynamo_noopt")):
        # The dynamo exporter (opset 18, static shapes, weights inline;
        # `_noopt`: without its optimizer, which folds what it computes
        # from parameters).
        torch.onnx.export(model, (x,), path, input_names=["input0"], output_names=["output0"], opset_version=18,
                          dynamo=True, external_data=False, optimize=not name.endswith("_noopt"))
    else:
        torch.onnx.export(
            model, (x,), path, input_names=["input0"], output_names=["output0"],
            dynamic_axes={"input0": {0: "batch"}, "output0": {0: "batch"}}, opset_version=17, dynamo=False,
            # Keep BatchNormalization nodes (evaluation mode would fold them
            # into the convolutions).
            training=torch.onnx.TrainingMode.PRESERVE,
            # A model that computes weights from its parameters keeps that
            # computation (folded, it would train as a tensor of its own).
            do_constant_folding=name not in COMPUTED_WEIGHTS,
        )
    onnx.checker.check_model(onnx.load(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = x.numpy() if x.dtype != torch.int64 else x.numpy()
    ort_out = sess.run(None, {"input0": feed})[0]
    with torch.no_grad():
        y_eval = model(x)
    # The training step's reference: batch statistics in train mode (which
    # also moves the running statistics, kept below).
    model.train()
    model.zero_grad()
    y = model(x)
    loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), labels.reshape(-1))
    loss.backward()
    arrays = {
        "input0": x.numpy().astype(np.int32 if x.dtype == torch.int64 else np.float32),
        "labels": labels.numpy().astype(np.int32),
        "ort.output0": ort_out.astype(np.float32),
        "torch.output0": y_eval.numpy().astype(np.float32),
        "torch.loss": np.array(loss.item(), dtype=np.float32),
    }
    params = dict(model.named_parameters())
    arrays.update(by_initializer(path, params, {n: p.grad for n, p in params.items()}, "grad"))
    arrays.update(by_initializer(path, params, train_grads(model, x, labels, torch.float64)[1], "grad64"))
    for bname, b in model.named_buffers():
        if bname.endswith(("running_mean", "running_var")):
            arrays[f"running.{bname}"] = b.detach().numpy().astype(np.float32)
    save_file(arrays, os.path.join(out, f"{name}.io.safetensors"))
    print(f"{path}: {os.path.getsize(path)} bytes, {sum(k.startswith('grad.') for k in arrays)} gradients, "
          f"max |torch - ort| {np.abs(arrays['torch.output0'] - ort_out).max():.2e}")


def main():
    args = sys.argv[1:]
    if args and args[0] == "--reference64":
        out = args[1]
        for name in args[2:] or MODELS:
            reference64(name, out)
        return
    out = args[0]
    os.makedirs(out, exist_ok=True)
    for name in args[1:] or MODELS:
        export(name, out)


if __name__ == "__main__":
    main()
