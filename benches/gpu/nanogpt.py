"""PyTorch baseline of the nanoGPT shakespeare_char model as AICF builds it.

The architecture is `examples/char_lm/model.rs` at nanoGPT's configuration
(6 layers, 6 heads, width 384, context 256, dropout 0.2, batch 64): token
and position embeddings, pre-norm blocks (separate q, k, v projections with
biases, causal attention, exact GELU MLP of 4x width, dropout after the
embeddings and after each residual branch, none on the attention weights),
a final layer norm and an untied output head without bias. Training is
`aicf train`'s: random windows of the first 80% of the text, the held-out
loss on 256 windows spread over the last 20% in nats per character, AdamW (betas
0.9/0.999 unless --beta2, weight decay 0.1 on every parameter, --clip-norm) with a linear warm-up of
100 steps and a cosine decay to 0.1 x lr at the last step, bf16 autocast.

    python3 nanogpt.py --data tinyshakespeare.txt --mode compile --steps 2000
    python3 nanogpt.py --data tinyshakespeare.txt --mode eager --steps 100

Prints one JSON line: median step ms, tokens/s, MFU against the H100's
989 TFLOP/s dense bf16, and the held-out loss after the steps.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.heads, self.p = heads, p
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln1(x)
        q, k, v = (f(h).view(b, s, self.heads, d // self.heads).transpose(1, 2) for f in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = self.o(y.transpose(1, 2).reshape(b, s, d))
        x = x + F.dropout(y, self.p, self.training)
        y = self.proj(F.gelu(self.fc(self.ln2(x))))
        return x + F.dropout(y, self.p, self.training)


class GPT(nn.Module):
    def __init__(self, vocab=65, context=256, d=384, heads=6, layers=6, p=0.2):
        super().__init__()
        self.p = p
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads, p) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        x = F.dropout(x, self.p, self.training)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--mode", choices=["eager", "compile", "max-autotune"], default="compile")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--dropout", type=float, default=0.2)
    # GPT-2 small's shape (--layers 12 --heads 12 --dim 768 --context 1024
    # --vocab 50257 --dropout 0): random token ids of that vocabulary instead
    # of the text's characters, for the step time and MFU only.
    ap.add_argument("--vocab", type=int, default=None)
    # The 2026-11-24 H100 runs used AdamW's (0.9, 0.999) and no clipping on
    # both sides; nanoGPT's recipe is --beta2 0.99 --clip-norm 1 (aicf
    # train --betas 0.9,0.99 --clip-norm 1).
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--clip-norm", type=float, default=0.0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    ids = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    vocab = len(chars)
    if a.vocab is not None:
        vocab = a.vocab
        ids = torch.randint(0, vocab, (len(ids),), generator=torch.Generator().manual_seed(a.seed))
    # aicf train's split: the last ceil(20%) of the text is held out.
    split = len(ids) - math.ceil(len(ids) * 0.2)
    train, held = ids[:split].cuda(), ids[split:].cuda()
    gen = torch.Generator(device="cuda").manual_seed(a.seed)

    def batch(src, n):
        start = torch.randint(0, len(src) - a.context - 1, (n,), device="cuda", generator=gen)
        at = start[:, None] + torch.arange(a.context, device="cuda")
        return src[at], src[at + 1]

    model = GPT(vocab=vocab, context=a.context, d=a.dim, heads=a.heads, layers=a.layers, p=a.dropout).cuda()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, a.beta2), weight_decay=0.1, fused=True)

    def lr_at(step):
        if step < 100:
            return a.lr * (step + 1) / 100
        t = (step - 100) / max(1, a.steps - 1 - 100)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))

    def loss_of(m, x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(x)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))

    step_model = model
    if a.mode != "eager":
        step_model = torch.compile(model, mode=None if a.mode == "compile" else "max-autotune")

    def step(i):
        for g in opt.param_groups:
            g["lr"] = lr_at(i)
        x, y = batch(train, a.batch)
        loss = loss_of(step_model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_norm)
        opt.step()
        return loss

    model.train()
    t0 = time.perf_counter()
    step(0)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    times = []
    for i in range(1, a.steps):
        s = time.perf_counter()
        step(i)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - s)
    model.eval()
    with torch.no_grad():
        # aicf train's held-out windows: 256 of the held-out text's whole
        # windows, spread evenly over it.
        available = (len(held) - 1) // a.context
        count = min(256, available)
        start = torch.tensor([(w * available // count) * a.context for w in range(count)], device="cuda")
        at = start[:, None] + torch.arange(a.context, device="cuda")
        eb = min(64, a.batch)
        batches = range(0, count - count % eb, eb)
        held_loss = sum(loss_of(model, held[at[i : i + eb]], held[at[i : i + eb] + 1]).item() for i in batches) / len(batches)
    times.sort()
    ms = times[len(times) // 2] * 1e3
    tokens = a.batch * a.context
    # 6 N per token for the matrix products, and attention's two products
    # (causal: half of 4 s d per token per layer, times 3 for fwd + bwd).
    flops = 6 * params * tokens + 6 * a.layers * a.batch * a.context * a.context * a.dim
    print(json.dumps({
        "bench": "nanogpt_torch", "mode": a.mode, "steps": a.steps, "step_ms": round(ms, 3),
        "tokens_per_s": round(tokens / ms * 1e3), "mfu": round(flops / (ms * 1e-3) / 989e12, 4),
        "first_step_s": round(first, 2), "held_out_loss": None if a.vocab else round(held_loss, 4), "params": params,
        "shape": f"{a.layers}x{a.dim}, {a.heads} heads, context {a.context}, vocab {vocab}, batch {a.batch}",
        "device": torch.cuda.get_device_name(),
    }), flush=True)


if __name__ == "__main__":
    main()
