"""Exports the ONNX fixtures of models that compute their own loss (a
module's `forward(x, targets)` returning `(prediction, loss)`, as nanoGPT's
`GPT.forward(idx, targets)` does), with what the tests compare against:

  <name>.onnx              the model; its inputs x, then the targets
  <name>.io.safetensors:
      input0               a batch of inputs
      target0, target1 ... the targets, in the model's argument order (as
                           AICF's @loss takes them: a Hugging Face causal
                           model's labels as the next tokens)
      ort.output0          onnxruntime's first output (the prediction;
                           of a model that draws noise, a sample)
      torch.mean_output0   of a model that draws noise (NOISY), PyTorch's
                           prediction with the noise at its mean (zero),
                           as AICF's @forward computes it
      ort.loss             onnxruntime's loss output
      torch.loss           PyTorch's loss (training mode; of a model that
                           draws noise, with AICF's numbers for it: the
                           normals of hl.random_like under NOISE_SEED and
                           NOISE_OFFSET from stream NOISE_STREAM on)
      torch.parameters     how many distinct parameters the model has
      grad64.<param>       PyTorch's gradient of that loss computed in
                           float64 (stored as f32), by initializer name
                           (a weight TorchScript stored transposed under
                           a name of its own: its gradient transposed)

    python tools/onnx/export_loss_models.py OUT_DIR [NAME ...]

Names ending `_dynamo` use the dynamo exporter (opset 18; `_dynamo_noopt`
without its optimizer), the others TorchScript's (opset 17). It needs torch, onnx, onnxruntime and
safetensors (make onnx-fixtures makes a venv with them); the committed
fixtures let `make test` run without any of them.
"""
import contextlib
import copy
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_models import by_initializer  # noqa: E402


class CharLm(nn.Module):
    """A character model whose forward takes the targets and returns the
    logits and nanoGPT's loss: the cross-entropy of the flattened logits,
    positions labelled -1 ignored (SoftmaxCrossEntropyLoss with
    ignore_index, of logits reshaped to [B*T, V])."""

    def __init__(self, vocab=65, d=16, context=6):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        x = x + torch.tanh(self.fc(self.ln(x)))
        logits = self.head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


class WeightedSmoothed(nn.Module):
    """A classifier trained on a loss of several terms: a class-weighted,
    label-smoothed cross-entropy (the dynamo exporter drops the smoothing
    from SoftmaxCrossEntropyLoss; its metadata keeps it), an auxiliary
    head's negative log-likelihood (NegativeLogLikelihoodLoss) at half
    weight, and an activation penalty."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 24)
        self.head = nn.Linear(24, 5)
        self.aux = nn.Linear(24, 5)
        self.register_buffer("class_weight", torch.tensor([1.0, 2.0, 0.5, 1.0, 1.5]))

    def forward(self, x, y):
        h = torch.relu(self.fc1(x))
        logits = self.head(h)
        loss = F.cross_entropy(logits, y, weight=self.class_weight, label_smoothing=0.1)
        loss = loss + 0.5 * F.nll_loss(F.log_softmax(self.aux(h), -1), y)
        return logits, loss + 0.01 * h.pow(2).mean()


class SegmentRegress(nn.Module):
    """Two targets: a per-position classification of a sequence (logits
    [N, C, L], the class axis second as ONNX's loss ops take it) and a
    regression of one value per example (`mse_loss`, which TorchScript
    exports expanded to the broadcast shape of prediction and target)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 3, padding=1)
        self.cls = nn.Conv1d(8, 4, 1)
        self.reg = nn.Linear(8, 1)

    def forward(self, x, labels, value):
        h = torch.relu(self.conv(x))
        seg = self.cls(h)
        pred = self.reg(h.mean(2)).squeeze(-1)
        return seg, F.cross_entropy(seg, labels) + F.mse_loss(pred, value)


class Penalized(nn.Module):
    """A loss with a weight penalty (`1e-2 * fc.weight.pow(2).sum()`), which
    the dynamo exporter's optimizer computes from the parameter and folds
    into a constant: `_noopt` exports keep the computation."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, x, y):
        logits = self.head(torch.tanh(self.fc(x)))
        return logits, F.cross_entropy(logits, y) + 1e-2 * self.fc.weight.pow(2).sum()


class HfGpt2Labels(nn.Module):
    """Hugging Face's GPT2LMHeadModel called with `labels` (tiny config, as
    export_models.py's `HfGpt2`; exported with transformers 4.57): its loss shifts the labels itself (pads
    them with -100 and scores position t's logits against labels[t + 1]),
    so its labels are the input ids. AICF's @loss takes the next tokens, as
    its other language models do (the fixture's target0), and hands the
    model the ids: PyTorch's reference loss is `model(ids, labels=ids)`."""

    def __init__(self):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=65, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
        self.m = GPT2LMHeadModel(config)

    def forward(self, idx, labels):
        # (No attention_mask: transformers 4.57 builds the causal one with
        # vmap, which the TorchScript export of an all-ones mask fails on.)
        out = self.m(input_ids=idx, labels=labels)
        return out.logits, out.loss


class HfGpt2Mask(HfGpt2Labels):
    """HfGpt2Labels called as a tokenizer's output is passed:
    `model(input_ids, attention_mask=attention_mask, labels=labels)`, the
    graph's inputs named so. A text's windows are whole: AICF fills the
    attention mask with ones (`hl.fill`). Dynamo only (see HfGpt2Labels)."""

    INPUT_NAMES = ["input_ids", "attention_mask", "labels"]

    def forward(self, idx, mask, labels):
        out = self.m(input_ids=idx, attention_mask=mask, labels=labels)
        return out.logits, out.loss


def hf_mask_data(g):
    idx = torch.randint(0, 65, (4, 16), generator=g)
    return idx, (torch.ones(4, 16, dtype=torch.int64), idx.clone())


def mask_next_tokens(x, targets):
    """The mask as given, then the next tokens of `x`."""
    return (targets[0], *next_tokens(x, targets[1:]))


def hf_data(g):
    idx = torch.randint(0, 65, (4, 16), generator=g)
    return idx, (idx.clone(),)


def next_tokens(x, targets):
    """The next tokens of `x` (the last position: any token; the model's
    shift never reads it)."""
    return (torch.cat([x[:, 1:], x[:, :1]], 1),)


class Denoise(nn.Module):
    """The target first: `forward(clean, noisy)` predicts the clean signal
    from the noisy one. @forward takes `noisy` alone, @loss `noisy` and then
    `clean`; `aicf train --data clean.npy --data noisy.npy` (the graph's
    order) feeds each its own file (test/Tools/aicf/onnx.mlir, with the
    batch in test/Tools/aicf/inputs/denoise-*.npy; its io file is not
    used)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, clean, noisy):
        pred = self.fc2(torch.tanh(self.fc1(noisy)))
        return pred, F.mse_loss(pred, clean)


def denoise_data(g):
    clean = torch.randn(8, 10, generator=g)
    return clean, (clean + 0.3 * torch.randn(8, 10, generator=g),)


class WithAccuracy(nn.Module):
    """A figure of the batch beside the loss: `(logits, loss, accuracy)`,
    the accuracy an ArgMax (int64) compared with the labels. Two scalar
    outputs: `--loss graph:loss` names the loss; @forward returns the
    logits alone (the accuracy reads the labels)."""

    OUTPUTS = ["logits", "loss", "accuracy"]

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 5)

    def forward(self, x, y):
        logits = self.fc(x)
        return logits, F.cross_entropy(logits, y), (logits.argmax(-1) == y).float().mean()


class TaggerSkipFirst(nn.Module):
    """A tagger that scores every position but the first (a [CLS]
    token's): `logits[:, 1:]` against `labels[:, 1:]`. Its labels are
    sliced from 1 as Hugging Face's shifted ones are, but the logits are
    too: nothing is shifted, and the labels stay as given."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 5)

    def forward(self, ids, labels):
        logits = self.head(torch.tanh(self.emb(ids)))
        return logits, F.cross_entropy(logits[:, 1:].reshape(-1, 5), labels[:, 1:].reshape(-1))


def tagger_data(g):
    return torch.randint(0, 20, (4, 6), generator=g), (torch.randint(0, 5, (4, 6), generator=g),)


class PaddedIds(nn.Module):
    """Ids padded with -1, masked out by `ids != -1` (a comparison of the
    data with -1, no label to ignore), classified with class weights (a
    composed loss whose labels are compared with -100)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 3)
        self.register_buffer("w", torch.tensor([1.0, 2.0, 0.5]))

    def forward(self, ids, y):
        m = (ids != -1).float().unsqueeze(-1)
        h = (self.emb(ids.clamp(min=0)) * m).sum(1) / m.sum(1)
        logits = self.head(h)
        return logits, F.cross_entropy(logits, y, weight=self.w)


def padded_data(g):
    ids = torch.randint(0, 20, (4, 6), generator=g)
    ids[0, 4:] = -1
    y = torch.randint(0, 3, (4,), generator=g)
    y[1] = -100
    return ids, (y,)


class TableOut(nn.Module):
    """An output that reads no input (a learned table, returned beside the
    loss): @forward takes the first input, which it does not read (the
    import indexed an empty input list). Exported without the dynamo
    optimizer: it, and TorchScript's constant folding, fold the table's
    computations into constants."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 5)
        self.table = nn.Parameter(torch.randn(3, 4))

    def forward(self, x, y):
        return self.table * 2, F.cross_entropy(self.fc(x), y) + self.table.pow(2).mean()


class SplitShift(nn.Module):
    """A causal LM whose loss shifts its labels as Hugging Face's OPT does
    (cast, padded with -100, sliced from 1), with the attention's q, k, v
    split from one projection (`torch.split`: the unoptimized dynamo
    export's SplitToSequence and SequenceAt; TorchScript's Cast before the
    Pad)."""

    def __init__(self, vocab=65, d=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, labels):
        x = self.tok(idx)
        q, k, v = self.qkv(x).split(x.shape[-1], dim=2)
        t = idx.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        a = (q @ k.transpose(1, 2) / 4.0).masked_fill(~mask, float("-inf")).softmax(-1)
        logits = self.head(x + a @ v)
        shifted = F.pad(labels.to(logits.device).long(), (0, 1), value=-100)[:, 1:]
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), shifted.reshape(-1))


class PaddingIdx(nn.Module):
    """`nn.Embedding(.., padding_idx=0)` over ids that hold 0: PyTorch
    never updates row 0 (its gradient is zero). ONNX's Gather has no
    padding index; the dynamo exporter's metadata records it."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8, padding_idx=0)
        self.head = nn.Linear(8, 3)

    def forward(self, ids, y):
        logits = self.head(torch.tanh(self.emb(ids)).mean(1))
        return logits, F.cross_entropy(logits, y)


def padding_data(g):
    ids = torch.randint(0, 20, (4, 6), generator=g)
    ids[:, 4:] = 0
    return ids, (torch.randint(0, 3, (4,), generator=g),)


class MaskedLm(nn.Module):
    """A character model that takes an attention mask beside its ids, as
    Hugging Face's do (`forward(ids, mask, targets)`): a text cannot feed
    it, and the refusal says what to do (test/Tools/aicf/onnx.mlir; its io
    file is not used)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(65, 8)
        self.head = nn.Linear(8, 65)

    def forward(self, idx, mask, targets):
        logits = self.head(self.emb(idx) * mask.unsqueeze(-1).float())
        return logits, F.cross_entropy(logits.reshape(-1, 65), targets.reshape(-1))


class Vae(nn.Module):
    """A variational autoencoder: the encoder's mean and log-variance, a
    sample by the reparameterisation `mu + eps * exp(logvar / 2)` with
    `eps = torch.randn_like(std)` (RandomNormalLike), and the negative
    ELBO: the reconstruction's squared error summed per example plus the
    KL divergence from N(0, 1), averaged over the batch. No targets."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(12, 16)
        self.mu = nn.Linear(16, 4)
        self.logvar = nn.Linear(16, 4)
        self.dec1 = nn.Linear(4, 16)
        self.dec2 = nn.Linear(16, 12)

    def forward(self, x):
        h = torch.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        std = torch.exp(0.5 * logvar)
        z = mu + torch.randn_like(std) * std
        recon = self.dec2(torch.relu(self.dec1(z)))
        rec = (recon - x).pow(2).sum(1).mean()
        kl = (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)).mean()
        return recon, rec + kl


class BnFolded(nn.Module):
    """A convolution and a training-mode batch norm: the dynamo exporter's
    optimizer folds the norm into the convolution (FuseBatchNormIntoConv),
    which drops its normalization by the batch's statistics, so the file
    is not the model PyTorch trains (the import says so)."""

    EXPORT_TRAINING = True

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 3)

    def forward(self, x, y):
        h = torch.relu(self.bn(self.conv(x)))
        logits = self.head(h.mean((2, 3)))
        return logits, F.cross_entropy(logits, y)


def bn_data(g):
    return torch.randn(4, 2, 5, 5, generator=g), (torch.randint(0, 3, (4,), generator=g),)


class StraightThrough(nn.Module):
    """Two straight-through estimators, whose `detach` no export records:
    a hard one-hot of a softmax that passes the softmax's gradient
    (`y_hard - y_soft.detach() + y_soft`, Gumbel-softmax's hard form without
    the noise), and a hard threshold that passes the sigmoid's
    (`b + h - h.detach()`). As exported, each one's gradient cancelled to
    zero: the layers before them never trained."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(12, 6)
        self.gate = nn.Linear(12, 6)
        self.head = nn.Linear(12, 5)

    def forward(self, x, y):
        y_soft = torch.softmax(self.enc(x), -1)
        index = y_soft.argmax(-1, keepdim=True)
        y_hard = torch.zeros_like(y_soft).scatter_(-1, index, 1.0)
        onehot = y_hard - y_soft.detach() + y_soft
        h = torch.sigmoid(self.gate(x))
        b = (h > 0.5).float()
        gate = b + h - h.detach()
        logits = self.head(torch.cat([onehot, gate], -1))
        return logits, F.cross_entropy(logits, y)


class SizeDiv(nn.Module):
    """An autoencoder whose loss is summed and divided by the batch size
    read from its input (`((r - x) ** 2).sum() / x.size(0)`, the usual form
    of a VAE's): the export folds `x.size(0)` to the bound batch, and a
    smaller batch was divided by the full one (io: `torch.loss_rows2`,
    PyTorch's loss of the first two rows)."""

    DYNAMIC_BATCH = True

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(12, 4)
        self.dec = nn.Linear(4, 12)

    def forward(self, x):
        r = self.dec(torch.tanh(self.enc(x)))
        return r, ((r - x) ** 2).sum() / x.size(0)


class NotStraightThrough(nn.Module):
    """Shapes of a straight-through estimator that are none, which the
    import once read as one (and cut a gradient): an update's difference
    penalised (`z2 = z + f(z)`, `((z2 - z) ** 2).mean()`, the head reading
    `z2`), and a constant taken away and added back (`2 s - 1`, then `+ 1`:
    the dynamo exporter's one initializer for equal scalars)."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(12, 8)
        self.f = nn.Linear(8, 8)
        self.head = nn.Linear(16, 5)

    def forward(self, x, y):
        z = self.enc(x)
        z2 = z + torch.tanh(self.f(z))
        reg = ((z2 - z) ** 2).mean()
        t = 2 * torch.sigmoid(z) - 1.0
        u = t + 1.0
        logits = self.head(torch.cat([z2, u], -1))
        return logits, F.cross_entropy(logits, y) + 0.1 * reg


def vae_data(g):
    return torch.randn(8, 12, generator=g), ()


# The step's seed and offset the tests hand @loss for a model with noise,
# and the stream of its first draw: PyTorch's reference loss takes AICF's
# numbers (`hl.random_like`'s Philox4x32-10 normals), so that the two
# losses and gradients are comparable.
NOISE_SEED, NOISE_OFFSET, NOISE_STREAM = 1234, 0, 0


def philox_normals(n, seed, offset, stream):
    """`hl.random_like`'s standard normals: element i from Philox4x32-10
    under key seed, counter (offset + g mod 2^24, stream with g >> 24 xored
    into its high word), g = i / 4, by Box-Muller on the block's word pairs
    (cosine, sine)."""
    mask = 0xFFFFFFFF
    out = np.empty(((n + 3) // 4) * 4)
    for b in range((n + 3) // 4):
        block = offset + b % (1 << 24)
        c = [block & mask, block >> 32 & mask, stream & mask, (stream >> 32 ^ b >> 24) & mask]
        k = [seed & mask, seed >> 32 & mask]
        for r in range(10):
            if r:
                k = [(k[0] + 0x9E3779B9) & mask, (k[1] + 0xBB67AE85) & mask]
            p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
            c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & mask, (p0 >> 32) ^ c[3] ^ k[1], p0 & mask]
        for p in range(2):
            u1 = np.float32(((c[2 * p] >> 8) + 1) * (1.0 / 16777216.0))
            u2 = np.float32((c[2 * p + 1] >> 8) * (1.0 / 16777216.0))
            r = np.sqrt(-2.0 * np.log(np.float64(u1)))
            theta = 2.0 * np.pi * np.float64(u2)
            out[4 * b + 2 * p], out[4 * b + 2 * p + 1] = r * np.cos(theta), r * np.sin(theta)
    return out[:n]


class AicfNoise:
    """Within it, `torch.randn_like` returns AICF's normals (or zeros, the
    mean @forward takes): successive calls take successive streams."""

    def __init__(self, zeros=False):
        self.zeros, self.stream = zeros, NOISE_STREAM

    def __enter__(self):
        self.saved = torch.randn_like

        def randn_like(t, **kw):
            if self.zeros:
                return torch.zeros_like(t)
            v = philox_normals(t.numel(), NOISE_SEED, NOISE_OFFSET, self.stream)
            self.stream += 1
            return torch.tensor(v.astype(np.float32), dtype=torch.float32).reshape(t.shape).to(t.dtype)

        torch.randn_like = randn_like
        return self

    def __exit__(self, *exc):
        torch.randn_like = self.saved


def masked_lm_data(g):
    idx = torch.randint(0, 65, (4, 6), generator=g)
    return idx, (torch.ones(4, 6, dtype=torch.int64), torch.randint(0, 65, (4, 6), generator=g))


def char_lm_data(g):
    idx = torch.randint(0, 65, (4, 6), generator=g)
    targets = torch.randint(0, 65, (4, 6), generator=g)
    targets[0, :2] = -1
    targets[3, 5] = -1
    return idx, (targets,)


def weighted_data(g):
    return torch.randn(8, 12, generator=g), (torch.randint(0, 5, (8,), generator=g),)


def segment_data(g):
    return torch.randn(4, 3, 10, generator=g), (torch.randint(0, 4, (4, 10), generator=g), torch.randn(4, generator=g))


MODELS = {
    "lm_loss": (CharLm, char_lm_data),
    "lm_loss_dynamo": (CharLm, char_lm_data),
    "weighted_smoothed_dynamo": (WeightedSmoothed, weighted_data),
    "segment_regress": (SegmentRegress, segment_data),
    "penalty_dynamo": (Penalized, weighted_data),
    "penalty_dynamo_noopt": (Penalized, weighted_data),
    "denoise": (Denoise, denoise_data),
    "with_accuracy": (WithAccuracy, weighted_data),
    "tagger_skip_first": (TaggerSkipFirst, tagger_data),
    "table_out_dynamo_noopt": (TableOut, weighted_data),
    "split_shift": (SplitShift, hf_data, next_tokens),
    "padding_idx_dynamo": (PaddingIdx, padding_data),
    "masked_lm": (MaskedLm, masked_lm_data),
    "split_shift_dynamo_noopt": (SplitShift, hf_data, next_tokens),
    "padded_ids_dynamo": (PaddedIds, padded_data),
    "hf_gpt2_labels": (HfGpt2Labels, hf_data, next_tokens),
    "hf_gpt2_labels_dynamo": (HfGpt2Labels, hf_data, next_tokens),
    "bn_folded_dynamo": (BnFolded, bn_data),
    "hf_gpt2_mask_dynamo": (HfGpt2Mask, hf_mask_data, mask_next_tokens),
    "straight_through": (StraightThrough, weighted_data),
    "straight_through_dynamo": (StraightThrough, weighted_data),
    "size_div": (SizeDiv, vae_data),
    "size_div_dynamo": (SizeDiv, vae_data),
    "not_straight_through": (NotStraightThrough, weighted_data),
    "not_straight_through_dynamo": (NotStraightThrough, weighted_data),
    "vae": (Vae, vae_data),
    "vae_dynamo": (Vae, vae_data),
}

# Exports whose graph is not the model PyTorch trains (the dynamo
# optimizer folded a training-mode batch norm): no gradient for each
# parameter is looked for.
NOT_PYTORCHS = {"bn_folded_dynamo"}

# Models that draw noise: their reference losses take AICF's numbers, and
# their prediction (`torch.mean_output0`) the noise's mean.
NOISY = {"vae", "vae_dynamo"}


def export(name, out):
    make, data, *aicf_targets = MODELS[name]
    torch.manual_seed(0)
    model = make()
    # (Exported in evaluation mode unless the model asks for training's.)
    model.train(getattr(model, "EXPORT_TRAINING", False))
    with torch.no_grad():
        for p in model.parameters():
            # (Equal initializers would be merged by the exporter.)
            p.add_(0.05 * torch.randn(p.shape))
    x, targets = data(torch.Generator().manual_seed(1))
    path = os.path.join(out, f"{name}.onnx")
    names = getattr(model, "INPUT_NAMES", ["input0"] + [f"target{k}" for k in range(len(targets))])
    outputs = getattr(model, "OUTPUTS", None)
    if name.endswith(("_dynamo", "_dynamo_noopt")):
        # (A symbolic batch where the model asks: `x.size(0)` stays a Shape.)
        dynamic = {"dynamic_axes": {n: {0: "batch"} for n in names}} if getattr(model, "DYNAMIC_BATCH", False) else {}
        torch.onnx.export(model, (x, *targets), path, input_names=names, output_names=outputs, opset_version=18,
                          dynamo=True, external_data=False, optimize=not name.endswith("_noopt"), **dynamic)
    else:
        torch.onnx.export(model, (x, *targets), path, input_names=names, output_names=outputs, opset_version=17,
                          dynamo=False, dynamic_axes={n: {0: "batch"} for n in names})
    onnx.checker.check_model(onnx.load(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {n: v.numpy() for n, v in zip(names, (x, *targets))}
    ort_out, ort_loss = sess.run(None, feed)[:2]
    arrays = {
        "input0": x.numpy().astype(np.int32 if x.dtype == torch.int64 else np.float32),
        "ort.output0": ort_out.astype(np.float32),
        "ort.loss": np.asarray(ort_loss, dtype=np.float32),
    }
    # (The targets AICF's @loss takes, where they are not the model's own.)
    for k, t in enumerate(aicf_targets[0](x, targets) if aicf_targets else targets):
        arrays[f"target{k}"] = t.numpy().astype(np.int32 if t.dtype == torch.int64 else np.float32)
    noisy = name in NOISY
    if noisy:
        with torch.no_grad(), AicfNoise(zeros=True):
            arrays["torch.mean_output0"] = model(x, *targets)[0].numpy().astype(np.float32)
    model.train()
    with AicfNoise() if noisy else contextlib.nullcontext():
        loss = model(x, *targets)[1]
    arrays["torch.loss"] = np.array(loss.item(), dtype=np.float32)
    if name.startswith("size_div"):
        arrays["torch.loss_rows2"] = np.array(model(x[:2], *targets)[1].item(), dtype=np.float32)
    m64 = copy.deepcopy(model).double()
    as64 = lambda t: t.double() if t.is_floating_point() else t
    with AicfNoise() if noisy else contextlib.nullcontext():
        loss64 = m64(as64(x), *[as64(t) for t in targets])[1]
    loss64.backward()
    grads = {n: p.grad for n, p in m64.named_parameters()}
    params = dict(model.named_parameters())
    arrays.update(by_initializer(path, params, grads, "grad64"))
    # A parameter the dynamo exporter folded under another name at its
    # own shape (`pos(arange(t))` of the whole table: `embedding_1`).
    initializers = onnx.load(path).graph.initializer
    for t in initializers:
        value = onnx.numpy_helper.to_array(t)
        for pname, p in params.items():
            if (all(i.name != pname for i in initializers) and tuple(p.shape) == value.shape
                    and np.array_equal(p.detach().numpy(), value)):
                arrays[f"grad64.{t.name}"] = grads[pname].numpy().astype(np.float32)
    found = {k[len("grad64."):] for k in arrays if k.startswith("grad64.")}
    if len(found) < len(grads) and name not in NOT_PYTORCHS:
        sys.exit(f"{name}: {len(grads)} parameters, gradients found for {len(found)} initializers: {sorted(found)}")
    # (The distinct parameters: a tied weight's copy is no other.)
    arrays["torch.parameters"] = np.array(len(grads), dtype=np.float32)
    save_file(arrays, os.path.join(out, f"{name}.io.safetensors"))
    print(f"{path}: {os.path.getsize(path)} bytes, loss {loss.item():.6f} (onnxruntime {float(ort_loss):.6f})")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        export(name, out)


if __name__ == "__main__":
    main()
