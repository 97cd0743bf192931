"""PyTorch re-implementations of AICF's example models (benches/parity/run.sh): N optimizer
steps from AICF's initial parameters, compared with AICF's checkpoint after them.
usage: parity.py MODEL OPT LR NSTEPS INIT_CKPT AICF_CKPT AICF_METRICS X.npy Y.npy [--wd W] [--momentum M] [--betas b1,b2] [--clip C]
"""
import sys, json, math, argparse
import numpy as np, torch, torch.nn.functional as F
from safetensors.numpy import load_file
torch.set_num_threads(1)
ap = argparse.ArgumentParser()
for a in ['model','opt','lr','nsteps','init','after','metrics','x','y']: ap.add_argument(a)
ap.add_argument('--wd', type=float, default=0.0); ap.add_argument('--momentum', type=float, default=0.0)
ap.add_argument('--betas', default='0.9,0.999'); ap.add_argument('--clip', type=float, default=None)
ap.add_argument('--gelu', default=None)   # override gelu approximation for experiments
ap.add_argument('--attn-scale', type=float, default=None)
ap.add_argument('--ln-eps', type=float, default=1e-5)
args = ap.parse_args()
lr, N = float(args.lr), int(args.nsteps)
b1, b2 = map(float, args.betas.split(','))

def fwd(name, P, x):
    if name == 'mlp':
        h = F.relu(F.linear(x, P['fc1.weight'], P['fc1.bias']))
        return F.linear(h, P['fc2.weight'], P['fc2.bias'])
    if name == 'cnn':
        h = F.max_pool2d(F.relu(F.conv2d(x, P['conv1.weight'], P['conv1.bias'], padding=1)), 2, 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, P['conv2.weight'], P['conv2.bias'], padding=1)), 2, 2)
        return F.linear(h.reshape(h.shape[0], -1), P['fc.weight'], P['fc.bias'])
    def attn(h, pre, H):
        B, T, C = h.shape; D = C // H
        q = F.linear(h, P[pre+'q_proj.weight'], P[pre+'q_proj.bias']).reshape(B, T, H, D).transpose(1, 2)
        k = F.linear(h, P[pre+'k_proj.weight'], P[pre+'k_proj.bias']).reshape(B, T, H, D).transpose(1, 2)
        v = F.linear(h, P[pre+'v_proj.weight'], P[pre+'v_proj.bias']).reshape(B, T, H, D).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) * (args.attn_scale if args.attn_scale else 1.0 / math.sqrt(D))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float('-inf'))
        o = torch.softmax(s, -1) @ v
        o = o.transpose(1, 2).reshape(B, T, C)
        return F.linear(o, P[pre+'out_proj.weight'], P[pre+'out_proj.bias'])
    def ln(h, pre):
        return F.layer_norm(h, h.shape[-1:], P[pre+'.weight'], P[pre+'.bias'], eps=args.ln_eps)
    if name == 'charlm':
        T = x.shape[1]
        h = P['tok_emb.weight'][x] + P['pos_emb.weight'][:T]
        g = args.gelu or 'none'
        for i in range(2):
            pre = f'blocks.{i}.'
            h = h + attn(ln(h, pre+'ln1'), pre+'attn.', 4)
            m = F.gelu(F.linear(ln(h, pre+'ln2'), P[pre+'mlp.fc.weight'], P[pre+'mlp.fc.bias']), approximate=g)
            h = h + F.linear(m, P[pre+'mlp.proj.weight'], P[pre+'mlp.proj.bias'])
        return F.linear(ln(h, 'ln_f'), P['lm_head.weight'])
    if name == 'tblock':
        g = args.gelu or 'tanh'
        h = x + attn(ln(x, 'block.ln1'), 'block.attn.', 4)
        m = F.gelu(F.linear(ln(h, 'block.ln2'), P['block.mlp.fc.weight'], P['block.mlp.fc.bias']), approximate=g)
        h = h + F.linear(m, P['block.mlp.proj.weight'], P['block.mlp.proj.bias'])
        return F.linear(h, P['head.weight'], P['head.bias'])
    raise SystemExit('unknown model')

def loss_fn(name, P, x, y):
    logits = fwd(name, P, x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

def run(dtype):
    init = load_file(args.init)
    names = [k for k in init if not k.endswith('.exp_avg') and not k.endswith('.exp_avg_sq')
             and not k.endswith('.momentum_buffer') and k != 'step' and '.' in k and init[k].dtype == np.float32]
    P = {k: torch.tensor(init[k], dtype=dtype, requires_grad=True) for k in names}
    x = torch.from_numpy(np.load(args.x)); y = torch.from_numpy(np.load(args.y)).long()
    if x.is_floating_point(): x = x.to(dtype)
    else: x = x.long()
    ps = list(P.values())
    if args.opt == 'sgd': opt = torch.optim.SGD(ps, lr=lr, momentum=args.momentum, weight_decay=args.wd)
    elif args.opt == 'adam': opt = torch.optim.Adam(ps, lr=lr, betas=(b1, b2), eps=1e-8, weight_decay=args.wd)
    elif args.opt == 'adamw': opt = torch.optim.AdamW(ps, lr=lr, betas=(b1, b2), eps=1e-8, weight_decay=args.wd)
    losses = []
    for _ in range(N):
        opt.zero_grad(); l = loss_fn(args.model, P, x, y); l.backward()
        if args.clip: torch.nn.utils.clip_grad_norm_(ps, args.clip)
        opt.step(); losses.append(l.item())
    out = {k: v.detach().double().numpy() for k, v in P.items()}
    for k, v in P.items():
        st = opt.state[v]
        if 'exp_avg' in st: out[k+'.exp_avg'] = st['exp_avg'].double().numpy(); out[k+'.exp_avg_sq'] = st['exp_avg_sq'].double().numpy()
        if st.get('momentum_buffer') is not None: out[k+'.momentum'] = st['momentum_buffer'].double().numpy()
    return losses, out, {k: init[k].astype(np.float64) for k in names}

t32_l, t32, init = run(torch.float32)
t64_l, t64, _ = run(torch.float64)
A = {k: v.astype(np.float64) for k, v in load_file(args.after).items() if v.dtype == np.float32}
al = [json.loads(l)['train_loss'] for l in open(args.metrics)]
print(f'== {args.model} {args.opt} lr={lr} steps={N}')
for i in range(N):
    print(f'step {i+1} loss  aicf {al[i]:.9f}  torch32 {t32_l[i]:.9f}  torch64 {t64_l[i]:.9f}  |aicf-t64|/t64 {abs(al[i]-t64_l[i])/abs(t64_l[i]):.2e}  |t32-t64|/t64 {abs(t32_l[i]-t64_l[i])/abs(t64_l[i]):.2e}')
print(f'{"tensor":40s} {"maxabs(a-t64)":>13s} {"rel(a)":>9s} {"rel(t32)":>9s} {"dRel(a)":>9s} {"dRel(t32)":>9s}')
print('  rel = max|X-t64|/max|t64| ; dRel = same on the change (X - init) for params')
worst, worst_t = 0, 0
for k in sorted(t64):
    if k not in A: print(f'{k:40s} MISSING in aicf checkpoint'); continue
    a, r, t = A[k], t64[k], t32[k]
    sc = np.abs(r).max() or 1.0
    rel_a = np.abs(a-r).max()/sc; rel_t = np.abs(t-r).max()/sc
    line = f'{k:40s} {np.abs(a-r).max():13.3e} {rel_a:9.2e} {rel_t:9.2e}'
    if k in init:
        d = r - init[k]; dsc = np.abs(d).max() or 1.0
        da = np.abs((a-init[k]) - d).max()/dsc; dt = np.abs((t-init[k]) - d).max()/dsc
        line += f' {da:9.2e} {dt:9.2e}'
        worst, worst_t = max(worst, da), max(worst_t, dt)
    else: worst, worst_t = max(worst, rel_a), max(worst_t, rel_t)
    print(line)
extra = sorted(set(A) - set(t64)); 
if extra: print('aicf-only tensors:', extra)
# (A parameter whose exact gradient is 0, as attention's key bias, shows
# rounding noise over ~0 in both: compare the two columns, not one to 1.)
print(f'WORST relative (param change / state): aicf {worst:.2e}, PyTorch fp32 {worst_t:.2e}')
