// A variational autoencoder exported from PyTorch (`torch.randn_like`:
// RandomNormalLike; tools/onnx/export_loss_models.py's `Vae`) trains on
// its own negative ELBO from the CLI: a note says how its noise is drawn
// (per step from the run's seed, with no gradient; the mean in
// @forward), the loss falls, `aicf eval` scores the checkpoint by the
// same held-out loss as training's last (its noise is drawn from a fixed
// seed), and `predict` decodes the mean. The data (200 rows of 12) is a
// tanh of 4 latent factors with noise.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../onnx/vae.onnx --batch 8 --data %S/inputs/vae-x.npy --epochs 6 --lr 0.01 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck 2>&1 | FileCheck %s
// CHECK: note: RandomNormalLike '{{.*}}' draws afresh each training step from the run's --seed, with no gradient; the held-out loss draws it too, the same numbers at every evaluation (PyTorch's randn_like draws in eval mode too); @forward (`predict`, `eval`'s accuracy) takes its mean instead, as dropout is off there
// CHECK: epoch   1/6  train loss [[FIRST:[0-9.]+]]
// CHECK: final held-out loss [[HELD:[0-9.]+]] after 6 epochs
// The training loss fell: the last epoch's is below the first's.
// RUN: python3 -c "import json; m = [json.loads(l) for l in open('%t/run/metrics.jsonl')]; assert m[-1]['train_loss'] < 0.8 * m[0]['train_loss'], m; print('fell')" | FileCheck %s --check-prefix=FELL
// FELL: fell
// RUN: aicf eval %S/../../onnx/vae.onnx --batch 8 --data %S/inputs/vae-x.npy --checkpoint %t/ck/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVAL
// EVAL: loss {{[0-9.]+}} (the model's @loss) on 40 held-out rows of {{.*}}vae-x.npy
// RUN: cat %t/run/metrics.jsonl > %t/both.txt
// RUN: aicf eval %S/../../onnx/vae.onnx --batch 8 --data %S/inputs/vae-x.npy --checkpoint %t/ck/last.safetensors --out %t/eval2 2>&1 >> %t/both.txt
// RUN: python3 -c "import json, re; t = open('%t/both.txt').read(); held = json.loads(t.splitlines()[5])['val_loss']; ev = float(re.search(r'loss ([0-9.]+) \(the model', t).group(1)); assert abs(held - ev) < 1e-4, (held, ev); print('same')" | FileCheck %s --check-prefix=SAME
// SAME: same
// `predict` decodes the latent mean: deterministic, twice the same file.
// RUN: aicf predict %S/../../onnx/vae.onnx --batch 8 --data %S/inputs/vae-x.npy --checkpoint %t/ck/last.safetensors -o %t/a.npy --values raw --out %t/p1 2>&1 | FileCheck %s --check-prefix=PREDICT
// PREDICT: raw of 200 rows (float32, [200, 12]) written to {{.*}}a.npy
// RUN: aicf predict %S/../../onnx/vae.onnx --batch 8 --data %S/inputs/vae-x.npy --checkpoint %t/ck/last.safetensors -o %t/b.npy --values raw --out %t/p2 2>&1 > /dev/null
// RUN: cmp %t/a.npy %t/b.npy
