"""Gradient-level comparison from a 1-step Adam checkpoint: AICF exp_avg = (1-b1)*g, exp_avg_sq = (1-b2)*g^2.
Also checks AICF's Adam update formula against its own moments (isolates the optimizer from gradient noise).
usage: grads.py MODEL INIT AICF_ADAM1_CKPT X Y LR [parity.py options]"""
import sys, numpy as np, torch
sys.argv = [sys.argv[0], sys.argv[1], 'adam', sys.argv[6], '1', sys.argv[2], sys.argv[3], '/dev/null', sys.argv[4], sys.argv[5]] + sys.argv[7:]
src = open(__file__.replace('grads.py', 'parity.py')).read().split('t32_l, t32, init = run')[0]
exec(src)
def grads(dtype):
    init = load_file(args.init)
    names = [k for k in init if '.exp_avg' not in k and k != 'step' and init[k].dtype == np.float32]
    P = {k: torch.tensor(init[k], dtype=dtype, requires_grad=True) for k in names}
    x = torch.from_numpy(np.load(args.x)); y = torch.from_numpy(np.load(args.y)).long()
    x = x.to(dtype) if x.is_floating_point() else x.long()
    loss_fn(args.model, P, x, y).backward()
    return {k: v.grad.double().numpy() for k, v in P.items()}, {k: init[k].astype(np.float64) for k in names}
g64, init = grads(torch.float64); g32, _ = grads(torch.float32)
A = {k: v.astype(np.float64) for k, v in load_file(args.after).items()}
print(f'{"param":36s} {"|g|max":>9s} {"nrm(a)":>9s} {"nrm(t32)":>9s} {"max(a)":>9s} {"max(t32)":>9s} {"adamfmt":>9s}')
print('  nrm = ||g_x - g64|| / ||g64|| ; max = max|g_x-g64|/max|g64| ; adamfmt = max|p1_aicf - (p0 - lr*mhat/(sqrt(vhat)+1e-8))| / lr using AICF own moments')
for k in sorted(g64):
    ga = A[k+'.exp_avg'] / (1 - b1); r = g64[k]; t = g32[k]
    n = np.linalg.norm(r) or 1.0; m = np.abs(r).max() or 1.0
    mh = A[k+'.exp_avg'] / (1 - b1); vh = A[k+'.exp_avg_sq'] / (1 - b2)
    pred = init[k] - lr * mh / (np.sqrt(vh) + 1e-8)
    print(f'{k:36s} {m:9.2e} {np.linalg.norm(ga-r)/n:9.2e} {np.linalg.norm(t-r)/n:9.2e} {np.abs(ga-r).max()/m:9.2e} {np.abs(t-r).max()/m:9.2e} {np.abs(A[k]-pred).max()/lr:9.2e}')
