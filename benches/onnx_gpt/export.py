# A 4-block GPT (width 128, 4 heads, context 128, vocabulary 65) exported
# from PyTorch to ONNX twice: attention written out as nanoGPT writes it
# (masked_fill of a tril) and as F.scaled_dot_product_attention(is_causal).
# Run in a venv with torch and onnx (`make onnx-venv`):
#   target/onnx-venv/bin/python benches/onnx_gpt/export.py   [DIR]   (writes DIR/gpt_manual.onnx, DIR/gpt_sdpa.onnx; DIR defaults to .)
#   target/release/aicf bench gpt_manual.onnx --batch 16 --optimizer adam --steps 30 --threads 2 [--precision bf16]
import os, sys
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(s, d, h, sdpa):
        super().__init__(); s.h=h; s.sdpa=sdpa
        s.ln1=nn.LayerNorm(d); s.qkv=nn.Linear(d,3*d); s.proj=nn.Linear(d,d); s.ln2=nn.LayerNorm(d); s.fc=nn.Linear(d,4*d); s.out=nn.Linear(4*d,d)
    def forward(s, x):
        b,t,d = x.shape; h=s.h
        q,k,v = s.qkv(s.ln1(x)).split(d, dim=2)
        q = q.view(b,t,h,d//h).transpose(1,2); k = k.view(b,t,h,d//h).transpose(1,2); v = v.view(b,t,h,d//h).transpose(1,2)
        if s.sdpa:
            y = F.scaled_dot_product_attention(q,k,v,is_causal=True)
        else:
            att = (q @ k.transpose(-2,-1)) * (1.0/(d//h)**0.5)
            mask = torch.tril(torch.ones(t,t,dtype=torch.bool))
            att = att.masked_fill(~mask, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1,2).reshape(b,t,d)
        x = x + s.proj(y)
        return x + s.out(F.gelu(s.fc(s.ln2(x))))
class Gpt(nn.Module):
    def __init__(s, vocab=65, d=128, h=4, layers=4, ctx=128, sdpa=False):
        super().__init__(); s.tok=nn.Embedding(vocab,d); s.pos=nn.Embedding(ctx,d)
        s.blocks=nn.ModuleList([Block(d,h,sdpa) for _ in range(layers)]); s.ln=nn.LayerNorm(d); s.head=nn.Linear(d,vocab)
    def forward(s, idx):
        t = idx.shape[1]
        x = s.tok(idx) + s.pos(torch.arange(t))
        for b in s.blocks: x = b(x)
        return s.head(s.ln(x))
for sdpa in [False, True]:
    m = Gpt(sdpa=sdpa).eval()
    x = torch.randint(0,65,(16,128))
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", f"gpt_{'sdpa' if sdpa else 'manual'}.onnx")
    torch.onnx.export(m, (x,), out, opset_version=17, dynamo=False, input_names=["input0"], dynamic_axes={"input0": {0: "batch"}})
print("ok")
